"""The workspace rule, as pure decisions over paths already resolved: which
workspace a request asks for, and why a publisher may not have its run work
there — a system folder, outside every root it may use, the state folder (or
inside it, or above it), a symlink out of the root, not a folder — each reason
naming the field. Only a workspace inside a root is said to exist or not."""

from __future__ import annotations

import pytest

from agentledger.events.workspaces import (
    Asked,
    Resolved,
    Root,
    allowed_roots,
    asked_workspace,
    stays_inside,
    works_in_copy,
    workspace_refusal,
)

STATE = "/home/u/.local/state/agentledger"
ROOTS = (Root("/srv/billing", "/srv/billing"),)


def plain(path: str, *, is_dir: bool = True) -> Resolved:
    """A path with no link on it: each step is the path so far."""
    parts = [p for p in path.split("/") if p]
    steps = tuple("/" + "/".join(parts[: i + 1]) for i in range(len(parts))) or ("/",)
    return Resolved(real=steps[-1], steps=steps, is_dir=is_dir)


def refusal(
    path: str, *, found: Resolved | None = None, roots: tuple[Root, ...] = ROOTS
) -> str | None:
    asked = Asked("workspace", path, path)
    return workspace_refusal(
        "billing-svc", asked, found or plain(path), roots=roots, state_dir=STATE
    )


def test_the_requests_own_workspace_overrides_the_specs_and_must_be_absolute() -> None:
    assert asked_workspace("/srv/billing/a", "ws", "/srv/billing") == Asked(
        "workspace", "/srv/billing/a", "/srv/billing/a"
    )
    assert asked_workspace("srv/a", None, "/srv") == "workspace: 'srv/a' is not an absolute path"


def test_a_relative_spec_workspace_resolves_from_an_absolute_base_dir_only() -> None:
    assert asked_workspace(None, "./ws", "/srv/billing/job") == Asked(
        "spec.workspace", "./ws", "/srv/billing/job/./ws"
    )
    for base_dir in (None, "job", "./"):
        reason = asked_workspace(None, "./ws", base_dir)
        assert isinstance(reason, str) and reason.startswith("spec.workspace: './ws' is relative")
    assert asked_workspace(None, "/srv/x", None) == Asked("spec.workspace", "/srv/x", "/srv/x")


def test_no_workspace_asked_is_none() -> None:
    assert asked_workspace(None, None, "/srv") is None


def test_a_path_too_long_or_with_a_nul_is_refused_before_the_disk_is_asked() -> None:
    assert asked_workspace("/srv/" + "a" * 5000, None, None) == (
        "workspace: the path is 5,005 characters long (at most 4,096)"
    )
    assert asked_workspace(None, "ws\x00", "/srv") == "spec.workspace: the path has a NUL character"


def test_a_workspace_inside_a_granted_root_is_allowed_and_so_is_the_root_itself() -> None:
    assert refusal("/srv/billing/jobs/42") is None
    assert refusal("/srv/billing") is None


def test_a_workspace_outside_every_root_is_refused_naming_the_field_the_publisher_and_its_roots() -> (
    None
):
    assert refusal("/etc") == (
        "workspace: '/etc' is not inside a workspace root granted to 'billing-svc' "
        "(granted: ['/srv/billing'])"
    )
    assert refusal("/srv/billing-old") is not None, "a sibling with the root's name as a prefix"
    assert refusal("/srv/x", roots=()) == (
        "workspace: '/srv/x' is not inside a workspace root granted to 'billing-svc' (granted: none)"
    )


@pytest.mark.parametrize("path", ["/proc/self", "/proc", "/sys/kernel", "/dev/shm", "/dev"])
def test_system_folders_are_never_workspaces_even_under_the_root_slash(path: str) -> None:
    reason = refusal(path, roots=(Root("/", "/"),))
    assert reason is not None and reason.startswith(f"workspace: {path!r} is in /")
    assert "are never workspaces" in reason


def test_a_path_through_a_system_folder_is_refused_wherever_it_leads() -> None:
    cwd = Resolved(
        real="/srv/billing/x", steps=("/proc", "/proc/42", "/srv/billing/x"), is_dir=True
    )
    reason = refusal("/proc/self/cwd", found=cwd)
    assert reason is not None and reason.startswith("workspace: '/proc/self/cwd' is in /proc")


def test_the_state_folder_what_is_inside_it_and_what_holds_it_are_refused() -> None:
    everything = (Root("/", "/"),)
    assert refusal(STATE, roots=everything) == f"workspace: {STATE!r} is the state folder"
    inside = refusal(f"{STATE}/workspaces", roots=everything)
    assert inside is not None and "is inside the state folder" in inside
    for above in ("/home/u", "/home", "/"):
        assert refusal(above, roots=everything) == f"workspace: {above!r} holds the state folder"
    assert refusal("/home/u/project", roots=everything) is None


def test_a_symlink_that_leads_out_of_the_root_is_refused() -> None:
    # /srv/billing/link -> /etc: the whole path resolves outside the root
    out = Resolved(real="/etc", steps=("/srv", "/srv/billing", "/etc"), is_dir=True)
    assert refusal("/srv/billing/link", found=out) is not None
    assert "not inside a workspace root" in (refusal("/srv/billing/link", found=out) or "")
    # /srv/billing/out -> /tmp/x, and /tmp/x/back -> /srv/billing/data: out and back in
    back = Resolved(
        real="/srv/billing/data", steps=("/srv", "/srv/billing", "/tmp/x", "/srv/billing/data"),
        is_dir=True,
    )  # fmt: skip
    assert refusal("/srv/billing/out/back", found=back) == (
        "workspace: '/srv/billing/out/back' goes through a symlink that leads outside its "
        "workspace root"
    )


def test_dot_dot_that_leaves_the_root_is_refused_even_when_it_comes_back() -> None:
    escaping = Resolved(
        real="/etc", steps=("/srv", "/srv/billing", "/srv", "/", "/etc"), is_dir=True
    )
    assert "not inside a workspace root" in (
        refusal("/srv/billing/../../etc", found=escaping) or ""
    )
    back = Resolved(
        real="/srv/billing/a", steps=("/srv", "/srv/billing", "/srv", "/srv/billing", "/srv/billing/a"),
        is_dir=True,
    )  # fmt: skip
    assert refusal("/srv/billing/../billing/a", found=back) is not None


def test_a_path_that_enters_the_root_through_a_link_from_outside_is_inside_it() -> None:
    via = Resolved(real="/srv/billing/a", steps=("/data", "/srv/billing/a"), is_dir=True)
    assert refusal("/data/link", found=via) is None


def test_whether_it_is_a_folder_is_told_only_inside_a_root() -> None:
    assert refusal("/srv/billing/file.txt", found=plain("/srv/billing/file.txt", is_dir=False)) == (
        "workspace: '/srv/billing/file.txt' is not a folder"
    )
    missing_outside = refusal("/opt/secret", found=plain("/opt/secret", is_dir=False))
    assert missing_outside is not None and "not a folder" not in missing_outside


def test_the_reason_names_the_spec_field_when_the_spec_asked() -> None:
    asked = Asked("spec.workspace", "../../etc", "/srv/billing/job/../../etc")
    reason = workspace_refusal("b", asked, plain("/etc"), roots=ROOTS, state_dir=STATE)
    assert reason is not None and reason.startswith("spec.workspace: '../../etc' is not inside")


def test_a_publishers_roots_are_the_operators_then_its_grants_each_once() -> None:
    assert allowed_roots(("/srv/a", "/srv/b"), ("/srv/b", "/srv/c")) == (
        "/srv/a",
        "/srv/b",
        "/srv/c",
    )
    assert allowed_roots((), ()) == ()


def test_a_run_works_in_a_copy_unless_its_spec_says_false() -> None:
    assert works_in_copy(None) and works_in_copy(True)
    assert not works_in_copy(False)


def test_a_path_must_enter_the_root_to_stay_inside_it() -> None:
    assert not stays_inside(("/a", "/b"), "/srv")
    assert stays_inside(("/srv", "/srv/x"), "/srv")

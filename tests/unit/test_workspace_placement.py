"""The intake's workspace line on a real disk (no Redis): a request's workspace
resolved on the server and held to the rule, then copied to
`<state>/workspaces/<run id>` — links as links, sockets and FIFOs left out,
bounded by the operator's maxima — or used in place when the spec says so. A
request handled twice keeps its first copy; another request under the same run
id never gets it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.publishers import GrantedPrincipal, Publisher
from agentledger.schemas.spec import RunSpec
from agentledger.services.loops.inbox_auth import Granted
from agentledger.services.loops.inbox_parse import Rejected
from agentledger.services.loops.intake_workspaces import Workspaces
from agentledger.services.settings import Settings


def grant(*roots: Path | str, name: str = "billing-svc") -> Granted:
    return Granted(
        name,
        Publisher(
            key="0" * 64, principals=(GrantedPrincipal(id="*", tenant="*"),), scopes=("*",),
            queues=("*",), workspaces=tuple(str(r) for r in roots),
        ),
    )  # fmt: skip


def spec(**changes: object) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "t",
            "principal": {"id": "alice", "tenant": "shop-1"},
            "model": {"scripted": [{"end_turn": "done"}]},
            **changes,
        }
    )


def request(
    workspace: str | None = None, *, base_dir: str | None = None, **changes: object
) -> RunRequested:
    """A request naming `workspace` itself; `changes` are the spec's (its own `spec_workspace`)."""
    if "spec_workspace" in changes:
        changes["workspace"] = changes.pop("spec_workspace")
    return RunRequested(spec=spec(**changes), workspace=workspace, base_dir=base_dir)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A granted root holding a workspace `ws` (a file, a folder, a link inside)."""
    ws = tmp_path / "root" / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "stock.json").write_text('{"A1": 5}\n')
    (ws / "src" / "calc.py").write_text("def add(a, b): return a + b\n")
    (ws / "src" / "calc.py").chmod(0o640)
    os.symlink("src/calc.py", ws / "calc-link")
    return tmp_path / "root"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "publishers.yaml").write_text("publishers: {}\n")
    return folder


def workspaces(state: Path, **settings: object) -> Workspaces:
    return Workspaces(Settings(state_dir=str(state), **settings))  # type: ignore[arg-type]


def refused(ws: Workspaces, message: RunRequested, by: Granted) -> str:
    with pytest.raises(Rejected) as caught:
        ws.decide(message, by)
    return caught.value.reason


def test_a_workspace_in_a_granted_root_is_copied_under_the_state_folder_by_run_id(
    root: Path, state: Path
) -> None:
    ws = workspaces(state)
    placement = ws.decide(request(str(root / "ws")), grant(root))
    placed = ws.place(placement, "r-1")
    copy = state / "workspaces" / "r-1"
    assert placed.path == str(copy)
    assert (copy / "stock.json").read_text() == '{"A1": 5}\n'
    assert (copy / "src" / "calc.py").stat().st_mode & 0o777 == 0o640
    assert os.readlink(copy / "calc-link") == "src/calc.py", "a link is copied as a link"
    assert placed.made is not None and placed.made.entries == 4 and placed.made.skipped == 0
    assert sorted(p.name for p in (state / "workspaces").iterdir()) == [".meta", "r-1"]
    assert not any((state / "workspaces" / ".meta" / "partial").iterdir())


def test_a_spec_workspace_resolves_from_base_dir_and_a_roots_from_the_settings_count_too(
    root: Path, state: Path
) -> None:
    ws = workspaces(state, workspace_roots=(str(root),))
    placement = ws.decide(request(None, base_dir=str(root), spec_workspace="./ws"), grant())
    assert placement is not None and placement.real == str(root / "ws")


def test_no_workspace_asked_means_none(state: Path) -> None:
    ws = workspaces(state)
    assert ws.decide(request(), grant()) is None
    assert ws.place(None, "r-1").path is None


def test_copy_workspace_false_works_in_the_folder_itself_resolved(root: Path, state: Path) -> None:
    os.symlink(root / "ws", root / "alias")
    ws = workspaces(state)
    placement = ws.decide(request(str(root / "alias"), copy_workspace=False), grant(root))
    assert ws.place(placement, "r-1").path == str(root / "ws")
    assert not (state / "workspaces").exists()


def test_a_socket_and_a_fifo_in_the_workspace_are_left_out_of_the_copy(
    root: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root / "ws")  # a socket's path must be short
    listening = socket.socket(socket.AF_UNIX)
    listening.bind("redis.sock")
    os.mkfifo(root / "ws" / "src" / "pipe")
    try:
        ws = workspaces(state)
        placed = ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-1")
    finally:
        listening.close()
    copy = Path(placed.path or "")
    assert not (copy / "redis.sock").exists() and not (copy / "redis.sock").is_symlink()
    assert not (copy / "src" / "pipe").exists()
    assert (copy / "src" / "calc.py").exists()
    assert placed.made is not None and placed.made.skipped == 2


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        ({"workspace_max_bytes": 20}, "holds more than 20 bytes (AGENTLEDGER_WORKSPACE_MAX_BYTES"),
        (
            {"workspace_max_files": 3},
            "has more than 3 files and folders (AGENTLEDGER_WORKSPACE_MAX_FILES)",
        ),
    ],
)
def test_a_workspace_beyond_the_operators_maxima_is_refused_with_the_numbers_and_nothing_is_left(
    root: Path, state: Path, limit: dict[str, int], expected: str
) -> None:
    ws = workspaces(state, **limit)
    placement = ws.decide(request(str(root / "ws")), grant(root))
    with pytest.raises(Rejected) as caught:
        ws.place(placement, "r-1")
    assert caught.value.reason.startswith(f"workspace: {str(root / 'ws')!r} {expected}")
    assert not (state / "workspaces" / "r-1").exists()
    assert not any((state / "workspaces" / ".meta" / "partial").iterdir())


def test_a_request_handled_again_keeps_the_copy_its_run_has_changed(
    root: Path, state: Path
) -> None:
    ws = workspaces(state)
    placement = ws.decide(request(str(root / "ws")), grant(root))
    first = ws.place(placement, "r-1")
    copy = Path(first.path or "")
    (copy / "stock.json").write_text('{"A1": 3}\n')  # the run reserved two
    (root / "ws" / "stock.json").write_text('{"A1": 99}\n')  # and the source moved on

    again = ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-1")

    assert again.path == first.path and again.made is None
    assert (copy / "stock.json").read_text() == '{"A1": 3}\n'


def test_another_request_under_the_same_run_id_never_gets_its_copy(root: Path, state: Path) -> None:
    ws = workspaces(state)
    ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-1")
    other = ws.decide(request(str(root / "ws")), grant(root, name="other-svc"))
    with pytest.raises(Rejected) as caught:
        ws.place(other, "r-1")
    assert "run 'r-1' has a workspace copy of another request already" in caught.value.reason


def test_a_copy_made_for_a_run_that_was_not_created_is_discarded(root: Path, state: Path) -> None:
    ws = workspaces(state)
    placed = ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-1")
    ws.discard(placed, "r-1")
    assert not (state / "workspaces" / "r-1").exists()
    kept = ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-2")
    ws.discard(ws.place(ws.decide(request(str(root / "ws")), grant(root)), "r-2"), "r-2")
    assert Path(kept.path or "").exists(), "a copy kept from before is never discarded"


def test_a_symlink_in_a_granted_root_that_points_outside_is_refused(
    root: Path, state: Path
) -> None:
    os.symlink("/etc", root / "etc-link")
    reason = refused(workspaces(state), request(str(root / "etc-link")), grant(root))
    assert reason == (
        f"workspace: {str(root / 'etc-link')!r} is not inside a workspace root granted to "
        f"'billing-svc' (granted: [{str(root)!r}])"
    )


def test_a_link_out_of_the_root_and_back_in_is_refused(
    root: Path, state: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(root / "ws", outside / "back")
    os.symlink(outside, root / "out")
    reason = refused(workspaces(state), request(str(root / "out" / "back")), grant(root))
    assert "goes through a symlink that leads outside its workspace root" in reason


def test_a_relative_spec_workspace_escaping_with_dot_dot_is_refused(
    root: Path, state: Path
) -> None:
    message = request(None, base_dir=str(root / "ws"), spec_workspace="../../../../../../etc")
    reason = refused(workspaces(state), message, grant(root))
    assert reason.startswith(
        "spec.workspace: '../../../../../../etc' is not inside a workspace root"
    )


@pytest.mark.parametrize("path", ["/proc/self", "/proc/self/cwd", "/sys", "/dev/shm"])
def test_system_folders_are_refused_even_for_the_root_slash(state: Path, path: str) -> None:
    reason = refused(workspaces(state), request(path), grant("/"))
    assert reason.startswith(f"workspace: {path!r}") and "never workspaces" in reason


def test_the_state_folder_its_workspaces_and_its_ancestors_are_refused(state: Path) -> None:
    ws = workspaces(state)
    assert (
        refused(ws, request(str(state)), grant("/"))
        == f"workspace: {str(state)!r} is the state folder"
    )
    (state / "workspaces" / "r-other").mkdir(parents=True)
    for inside in (state / "workspaces", state / "workspaces" / "r-other"):
        assert "is inside the state folder" in refused(ws, request(str(inside)), grant("/"))
    for above in (state.parent, Path("/")):
        assert (
            refused(ws, request(str(above)), grant("/"))
            == f"workspace: {str(above)!r} holds the state folder"
        )


def test_the_state_folder_reached_through_a_link_is_refused(root: Path, state: Path) -> None:
    os.symlink(state, root / "state-link")
    reason = refused(workspaces(state), request(str(root / "state-link")), grant("/"))
    assert reason == f"workspace: {str(root / 'state-link')!r} is the state folder"


def test_a_relative_request_workspace_and_a_relative_spec_one_without_base_dir_are_refused(
    state: Path,
) -> None:
    ws = workspaces(state)
    assert refused(ws, request("ws"), grant("/")) == "workspace: 'ws' is not an absolute path"
    reason = refused(ws, request(None, spec_workspace="ws"), grant("/"))
    assert reason.startswith("spec.workspace: 'ws' is relative, and base_dir None")


def test_a_file_or_a_missing_folder_inside_a_root_is_not_a_folder(root: Path, state: Path) -> None:
    ws = workspaces(state)
    for path in (root / "ws" / "stock.json", root / "nothing"):
        assert (
            refused(ws, request(str(path)), grant(root))
            == f"workspace: {str(path)!r} is not a folder"
        )


def test_a_workspace_nested_deeper_than_the_copy_goes_is_refused(root: Path, state: Path) -> None:
    deep = root / "deep"
    path = deep
    for _ in range(130):
        path = path / "d"
    path.mkdir(parents=True)
    ws = workspaces(state)
    with pytest.raises(Rejected) as caught:
        ws.place(ws.decide(request(str(deep)), grant(root)), "r-1")
    assert "is nested deeper than 128 folders" in caught.value.reason


@pytest.fixture(autouse=True)
def _umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_embedded_runs_own_grant_has_the_root_slash(tmp_path: Path) -> None:
    from agentledger.services.adapters.publishers import publishers_file

    path = str(tmp_path / "publishers.yaml")
    signer, _ = publishers_file.local_signer(path, str(tmp_path))
    assert signer.name == publishers_file.local_name(str(tmp_path))
    assert publishers_file.read(path).publishers[signer.name].workspaces == ("/",)

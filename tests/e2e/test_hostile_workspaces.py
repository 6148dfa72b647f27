"""The hostile suite's workspace half: a publisher with a narrow grant (one
principal, two scopes, one workspace root — the test's folder, which holds the
state folder, as a careless operator might grant) asks, properly signed, for
workspaces the server must never let a run work in: /etc with a file check on
/etc/shadow, the state folder with a command check that would rewrite the
publishers file, an ancestor of the state folder, /proc/self, the other runs'
copies, a link in the root that leads out, a relative spec workspace that climbs
out with `..`. Each is rejected by the intake with the reason naming the field,
and none creates a run or a copy. Next to them, requests within the root work:
each run works in a copy under `<state>/workspaces/<run id>` (sockets and FIFOs
left out of it), a file check cannot read through a link to /etc/passwd, and
the same request published again keeps the copy its run changed."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from e2ekit import Cli, copy_example, of_type, snapshot, start_workers, stop_workers

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.inbox.redis_inbox import rejected_reason
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.keys import Keys

WAIT_S = 60.0
PUBLISHER = "billing-svc"


@dataclass(frozen=True)
class Attack:
    label: str
    says: str  # the reason starts with it
    run_id: str
    entry_id: str


@dataclass
class Suite:
    cli: Cli
    client: redis.Redis
    keys: Keys
    inventory: Path
    attacks: list[Attack]
    reasons: dict[str, str]  # label -> the reason the intake gave
    publishers_before: bytes
    socket_run: str  # submitted: its workspace holds a socket and a FIFO
    link_run: str  # submitted: a file check on a link to /etc/passwd
    again_run: str  # published twice
    again_first_copy: dict[str, bytes]  # its copy after the run, before it was published again


def _spec(inventory: Path, **changes: Any) -> RunSpec:
    data = yaml.safe_load((inventory / "spec.yaml").read_text())
    return RunSpec.model_validate({**data, **changes})


def _add(cli: Cli, name: str, *args: str) -> str:
    done = cli("publishers", "add", name, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _submit(cli: Cli, spec_file: Path) -> str:
    done = cli("submit", "--as", PUBLISHER, spec_file)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _attacks(
    cli: Cli, inventory: Path, outside: Path, legit: str
) -> list[tuple[str, str, RunRequested]]:
    """(label, what the reason starts with, the request) of every hostile request."""
    state = cli.state_dir
    shadow = [{"file": "shadow", "contains": "root"}]
    rewrite = [{"command": "echo '  evil: {key: \"00\"}' >> publishers.yaml"}]
    os.symlink("/etc", cli.cwd / "etc-link")  # in the granted root, leading out of it
    os.symlink(outside, cli.cwd / "out")  # out of the root, and from there back in
    os.symlink(inventory / "ws", outside / "back")
    asked: list[tuple[str, str, dict[str, Any]]] = [
        ("/etc, with a file check on /etc/shadow", "workspace: '/etc' is not inside a workspace root "
         f"granted to {PUBLISHER!r} (granted: [{str(cli.cwd)!r}])", {"workspace": "/etc", "acceptance": shadow}),
        ("the state folder, with a check that rewrites the publishers file",
         f"workspace: {str(state)!r} is the state folder", {"workspace": str(state), "acceptance": rewrite}),
        ("an ancestor of the state folder", f"workspace: {str(cli.cwd)!r} holds the state folder",
         {"workspace": str(cli.cwd)}),
        ("/proc/self", "workspace: '/proc/self' is in /proc", {"workspace": "/proc/self"}),
        ("/proc/self/cwd", "workspace: '/proc/self/cwd' is in /proc", {"workspace": "/proc/self/cwd"}),
        ("the other runs' copies", f"workspace: {str(state / 'workspaces')!r} is inside the state folder",
         {"workspace": str(state / "workspaces")}),
        ("another run's copy", f"workspace: {str(state / 'workspaces' / legit)!r} is inside the state folder",
         {"workspace": str(state / "workspaces" / legit)}),
        ("a link in the root to /etc", f"workspace: {str(cli.cwd / 'etc-link')!r} is not inside a workspace root",
         {"workspace": str(cli.cwd / "etc-link")}),
        ("a link out of the root and back", f"workspace: {str(cli.cwd / 'out' / 'back')!r} goes through a "
         "symlink that leads outside its workspace root", {"workspace": str(cli.cwd / "out" / "back")}),
        ("a spec workspace climbing out with ..", "spec.workspace: '../../../../../../../../etc' is not inside "
         "a workspace root", {"spec_workspace": "../../../../../../../../etc"}),
        ("a spec workspace climbing into the state folder", "spec.workspace: '../state' is the state folder",
         {"spec_workspace": "../state"}),
        ("a relative workspace", "workspace: 'ws' is not an absolute path", {"workspace": "ws"}),
        ("a relative spec workspace and no base_dir", "spec.workspace: './ws' is relative",
         {"spec_workspace": "./ws", "base_dir": None}),
    ]  # fmt: skip
    out = []
    for n, (label, says, ask) in enumerate(asked, 1):
        run_id = f"r-ws-{n}"
        changes: dict[str, Any] = {"workspace": ask.get("spec_workspace")}
        if "acceptance" in ask:
            changes["acceptance"] = ask["acceptance"]
        message = RunRequested(
            run_id=run_id, request_id=run_id, spec=_spec(inventory, **changes),
            base_dir=ask.get("base_dir", str(inventory)), workspace=ask.get("workspace"), queue="default",
        )  # fmt: skip
        out.append((label, says, message))
    return out


def _wait_rejected(client: redis.Redis, keys: Keys, attacks: list[Attack]) -> dict[str, str]:
    deadline = time.monotonic() + WAIT_S
    found: dict[str, str] = {}
    while time.monotonic() < deadline and len(found) < len(attacks):
        for a in attacks:
            if a.label not in found and (reason := rejected_reason(client, keys, a.entry_id)):
                found[a.label] = reason
        time.sleep(0.2)
    missing = [a.label for a in attacks if a.label not in found]
    assert not missing, f"not rejected within {WAIT_S:g}s: {missing}"
    return found


def _wait_handled(client: redis.Redis, keys: Keys, entry_id: str) -> None:
    """Until the intake has taken the entry (it leaves the inbox, or is rejected)."""
    part, publisher, stream_id = entry_id.split("/")  # as `publish` names it
    deadline = time.monotonic() + WAIT_S
    while client.xrange(keys.inbox(int(part), publisher), stream_id, stream_id):
        assert time.monotonic() < deadline, f"{entry_id} was not taken within {WAIT_S:g}s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Suite]:
    cli = make_cli(tmp_path_factory.mktemp("hostile-workspaces"))
    outside = tmp_path_factory.mktemp("outside-the-root")
    inventory = copy_example("inventory", cli.cwd)
    key = _add(cli, PUBLISHER, "--principal", "alice@shop-1", "--scopes", "stock:read,stock:write",
               "--workspaces", str(cli.cwd))  # fmt: skip
    signer = Signer(PUBLISHER, key)
    # a workspace holding a unix socket (a server listening) and a FIFO
    with_socket = inventory / "ws-socket"
    with_socket.mkdir()
    for name in ("stock.json", "check_stock.py"):
        (with_socket / name).write_bytes((inventory / "ws" / name).read_bytes())
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(with_socket / "redis.sock"))
    listening.listen(1)
    os.mkfifo(with_socket / "pipe")
    (inventory / "spec_socket.yaml").write_text(
        (inventory / "spec.yaml").read_text().replace("workspace: ./ws ", "workspace: ./ws-socket ")
    )
    # a workspace with a link to /etc/passwd, and a file check on it
    with_link = inventory / "ws-link"
    with_link.mkdir()
    os.symlink("/etc/passwd", with_link / "passwd")
    link_spec = yaml.safe_load((inventory / "spec.yaml").read_text())
    link_spec.update(workspace="./ws-link", acceptance=[{"file": "passwd", "contains": "root"}])
    link_spec["model"] = {"scripted": [{"end_turn": "the passwd file says root"}]}
    (inventory / "spec_link.yaml").write_text(yaml.safe_dump(link_spec))

    workers = start_workers(cli, tools=["inventory_tools"], tool_path=inventory)
    client = cli.redis()
    keys = Keys(cli.env["AGENTLEDGER_PREFIX"], 16)
    publishers_before = (cli.state_dir / "publishers.yaml").read_bytes()
    try:
        socket_run = _submit(cli, inventory / "spec_socket.yaml")
        link_run = _submit(cli, inventory / "spec_link.yaml")
        again = RunRequested(
            run_id="r-again", request_id="r-again", spec=_spec(inventory), base_dir=str(inventory),
            queue="default",
        )  # fmt: skip
        publish(client, keys, again, signer=signer)
        cli.wait_ended([socket_run, link_run, "r-again"], WAIT_S)
        again_first_copy = snapshot(cli.workspace("r-again"))
        attacks = [
            Attack(label, says, m.run_id or "", publish(client, keys, m, signer=signer))
            for label, says, m in _attacks(cli, inventory, outside, socket_run)
        ]
        reasons = _wait_rejected(client, keys, attacks)
        _wait_handled(client, keys, publish(client, keys, again, signer=signer))
        yield Suite(
            cli, client, keys, inventory, attacks, reasons, publishers_before, socket_run,
            link_run, "r-again", again_first_copy,
        )  # fmt: skip
    finally:
        stop_workers([workers])
        listening.close()
        client.close()


def test_every_hostile_workspace_is_rejected_with_the_reason_naming_its_field(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = [
        f"{a.label}: expected {a.says!r}, got {suite.reasons[a.label]!r}"
        for a in suite.attacks
        if not suite.reasons[a.label].startswith(a.says)
    ]
    with capsys.disabled():
        print(
            f"\nhostile workspaces: {len(suite.attacks)} asked for by a narrow publisher; "
            f"rejected with their reason: {len(suite.attacks) - len(wrong)}; runs created: "
            f"{sum(bool(suite.client.exists(suite.keys.run(a.run_id))) for a in suite.attacks)}"
        )
    assert wrong == []


def test_no_hostile_workspace_created_a_run_or_a_copy(suite: Suite) -> None:
    hostile = {a.run_id for a in suite.attacks}
    assert not hostile & set(suite.cli.runs())
    assert not any(suite.client.exists(suite.keys.run(r)) for r in hostile)
    copies = {
        p.name for p in (suite.cli.state_dir / "workspaces").iterdir() if not p.name.startswith(".")
    }
    assert copies == {suite.socket_run, suite.link_run, suite.again_run}


def test_the_publishers_file_was_not_touched(suite: Suite) -> None:
    assert (suite.cli.state_dir / "publishers.yaml").read_bytes() == suite.publishers_before


def test_a_run_in_the_granted_root_works_in_a_copy_under_the_state_folder_without_the_socket_or_fifo(
    suite: Suite,
) -> None:
    events = suite.cli.events(suite.socket_run)
    [created] = of_type(events, "RunCreated")
    copy = suite.cli.workspace(suite.socket_run)
    assert created["workspace"] == str(copy)
    assert events[-1]["type"] == "RunCompleted", [e["type"] for e in events]
    assert json.loads((copy / "stock.json").read_text())["A1"]["reserved"] == 2
    assert sorted(p.name for p in copy.iterdir()) == ["check_stock.py", "stock.json"]
    source = suite.inventory / "ws-socket"
    assert (source / "stock.json").read_bytes() == (
        suite.inventory / "ws" / "stock.json"
    ).read_bytes()
    assert (source / "redis.sock").is_socket() and (source / "pipe").is_fifo()


def test_a_file_check_cannot_read_through_a_link_to_etc_passwd(suite: Suite) -> None:
    events = suite.cli.events(suite.link_run)
    checked = of_type(events, "AcceptanceChecked")
    assert checked and not any(c["passed"] for c in checked)
    reason = checked[0]["evidence"]["reason"]
    assert reason.startswith("'passwd' is not a file in the workspace: ") and "outside" in reason
    log = suite.cli("tail", "--run", suite.link_run, "--json").stdout
    for line in Path("/etc/passwd").read_text().splitlines()[:5]:
        assert line not in log, "a line of /etc/passwd is in the run's log"


def test_the_same_request_published_again_keeps_the_copy_its_run_changed(suite: Suite) -> None:
    copy = suite.cli.workspace(suite.again_run)
    assert snapshot(copy) == suite.again_first_copy
    assert json.loads((copy / "stock.json").read_text())["A1"]["reserved"] == 2
    events = suite.cli.events(suite.again_run)
    assert [e["type"] for e in events].count("RunCreated") == 1

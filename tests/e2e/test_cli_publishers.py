"""Publishers through the CLI, as an operator sets one up and a system uses it:
`publishers add` files a publisher and prints its key once; `submit --as` signs
with it and the run completes holding the scopes its grant allows; a request
its grant does not cover is refused before it is sent; an entry forged with
another key is rejected by the intake with its reason and creates no run."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.signature import entry
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.keys import Keys

REJECTED_WITHIN_S = 20.0


@pytest.fixture
def inventory(cli: Cli) -> Path:
    return copy_example("inventory", cli.cwd)


@pytest.fixture
def workers(cli: Cli, inventory: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_workers(cli, tools=["inventory_tools"], tool_path=inventory)
    yield proc
    stop_workers([proc])


def add(cli: Cli, name: str, *args: str) -> str:
    done = cli("publishers", "add", name, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def wait_completed(cli: Cli, run_id: str, timeout_s: float = 30) -> list[dict]:
    def ended(events: list[dict]) -> bool:
        return any(e["type"] in ("RunCompleted", "RunFailed") for e in events)

    return cli.wait_events(run_id, ended, timeout_s)


def test_publishers_add_prints_the_key_once_and_files_it_for_the_owner_only(cli: Cli) -> None:
    key = add(
        cli, "billing-svc", "--principal", "alice@shop-1", "--scopes", "stock:read,stock:write"
    )
    assert re.fullmatch(r"[0-9a-f]{64}", key), key
    listed = cli("publishers", "list", "--json")
    assert listed.returncode == 0 and key not in listed.stdout
    row = json.loads(listed.stdout)["publishers"]["billing-svc"]
    assert row == {"principals": ["alice@shop-1"], "scopes": ["stock:read", "stock:write"],
                   "queues": ["default"], "workspaces": [], "key": "(in the file)"}  # fmt: skip
    path = cli.state_dir / "publishers.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = cli("publishers", "add", "billing-svc", "--principal", "alice@shop-1")
    assert again.returncode == 2 and "is in" in again.stderr and "already" in again.stderr
    bad = cli("publishers", "add", "x", "--principal", "alice")
    assert bad.returncode == 2 and "'alice' is not ID@TENANT" in bad.stderr
    relative = cli("publishers", "add", "y", "--principal", "a@t", "--workspaces", "/srv/a,srv/b")
    assert (
        relative.returncode == 2
        and "--workspaces: 'srv/b' is not an absolute folder" in relative.stderr
    )
    rooted = cli("publishers", "add", "z", "--principal", "a@t", "--workspaces", "/srv/a,/srv/b/")
    assert rooted.returncode == 0, rooted.stderr
    listed = json.loads(cli("publishers", "list", "--json").stdout)["publishers"]
    assert listed["z"]["workspaces"] == ["/srv/a", "/srv/b"] and "y" not in listed
    assert "Traceback" not in again.stderr + bad.stderr + relative.stderr


def test_submit_as_a_publisher_runs_to_completion_and_a_forged_request_is_rejected(
    cli: Cli, inventory: Path, workers: subprocess.Popen[str]
) -> None:
    add(cli, "billing-svc", "--principal", "alice@shop-1", "--scopes", "stock:read,stock:write",
        "--workspaces", str(inventory))  # fmt: skip
    spec_path = inventory / "spec.yaml"

    unsigned = cli("submit", spec_path)
    assert unsigned.returncode == 2 and "pass --as NAME" in unsigned.stderr

    done = cli("submit", "--as", "billing-svc", spec_path)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    events = wait_completed(cli, run_id)
    [created] = of_type(events, "RunCreated")
    assert created["publisher"] == "billing-svc"
    assert created["spec"]["principal"]["scopes"] == ["stock:read", "stock:write"]
    assert events[-1]["type"] == "RunCompleted"

    unsigned_control = cli("cancel", run_id)  # no --as and no embedded run's publisher here
    assert unsigned_control.returncode == 2 and "pass --as NAME" in unsigned_control.stderr
    add(cli, "bobs", "--principal", "bob@shop-1")
    not_granted = cli("cancel", "--as", "bobs", run_id)
    assert not_granted.returncode == 2
    assert (
        "not granted: 'bobs' may not control runs of principal alice@shop-1" in not_granted.stderr
    )

    # forged: billing-svc's name, another key; straight into its stream as any XADD there can
    client = cli.redis()
    keys = Keys(cli.env["AGENTLEDGER_PREFIX"], 16)
    spec = RunSpec.model_validate(json.loads(json.dumps(created["spec"])))
    forged = RunRequested(run_id="r-forged", request_id="r-forged", spec=spec, queue="default",
                          base_dir=str(inventory))  # fmt: skip
    fields = entry("billing-svc", "ab" * 32, forged.model_dump_json().encode())
    entry_id = client.xadd(keys.inbox(0, "billing-svc"), fields).decode()  # type: ignore[arg-type]
    reason = _rejected(client, keys, f"0/billing-svc/{entry_id}")
    assert reason.startswith("bad signature: the message is not signed with 'billing-svc'"), reason
    assert "r-forged" not in cli.runs()


def test_a_request_outside_the_grant_is_refused_before_anything_is_sent(
    cli: Cli, inventory: Path
) -> None:
    add(cli, "reader", "--principal", "alice@shop-1", "--scopes", "stock:read")
    add(cli, "bobs", "--principal", "bob@shop-1", "--scopes", "stock:read,stock:write")
    add(cli, "elsewhere", "--principal", "alice@shop-1", "--scopes", "stock:read,stock:write",
        "--queues", "payments")  # fmt: skip
    for name, says in (
        ("reader", "may not grant the scopes ['stock:write']"),
        ("bobs", "may not act for principal alice@shop-1"),
        ("elsewhere", "may not publish to task queue 'default'"),
    ):
        done = cli("submit", "--as", name, "--unserved", inventory / "spec.yaml")
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    nobody = cli("submit", "--as", "nobody", "--unserved", inventory / "spec.yaml")
    assert nobody.returncode == 2 and "no publisher 'nobody'" in nobody.stderr


def test_the_embedded_run_needs_no_setup_and_files_only_a_private_queue_publisher(
    cli: Cli, inventory: Path
) -> None:
    code, summary = cli.run_json(inventory / "spec.yaml")
    assert code == 0, summary
    assert summary["status"] == "completed"
    filed = json.loads(cli("publishers", "list", "--json").stdout)["publishers"]
    local = local_name(str(cli.state_dir))  # the state folder's own: local-<12 hex>
    assert list(filed) == [local] and filed[local]["queues"] == ["run.*"]
    [created] = of_type(cli.events(summary["run_id"]), "RunCreated")
    assert created["publisher"] == local and created["queue"].startswith("run.")


def _rejected(client, keys: Keys, entry_id: str) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + REJECTED_WITHIN_S
    while time.monotonic() < deadline:
        for part in range(keys.inbox_partitions):
            for _, fields in client.xrange(keys.rejected(part)):
                if fields[b"entry_id"].decode() == entry_id:
                    return fields[b"reason"].decode()
        time.sleep(0.1)
    raise AssertionError(f"{entry_id} was not rejected within {REJECTED_WITHIN_S}s")


def test_a_request_the_intake_refuses_is_explained_by_status(cli: Cli, inventory: Path) -> None:
    """Published with --unserved (no worker had served its tool set, so its scripted
    call's tool could not be checked), a run naming a tool the workers lack is refused
    by the intake when they start: it never exists, and `status` says why."""
    add(cli, "billing-svc", "--principal", "alice@shop-1", "--scopes", "stock:read,stock:write",
        "--workspaces", str(inventory))  # fmt: skip
    spec = inventory / "unknown_tool.yaml"
    text = (
        (inventory / "spec.yaml").read_text().replace("name: reserve_stock", "name: no_such_tool")
    )
    spec.write_text(text)
    done = cli("submit", "--as", "billing-svc", "--unserved", spec)
    assert done.returncode == 0, done.stderr
    assert "are not checked" in done.stderr
    run_id = done.stdout.strip()

    proc = start_workers(cli, tools=["inventory_tools"], tool_path=inventory)
    try:
        deadline = time.monotonic() + 3 * REJECTED_WITHIN_S  # workers start, then the intake
        while "refused" not in (shown := cli("status", run_id)).stderr:
            assert time.monotonic() < deadline, shown.stderr
            time.sleep(0.2)
    finally:
        stop_workers([proc])
    assert shown.returncode == 2
    said = shown.stderr
    assert f"no run {run_id!r}: the intake refused its request (published as 'billing-svc')" in said
    assert "no_such_tool" in said and "Traceback" not in said
    as_json = json.loads(cli("status", run_id, "--json").stdout)
    assert as_json["error"] == "no run" and "no_such_tool" in as_json["message"]
    assert run_id not in cli.runs()

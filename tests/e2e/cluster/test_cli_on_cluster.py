"""The CLI on a Redis Cluster as a user drives it: `run` an example and read it
back with every read command; `workers --processes 2` and `submit` of many
runs, each completing with its write done once, also with writes over two
lock partitions (the cluster's lock table has 8) among writes over one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli, copy_example, stop_workers, types
from webkit import request, start_ui, token_for

from agentledger.events.lock_partitions import partition_of
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.keys import keys_for
from agentledger.services.settings import Settings

RUNS = int(os.environ.get("AGENTLEDGER_CLUSTER_E2E_RUNS", "12"))  # the target: 200


def test_run_and_every_read_command_work_on_the_cluster(ccli: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    code, summary = ccli.run_json(example / "spec.yaml")
    assert code == 0 and summary["status"] == "completed", summary
    run_id = summary["run_id"]

    assert ccli.runs() == [run_id]
    status = ccli("status", "--json", run_id)
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "completed"
    events = ccli.events(run_id)
    assert types(events)[0] == "RunCreated" and types(events)[-1] == "RunCompleted"
    everything = ccli("tail", "--json")  # every shard's feed, merged by time
    assert everything.returncode == 0, everything.stderr
    assert [json.loads(x)["seq"] for x in everything.stdout.splitlines()] == [
        e["seq"] for e in events
    ]
    for args in (["replay", run_id], ["context", run_id, "--turn", "2"], ["raw", run_id]):
        done = ccli(*args)
        assert done.returncode == 0, f"{args}: {done.stderr}"
        assert "Traceback" not in done.stderr
    assert "log ok" in ccli("replay", run_id).stdout


def test_the_web_view_lists_shows_and_streams_a_run_on_the_cluster(
    ccli: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)
    code, summary = ccli.run_json(example / "spec.yaml")
    assert code == 0, summary
    run_id = summary["run_id"]
    ui, url = start_ui(ccli)  # signed in with the token its sign-in URL carries
    base = url.rstrip("/")
    try:
        status, listed = request(f"{base}/api/runs")
        assert status == 200 and [r["run_id"] for r in listed["runs"]] == [run_id], listed
        status, shown = request(f"{base}/api/runs/{run_id}")
        assert status == 200 and shown["view"]["summary"]["status"] == "completed"
        bearer = {"Authorization": f"Bearer {token_for(url)}"}
        stream_request = urllib.request.Request(f"{base}/api/runs/{run_id}/stream", headers=bearer)
        with urllib.request.urlopen(stream_request, timeout=30) as stream:
            head = stream.read(200).decode()
        assert head.startswith("id: 1\nevent: line\n") and '"RunCreated"' in head, head
    finally:
        ui.terminate()
        ui.wait(timeout=30)


def test_tail_follow_reads_every_feed_of_the_cluster(ccli: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    follow = subprocess.Popen(
        [*AGENTLEDGER, "tail", "--follow", "--json"], cwd=ccli.cwd, env=ccli.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert follow.stderr is not None
        # it says so once it knows where the feeds end; the run goes in only then
        # (a tail slower to start than the run would miss the run's first events)
        if not any("following new events" in said for said in follow.stderr):
            raise AssertionError(f"the tail never started following: exit {follow.wait()}")
        code, summary = ccli.run_json(example / "spec.yaml")
        assert code == 0, summary
        assert follow.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while "RunCompleted" not in seen and time.monotonic() < deadline:
            line = follow.stdout.readline()
            if line.strip():
                seen.append(json.loads(line)["type"])
        assert seen[0] == "RunCreated" and seen[-1] == "RunCompleted", seen
    finally:
        follow.terminate()
        follow.wait(timeout=10)


def test_many_runs_through_workers_and_submit_each_write_once(ccli: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    ccli.env["AGENTLEDGER_REPLICA_ACKS"] = "1"
    workers = start_workers_n(ccli, example, processes=2)
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:  # users submitting at once
            run_ids = list(pool.map(lambda _: submit(ccli, example / "spec.yaml"), range(RUNS)))
        submitted_s = time.monotonic() - started
        assert len(set(run_ids)) == RUNS
        finished = wait_all(ccli, run_ids, timeout_s=90)
        took = time.monotonic() - started
    finally:
        stop_workers(workers)
    assert all(s == "completed" for s in finished.values()), finished
    print(f"\n{RUNS} runs on the cluster: submitted in {submitted_s:.1f} s, done in {took:.1f} s")
    for run_id in run_ids:  # the write ran once: one version step, 2 reserved of 3
        stock = json.loads((ccli.workspace(run_id) / "stock.json").read_text())
        assert stock["A1"]["available"] == 1, (run_id, stock)
        assert stock["A1"]["version"] == 84, (run_id, stock)


def test_writes_over_two_lock_partitions_through_workers_and_submit_each_once(
    ccli: Cli, tmp_path: Path
) -> None:
    """A third of the runs write A1 alone, a third B7 alone, a third both at once
    (`move_stock`: its locks in two partitions, acquired part by part): every run
    completes, none stuck on a partial hold, each write done once."""
    example = copy_example("inventory", tmp_path)
    workload = mixed_workload(example)
    ccli.env["AGENTLEDGER_REPLICA_ACKS"] = "1"
    workers = start_workers_n(ccli, example, processes=2, tools=MIXED_TOOLS)
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            plan = [workload[i % len(workload)] for i in range(RUNS)]
            run_ids = list(pool.map(lambda w: submit(ccli, w[0]), plan))
        finished = wait_all(ccli, run_ids, timeout_s=90)
        took = time.monotonic() - started
    finally:
        stop_workers(workers)
    assert all(s == "completed" for s in finished.values()), finished
    print(f"\n{RUNS} runs over 1 and 2 lock partitions on the cluster: done in {took:.1f} s")
    wrong = [(r, got) for r, (_, want) in zip(run_ids, plan, strict=True)
             if (got := stock_of(ccli, r)) != want]  # fmt: skip
    assert wrong == [], "a write ran twice (or not at all)"
    assert lock_partitions(ccli) == 8  # the cluster's default: A1 and B7 in two of them


def lock_partitions(cli: Cli) -> int:
    """The lock table's partitions the deployment recorded (`agentledger.services.lock_partitions`)."""
    client = redis_client(cli.env["REDIS_URL"])
    try:
        meta = keys_for(Settings(prefix=cli.env["AGENTLEDGER_PREFIX"])).meta
        return int(client.hget(meta, "lock_partitions") or 0)
    finally:
        client.close()


MIXED_TOOLS = ("inventory_tools", "stock_moves")
Stock = dict[str, tuple[int, int]]  # SKU -> (available, version)
_MIXED_SPEC = """task: {task}
workspace: ./ws
copy_workspace: true
tools: [inventory_tools, stock_moves]
principal: {{id: alice, tenant: shop-1, scopes: [stock:read, stock:write]}}
budgets: {{max_turns: 8}}
model:
  scripted:
    - tool_use: [{{id: c1, name: lookup_stock, input: {{sku: A1}}}}]
    - tool_use: [{{id: c2, name: {tool}, input: {input}}}]
    - end_turn: "done"
"""


def mixed_workload(example: Path) -> list[tuple[Path, Stock]]:
    """Specs, each with the stock its run leaves when its write ran once: a write
    of A1 alone (the example's), of B7 alone, of both (two lock partitions)."""
    assert partition_of("stock:A1", 8) != partition_of("stock:B7", 8)  # else no cascade
    shutil.copy(Path(__file__).with_name("stock_moves.py"), example)
    specs = {  # one tool set for all (a spec naming fewer modules is another one)
        "reserve.yaml": ("Reserve 2 A1.", "reserve_stock", "{sku: A1, qty: 2}"),
        "move.yaml": ("Move 2 A1 to B7.", "move_stock", "{from_sku: A1, to_sku: B7, qty: 2}"),
        "restock.yaml": ("Restock 1 B7.", "restock", "{sku: B7, qty: 1}"),
    }
    for name, (task, tool, args) in specs.items():
        text = _MIXED_SPEC.format(task=task, tool=tool, input=args)
        (example / name).write_text(text)
    return [
        (example / "reserve.yaml", {"A1": (1, 84), "B7": (0, 12)}),
        (example / "move.yaml", {"A1": (1, 84), "B7": (2, 13)}),
        (example / "restock.yaml", {"A1": (3, 83), "B7": (1, 13)}),
    ]


def stock_of(cli: Cli, run_id: str) -> Stock:
    stock = json.loads((cli.workspace(run_id) / "stock.json").read_text())
    return {sku: (item["available"], item["version"]) for sku, item in stock.items()}


def start_workers_n(
    cli: Cli, example: Path, *, processes: int, tools: tuple[str, ...] = ("inventory_tools",)
) -> list[subprocess.Popen[str]]:
    args = [*AGENTLEDGER, "workers", "--tools", *tools, "--tool-path", str(example)]
    args += ["--processes", str(processes)]
    log = example / "workers.log"  # a file, not a pipe nobody drains
    with log.open("w") as out:
        proc = subprocess.Popen(args, cwd=example, env=cli.env, text=True, stdout=out, stderr=out)
    intake_log = example / "intake.log"  # the intake beside them: the workers run none
    with intake_log.open("w") as out:
        intake = subprocess.Popen(
            [*AGENTLEDGER, "intake"], cwd=example, env=cli.env, text=True, stdout=out, stderr=out
        )
    deadline = time.monotonic() + 30
    while (
        log.read_text().count("workers up") < processes or "intake up" not in intake_log.read_text()
    ):
        if proc.poll() is not None or intake.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            intake.kill()
            raise AssertionError(f"did not start:\n{log.read_text()}\n{intake_log.read_text()}")
        time.sleep(0.1)
    return [proc, intake]


def submit(cli: Cli, spec: Path) -> str:
    done = cli("submit", "--as", cli.publisher(), spec)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def wait_all(cli: Cli, run_ids: list[str], *, timeout_s: float) -> dict[str, str]:
    """Each run's status as `runs` lists it, once they all ended (or the time is up)."""
    cli.wait_ended(run_ids, timeout_s)
    listed = cli("runs", "--json", "--limit", str(len(run_ids) + 10))
    assert listed.returncode == 0, listed.stderr
    status = {r["run_id"]: r["status"] for r in json.loads(listed.stdout)["runs"]}
    return {r: status.get(r, "missing") for r in run_ids}

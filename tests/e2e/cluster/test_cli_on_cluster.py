"""The CLI on a Redis Cluster as a user drives it: `run` an example and read it
back with every read command; `workers --processes 2` and `submit` of many
runs, each completing with its write done once; controls through the inbox."""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli, copy_example, stop_workers, types

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


def test_tail_follow_reads_every_feed_of_the_cluster(ccli: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    follow = subprocess.Popen(
        [*AGENTLEDGER, "tail", "--follow", "--json"], cwd=ccli.cwd, env=ccli.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
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


def start_workers_n(cli: Cli, example: Path, *, processes: int) -> list[subprocess.Popen[str]]:
    args = [*AGENTLEDGER, "workers", "--tools", "inventory_tools", "--tool-path", str(example)]
    args += ["--processes", str(processes)]
    log = example / "workers.log"  # a file, not a pipe nobody drains
    with log.open("w") as out:
        proc = subprocess.Popen(args, cwd=example, env=cli.env, text=True, stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    while log.read_text().count("workers up") < processes:  # each process says it once
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the workers did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return [proc]


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

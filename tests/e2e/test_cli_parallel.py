"""Parallel tool calls through the real worker pools, as a user runs them
(`agentledger run`, `submit`, `workers`) on the parallel example. The tools
record their own start and end times, so overlap is judged from their side:
writes to one file never overlap and run in proposal order, independent reads
run at once, results go back in proposal order, and locks hold across runs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import AGENTLEDGER, Cli, by_call, copy_example, of_type

HOLDS = {"r1": 0.65, "r2": 0.55, "r3": 0.45, "r4": 0.35}  # as in reads.yaml
RUN_TIMEOUT_S = 30.0
SETTLED = {"completed", "failed", "awaiting_human", "cancelled", "timeout", "budget_exhausted"}


@dataclass
class Ran:
    cli: Cli
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]
    timings: dict[str, dict[str, Any]]  # call id -> what the tool recorded

    @property
    def run_id(self) -> str:
        return str(self.summary["run_id"])


def timings_in(workspace: Path) -> list[dict[str, Any]]:
    """What the tools recorded: one line per call, with its run, start and end."""
    lines = (workspace / "timings.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def overlap(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Seconds during which both ran (negative: the gap between them)."""
    return min(a["end"], b["end"]) - max(a["start"], b["start"])


def run_example(make_cli: Callable[[Path], Cli], folder: Path, spec: str) -> Ran:
    cli = make_cli(folder)
    example = copy_example("parallel", cli.cwd)
    code, summary = cli.run_json(example / spec)
    run_id = summary["run_id"]
    timings = {t["call"]: t for t in timings_in(cli.workspace(run_id)) if t["run"] == run_id}
    return Ran(cli, code, summary, cli.events(run_id), timings)


@pytest.fixture(scope="module")
def same_file(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    return run_example(make_cli, tmp_path_factory.mktemp("same_file"), "same_file.yaml")


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    return run_example(make_cli, tmp_path_factory.mktemp("reads"), "reads.yaml")


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    return run_example(make_cli, tmp_path_factory.mktemp("serial"), "reads_serial.yaml")


def span(timings: dict[str, dict[str, Any]]) -> float:
    return max(t["end"] for t in timings.values()) - min(t["start"] for t in timings.values())


# --- one turn, one file --------------------------------------------------------------------


def test_two_writes_to_one_file_never_overlap_and_run_in_proposal_order(same_file: Ran) -> None:
    assert same_file.code == 0 and same_file.summary["status"] == "completed"
    w1, w2 = same_file.timings["w1"], same_file.timings["w2"]
    gap = -overlap(w1, w2)
    print(f"\nwrites to one file: w1 {w1['end'] - w1['start']:.3f}s, then w2 {gap:.3f}s later")
    assert w1["end"] <= w2["start"], "w2 started before w1 ended"
    notes = same_file.cli.workspace(same_file.run_id) / "notes.txt"
    assert notes.read_text() == "first\nsecond\n", "no lost update, proposal order"
    assert by_call(same_file.events, "w2")[:4] == [
        "ToolCallProposed",
        "ToolCallValidated",
        "ToolCallWaiting",
        "ToolCallScheduled",
    ]


def test_an_independent_read_of_the_same_turn_runs_alongside_the_writes(same_file: Ran) -> None:
    w1, r1 = same_file.timings["w1"], same_file.timings["r1"]
    print(f"\nthe read overlapped the first write by {overlap(w1, r1):.3f}s")
    # granted with w1, in the same ask, while w2 waits: it never waited for the writes
    assert "ToolCallWaiting" not in by_call(same_file.events, "r1")
    seq = {(e["type"], e["data"].get("call_id")): e["seq"] for e in same_file.events}
    assert seq[("ToolCallScheduled", "r1")] < seq[("ToolCallScheduled", "w2")]


# --- one turn, independent reads ------------------------------------------------------------


def test_independent_reads_finish_in_about_the_time_of_one(reads: Ran, serial: Ran) -> None:
    assert reads.code == 0 and serial.code == 0
    one = max(HOLDS.values())
    parallel_s, serial_s = span(reads.timings), span(serial.timings)
    busy_s = sum(t["end"] - t["start"] for t in reads.timings.values())
    print(
        f"\n4 reads: {parallel_s:.3f}s at once vs {serial_s:.3f}s one at a time "
        f"(tool time {busy_s:.3f}s): speed-up x{serial_s / parallel_s:.2f} "
        f"(x{busy_s / parallel_s:.2f} of the tools' own time)"
    )
    assert parallel_s < 2 * one
    assert serial_s / parallel_s > 2.0


def test_at_most_max_parallel_calls_run_at_once(serial: Ran) -> None:
    calls = [serial.timings[c] for c in HOLDS]
    for a, b in zip(calls, calls[1:], strict=False):
        assert a["end"] <= b["start"], "max_parallel_calls: 1 let two calls overlap"
    assert span(serial.timings) >= sum(HOLDS.values())


def test_results_go_back_in_proposal_order_paired_by_call_id(reads: Ran) -> None:
    finished = [e["data"]["call_id"] for e in reads.events if e["type"] == "ToolCallSucceeded"]
    print(f"\nfinished in the order {finished} (proposed {list(HOLDS)})")
    assert sorted(finished) == sorted(HOLDS)
    assert [c["call_id"] for c in reads.summary["tool_calls"]] == list(HOLDS)

    done = reads.cli("context", reads.run_id, "--turn", "2", "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["verified"]
    last = view["request"]["messages"][-1]
    assert last["role"] == "user"
    results = [b for b in last["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["r1", "r2", "r3", "r4"], "one message"
    for block, name in zip(results, "abcd", strict=True):
        assert json.loads(block["content"])["path"] == f"{name}.txt", "paired with its call"
    outputs = {c["call_id"]: c["output"] for c in of_type(reads.events, "ToolCallSucceeded")}
    assert outputs["r3"] == {"path": "c.txt", "text": "file c\n"}


# --- two runs, one file ----------------------------------------------------------------------


@pytest.fixture
def start_workers(cli: Cli) -> Iterator[Callable[[], None]]:
    """Starts `agentledger workers` for the parallel example's tools in the test's
    folder, and an `agentledger intake`; stopped with SIGTERM after."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        tools = ["--tools", "parallel_tools", "--tool-path", str(cli.cwd / "parallel")]
        with open(cli.cwd / "workers.log", "wb") as log:
            for command in (["workers", *tools], ["intake"]):
                procs.append(
                    subprocess.Popen(
                        [*AGENTLEDGER, *command],
                        cwd=cli.cwd,
                        env=cli.env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until_done(cli: Cli, run_ids: list[str]) -> dict[str, str]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        # one `tail --follow` waits for the runs to end, then `status` says how
        cli.wait_ended(run_ids, max(0.0, deadline - time.monotonic()))
        for run_id in run_ids:
            done = cli("status", run_id, "--json")
            if done.returncode != 2:  # 2: no such run (yet), said as {"error": …}
                statuses[run_id] = json.loads(done.stdout)["status"]
        if len(statuses) == len(run_ids) and set(statuses.values()) <= SETTLED:
            return statuses
        time.sleep(0.2)
    log = (cli.cwd / "workers.log").read_text(errors="replace")[-3000:]
    raise AssertionError(f"runs not done in {RUN_TIMEOUT_S}s: {statuses}\n{log}")


def test_two_runs_writing_the_same_file_serialize(
    cli: Cli, start_workers: Callable[[], None]
) -> None:
    example = copy_example("parallel", cli.cwd)
    run_ids = []
    for spec in ("cross_a.yaml", "cross_b.yaml"):  # both wait in the inbox: they start together
        done = cli("submit", "--as", cli.publisher(), "--unserved", example / spec)
        assert done.returncode == 0, done.stderr
        run_ids.append(done.stdout.strip())
    start_workers()
    assert wait_until_done(cli, run_ids) == dict.fromkeys(run_ids, "completed")

    timings = {t["run"]: t for t in timings_in(example / "ws")}
    first, second = sorted(run_ids, key=lambda r: timings[r]["start"])
    gap = -overlap(timings[first], timings[second])
    print(f"\nacross runs: the second write started {gap:.3f}s after the first ended")
    assert timings[first]["end"] <= timings[second]["start"], "the two runs' writes overlapped"
    lines = sorted((example / "ws" / "shared.txt").read_text().splitlines())
    assert lines == ["from run a", "from run b"], "no lost update"
    # the lock, not luck: the second run was granted it only after the first released it
    # (whether it had to wait for it depends on when it asked)
    granted = {
        r: next(e["at"] for e in cli.events(r) if e["type"] == "ToolCallScheduled") for r in run_ids
    }
    released = next(e["at"] for e in cli.events(first) if e["type"] == "ToolCallSucceeded")
    assert granted[second] >= timings[first]["end"] and granted[second] >= released - 0.001
    assert "ToolCallWaiting" not in by_call(cli.events(first), "x1")

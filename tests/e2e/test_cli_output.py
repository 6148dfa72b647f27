"""What the read commands print, for people and for machines: `tail` in time
order across shards (`--follow` from the end unless `--from-start`, `--type`
filters), `runs` with times, cost, status filters and pages, and `--json` on
every command: one object, or one object a line for streams."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import AGENTLEDGER, Cli, copy_example

RUNS = ["inventory/spec.yaml", "steering/refusal.yaml", "inventory/spec.yaml"]


@dataclass
class Ran:
    cli: Cli
    folder: Path
    summaries: list[dict[str, Any]]  # in the order they ran

    @property
    def ids(self) -> list[str]:
        return [s["run_id"] for s in self.summaries]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    cli = make_cli(tmp_path_factory.mktemp("output"))
    for example in ("inventory", "steering"):
        copy_example(example, cli.cwd)
    summaries = [cli.run_json(cli.cwd / spec)[1] for spec in RUNS]
    return Ran(cli, cli.cwd, summaries)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_tail_merges_every_run_by_event_time(ran: Ran) -> None:
    done = ran.cli("tail", "--json")
    assert done.returncode == 0, done.stderr
    events = json_lines(done.stdout)
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    for run_id in ran.ids:
        seqs = [e["seq"] for e in events if e["run_id"] == run_id]
        assert seqs == list(range(1, len(ran.cli.events(run_id)) + 1))
    first_of = [next(e["run_id"] for e in events if e["type"] == "RunCreated" and e["run_id"] == r)
                for r in ran.ids]  # fmt: skip
    assert [e["run_id"] for e in events if e["type"] == "RunCreated"] == first_of


def test_tail_type_keeps_only_those_events(ran: Ran) -> None:
    done = ran.cli("tail", "--type", "RunCompleted,RunEscalated", "--json")
    assert [(e["run_id"], e["type"]) for e in json_lines(done.stdout)] == [
        (ran.ids[0], "RunCompleted"),
        (ran.ids[1], "RunEscalated"),
        (ran.ids[2], "RunCompleted"),
    ]


def start_tail(ran: Ran, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*AGENTLEDGER, "tail", "--follow", "--json", *args], cwd=ran.folder, env=ran.cli.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # it says so once it knows where the feeds end
        if "following new events" in line:
            return proc
    raise AssertionError(f"the tail never started following: exit {proc.wait()}")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130
    return out


def test_tail_follow_starts_at_the_end(ran: Ran) -> None:
    tail = start_tail(ran)
    try:
        _, summary = ran.cli.run_json(ran.folder / "steering/refusal.yaml")
    finally:
        out = stop(tail)
    events = json_lines(out)
    assert {e["run_id"] for e in events} == {summary["run_id"]}, "the history was replayed"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "RunEscalated"


def test_tail_follow_of_an_ended_run_prints_its_log_and_exits(ran: Ran) -> None:
    completed = ran.ids[0]  # nothing more will be appended: no call runs
    done = ran.cli("tail", "--run", completed, "--follow", "--json")
    assert done.returncode == 0, done.stderr
    assert [e["seq"] for e in json_lines(done.stdout)] == list(
        range(1, len(ran.cli.events(completed)) + 1)
    )
    assert f"run {completed} ended completed" in done.stderr


def test_tail_follow_of_a_run_awaiting_a_human_keeps_following(ran: Ran) -> None:
    escalated = ran.ids[1]  # not over: a reply moves it on
    proc = subprocess.Popen(
        [*AGENTLEDGER, "tail", "--run", escalated, "--follow", "--json"], cwd=ran.folder,
        env=ran.cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        printed = [json.loads(line) for line in _until_type(proc.stdout, "RunEscalated")]
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)  # its log is all printed, and it goes on following
    finally:
        stop(proc)
    assert [e["seq"] for e in printed] == list(range(1, len(ran.cli.events(escalated)) + 1))


def _until_type(lines: Iterable[str], type_: str) -> list[str]:
    read = []
    for line in lines:
        read.append(line)
        if json.loads(line)["type"] == type_:
            return read
    raise AssertionError(f"the tail ended before a {type_}")


def test_tail_follow_from_start_prints_the_history_first(ran: Ran) -> None:
    tail = start_tail(ran, "--from-start")
    out = stop(tail)
    printed = {e["run_id"] for e in json_lines(out)}
    assert set(ran.ids) <= printed


def test_runs_shows_times_cost_and_task_and_filters_by_status(ran: Ran) -> None:
    done = ran.cli("runs", "--json", "--status", "completed")
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert [r["run_id"] for r in page["runs"]] == [ran.ids[2], ran.ids[0]]  # newest first
    row = page["runs"][0]
    assert row["task"] == "How many A1 can we sell? Reserve 2."
    assert row["created_at"].endswith("Z") and row["ended_at"] >= row["created_at"]
    assert row["duration_s"] >= 0 and row["cost_usd"] >= 0
    assert page["next_page"] is None
    waiting = json.loads(ran.cli("runs", "--json", "--status", "awaiting_human").stdout)
    assert [r["run_id"] for r in waiting["runs"]][-1] == ran.ids[1]


def test_runs_pages_through_every_run_once(ran: Ran) -> None:
    seen: list[str] = []
    token: str | None = None
    for _ in range(10):
        args = ["runs", "--json", "--limit", "1", *(["--page", token] if token else [])]
        page = json.loads(ran.cli(*args).stdout)
        seen += [r["run_id"] for r in page["runs"]]
        token = page["next_page"]
        if token is None:
            break
    assert seen == sorted(seen, reverse=True) and set(ran.ids) <= set(seen)
    assert len(seen) == len(set(seen))


def test_runs_since_and_until_bound_the_creation_time(ran: Ran) -> None:
    assert json.loads(ran.cli("runs", "--json", "--since", "1h").stdout)["runs"]
    assert json.loads(ran.cli("runs", "--json", "--until", "1h").stdout)["runs"] == []
    created = ran.summaries[1]["created_at"]
    later = [
        r["run_id"]
        for r in json.loads(ran.cli("runs", "--json", "--since", created).stdout)["runs"]
    ]
    assert ran.ids[1] in later and ran.ids[0] not in later


@pytest.mark.parametrize(
    "command",
    [
        ("status", "{run}"),
        ("runs",),
        ("replay", "{run}"),
        ("context", "{run}", "--turn", "1"),
        ("submit", "{spec}"),
        ("cancel", "{run}"),  # a completed run: refused, and said as JSON
        ("local", "status"),
    ],
)
def test_json_is_one_object_on_stdout(ran: Ran, command: tuple[str, ...]) -> None:
    values = {"run": ran.ids[0], "spec": str(ran.folder / "inventory/spec.yaml")}
    done = ran.cli(*[a.format(**values) for a in command], "--json")
    [obj] = json_lines(done.stdout)
    assert isinstance(obj, dict)
    assert "Traceback" not in done.stderr


def test_raw_and_tail_print_one_json_object_a_line(ran: Ran) -> None:
    for args in (("raw", ran.ids[0]), ("tail", "--run", ran.ids[0], "--json")):
        lines = json_lines(ran.cli(*args).stdout)
        assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))

"""What the CLI prints lines up and counts in words: `runs` and `tail` keep their
columns for run ids of every shard (0 to 4095); `--processes` is bounded by the
machine (4 per CPU, 8 on a smaller one), a bigger count refused naming the
maximum; `context --attempt N` of a turn that had fewer attempts says how many it
had; one of a thing is never "1 turns"."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.events.counted import counted
from agentledger.events.types import ModelRequested
from agentledger.services.clock import MAX_SHARDS, RUN_ID_WIDTH, new_run_id
from agentledger.services.entrypoints.cli import arg_types
from agentledger.services.entrypoints.cli import parser as cli_parser
from agentledger.services.entrypoints.cli.context_cmds import no_request
from agentledger.services.entrypoints.cli.inspect_cmds import run_row
from agentledger.services.entrypoints.describe import line
from tests.contracts.envelopes import T0, batch, envelope


def test_every_shards_run_id_fits_the_column() -> None:
    assert len(new_run_id(MAX_SHARDS - 1)) == RUN_ID_WIDTH
    assert all(len(new_run_id(shard)) <= RUN_ID_WIDTH for shard in (0, 9, 10, 99, 100, 999))


@pytest.mark.parametrize("shard", [0, 7, 10, 99, 100, 4095])
def test_tail_lines_of_runs_of_any_shard_put_the_seq_in_the_same_column(shard: int) -> None:
    reference = line(batch(new_run_id(0), 1, 2)[1], with_run=True)
    shown = line(batch(new_run_id(shard), 1, 2)[1], with_run=True)
    column = reference.index("   2  ")
    assert shown.index("   2  ") == column
    assert shown[column:] == reference[column:]


@pytest.mark.parametrize("shard", [0, 7, 10, 99, 100, 4095])
def test_runs_rows_of_any_shard_put_the_status_in_the_same_column(shard: int) -> None:
    def row(run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "status": "completed", "created_at": "2026-12-01T10:00:00.000Z",
                "duration_s": 1.5, "cost_usd": 0.0, "task": "count"}  # fmt: skip

    assert run_row(row(new_run_id(shard))).index("completed") == RUN_ID_WIDTH + 2
    assert (
        run_row(row(new_run_id(0)))[RUN_ID_WIDTH:] == run_row(row(new_run_id(shard)))[RUN_ID_WIDTH:]
    )


@pytest.mark.parametrize(("cpus", "most"), [(1, 8), (2, 8), (3, 12), (16, 64)])
def test_processes_are_bounded_by_four_per_cpu_and_never_below_eight(
    monkeypatch: pytest.MonkeyPatch, cpus: int, most: int
) -> None:
    monkeypatch.setattr(
        arg_types.os, "sched_getaffinity", lambda _: set(range(cpus)), raising=False
    )
    p = cli_parser.parser()
    assert p.parse_args(["run", "spec.yaml", "--processes", str(most)]).processes == most
    assert p.parse_args(["workers", "--processes", str(most)]).processes == most
    assert p.parse_args(["run", "spec.yaml"]).processes == 0  # threads in this process


@pytest.mark.parametrize("command", [["run", "spec.yaml"], ["workers"]])
def test_more_processes_than_the_bound_are_refused_naming_the_maximum(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setattr(arg_types.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    with pytest.raises(SystemExit) as ended:
        cli_parser.parser().parse_args([*command, "--processes", "40"])
    assert ended.value.code == 2
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.endswith(
        "argument --processes: at most 8 worker processes here (4 per CPU, 8 on a smaller "
        "machine), got 40"
    )


RUN = "r-0190000000000aaaaaaaa.s3"


def requests(*turn_attempts: tuple[int, int]) -> list[Any]:
    envs = batch(RUN, 1, 1)
    for seq, (turn, attempt) in enumerate(turn_attempts, start=2):
        event = ModelRequested(turn=turn, attempt=attempt, deadline_at=T0 + 30)
        envs.append(envelope(RUN, seq, event))
    return envs


def test_an_attempt_a_turn_never_had_is_answered_with_the_attempts_it_had() -> None:
    said = no_request(requests((1, 1), (2, 1), (2, 2)), RUN, 2, 5)
    assert said == f"turn 2 of run {RUN!r} had 2 attempts (attempts 1 and 2): there is no attempt 5"
    said = no_request(requests((1, 1)), RUN, 1, 5)
    assert said == f"turn 1 of run {RUN!r} had 1 attempt (attempt 1): there is no attempt 5"


def test_a_turn_the_run_never_reached_is_answered_with_the_turns_it_has() -> None:
    said = no_request(requests((1, 1), (2, 1), (3, 1)), RUN, 7, None)
    assert said == f"run {RUN!r} has no model request for turn 7: its requests are for turns 1 to 3"
    said = no_request(requests(), RUN, 1, None)
    assert said == f"run {RUN!r} has no model request for turn 1: it made no model request"


def test_one_of_a_thing_is_singular() -> None:
    assert [counted(n, "turn") for n in (0, 1, 2)] == ["0 turns", "1 turn", "2 turns"]
    assert counted(1, "delivery", "deliveries") == "1 delivery"
    assert counted(3, "delivery", "deliveries") == "3 deliveries"

"""A read-only call whose claiming worker the shell has proven dead is settled
at once as outcome unknown, exactly as its claim's deadline would settle it
(and then tried again by the existing rules); a write, a live worker's read,
or a read held by another attempt's worker keeps its deadline."""

from __future__ import annotations

from runlog import T0, Log, do_claim, do_model_turn, do_validate, use

from agentledger.events.read_retry import MAX_READ_ATTEMPTS
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import dead_claimants, on_tick
from agentledger.events.tool_step import claim_call
from agentledger.events.types import ToolCallFailed, ToolCallOutcomeUnknown

DEAD = frozenset({"worker-1"})  # the worker `do_claim` names


def running(*blocks: object) -> Log:
    log = Log.created()
    do_model_turn(log, *blocks)  # type: ignore[arg-type]
    for call in log.s.current_turn.calls:  # type: ignore[union-attr]
        do_validate(log, call.call_id)
    assert log.s.status is RunStatus.RUNNING_TOOLS
    return log


def test_the_claim_names_its_worker_and_only_reads_ask_about_it() -> None:
    log = running(use("r"), use("w", "write_file"))
    assert dead_claimants(log.s) == [], "nothing is claimed yet"
    do_claim(log, "r")
    do_claim(log, "w")
    assert log.call("r").claimed_by == "worker-1"
    assert dead_claimants(log.s) == ["worker-1"], "the write's claim is not asked about"


def test_a_dead_workers_read_is_settled_before_its_deadline_as_the_deadline_would() -> None:
    log = running(use("r"))
    do_claim(log, "r", now=T0)
    now = T0 + 0.5  # well before the deadline (timeout 5 s + grace 2 s)
    assert on_tick(log.s, now=now) == [], "not known dead: the deadline still rules"
    early = on_tick(log.s, now=now, dead=DEAD)
    late = on_tick(log.s, now=log.call("r").claim_deadline)  # type: ignore[arg-type]
    assert [type(e) for e in early] == [type(e) for e in late] == [ToolCallOutcomeUnknown]
    assert "died" in early[0].reason  # type: ignore[union-attr]
    log.decide(on_tick, now=now, dead=DEAD)
    assert log.call("r").status is CallStatus.OUTCOME_UNKNOWN
    assert [e.type for e in claim_call(log.s, "r", worker="w2", now=now)] == ["ToolCallStarted"]


def test_a_dead_workers_write_keeps_its_deadline() -> None:
    log = running(use("w", "write_file"))
    do_claim(log, "w", now=T0)
    assert on_tick(log.s, now=T0 + 0.5, dead=DEAD) == []


def test_a_read_claimed_again_by_a_live_worker_is_left_alone() -> None:
    log = running(use("r"))
    do_claim(log, "r", now=T0)
    log.decide(on_tick, now=T0 + 0.5, dead=DEAD)
    log.decide(claim_call, "r", worker="worker-2", now=T0 + 0.6)
    assert on_tick(log.s, now=T0 + 1.0, dead=DEAD) == [], "worker-2 holds it now"
    assert on_tick(log.s, now=T0 + 1.0, dead=frozenset({"worker-3"})) == []


def test_reads_whose_workers_keep_dying_run_out_of_attempts_as_they_would_by_deadline() -> None:
    log = running(use("r"))
    now = T0
    for attempt in range(1, MAX_READ_ATTEMPTS + 1):
        log.decide(claim_call, "r", worker=f"w{attempt}", now=now)
        now += 0.1
        events = log.decide(on_tick, now=now, dead=frozenset({f"w{attempt}"}))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, ToolCallFailed]
    assert log.s.status is RunStatus.REQUESTING_MODEL

"""The sweeper looks at a run again as soon as a claim it saw running out has
run out, not a whole lease after its last look (`agentledger.events.ticks.next_tick`), so a
dead worker's turn is taken up at the first pass after its claim's deadline;
a run whose claim is still live is left alone meanwhile."""

from __future__ import annotations

from pathlib import Path

from handlerkit import Unit, call, new_unit, spec
from runlog import Log, do_claim, do_model_turn, do_request, do_validate, use

from agentledger.events.commands import RequestModel
from agentledger.events.model_step import request_model
from agentledger.events.ticks import next_tick
from agentledger.services.handlers.engine import Decided
from agentledger.services.loops.sweeper import sweep_once

DONE = {"end_turn": "done"}


def test_the_next_tick_is_the_earliest_pending_deadline() -> None:
    log = Log.created()
    assert next_tick(log.s) is None, "nothing is claimed yet"
    claimed = do_request(log)
    assert next_tick(log.s) == claimed.deadline_at
    log = Log.created()
    do_model_turn(log, use("c1"))
    assert next_tick(log.s) is None, "the reply ended the model claim; a proposed call holds none"
    do_validate(log, "c1")
    do_claim(log, "c1")
    assert next_tick(log.s) == log.call("c1").claim_deadline


def test_a_model_claim_that_runs_out_between_two_looks_is_taken_up_at_the_next_pass(
    tmp_path: Path,
) -> None:
    unit = new_unit(tmp_path / "ws")
    lease = unit.app.settings.lease_s
    unit.create("run-a", spec({"tool_use": [call("a1", "kv_read", key="k")]}, DONE))
    unit.take()
    claim_s = lease + 1.0  # the claim runs out a second after the run's first look
    step = unit.app.engine.take(
        "run-a", Decided("model", lambda s: request_model(s, now=unit.clock.now(), lease_s=claim_s))
    )  # a worker claims the model call and dies holding it
    deadline = step.state.model_claim_deadline
    assert deadline is not None
    unit.take()

    unit.clock.advance(lease + 0.1)
    sweep_once(unit.app, [0])
    assert unit.take() == [], "the claim is live: nothing is asked again"

    unit.clock.advance(deadline - unit.clock.now() - 0.1)
    sweep_once(unit.app, [0])
    assert unit.take() == [], "still live, and not looked at again before its deadline"

    unit.clock.advance(0.2)  # the first pass after the deadline, well within a lease of the look
    sweep_once(unit.app, [0])
    assert unit.take() == [RequestModel("run-a")]


def test_a_run_with_no_deadline_pending_is_looked_at_again_after_a_lease(tmp_path: Path) -> None:
    unit: Unit = new_unit(tmp_path / "ws")
    lease = unit.app.settings.lease_s
    unit.create("run-a", spec({"tool_use": [call("a1", "kv_read", key="k")]}, DONE))
    assert unit.take() == [RequestModel("run-a")]
    unit.clock.advance(lease + 0.1)
    sweep_once(unit.app, [0])
    assert unit.take() == [RequestModel("run-a")], "nobody took the command: sent again"
    unit.clock.advance(lease / 2)
    sweep_once(unit.app, [0])
    assert unit.take() == [], "looked at again only after another lease"
    unit.clock.advance(lease / 2 + 0.1)
    sweep_once(unit.app, [0])
    assert unit.take() == [RequestModel("run-a")]

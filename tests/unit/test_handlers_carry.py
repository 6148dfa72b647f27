"""A worker that serves the pool of the step due next carries its run on: the
next claim joins the append of the outcome before it, the side effect runs on
the same thread, and nothing is queued for it — within the pools it serves, its
own task queue and tool set, its time bound, and not once it is stopping. What
it does not carry is queued as before, and a command queued for a step it
carried meanwhile finds the step done."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import unit_tools
from handlerkit import QUEUE, Unit, call, carrying, new_unit, scripted, spec
from prometheus_client import generate_latest

from agentledger.events import controls
from agentledger.events.commands import DriveCall, Pool, RequestModel, RunAcceptance
from agentledger.events.fold import fold
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    AcceptanceChecked,
    ModelRequested,
    ModelRequestFailed,
    ToolCallStarted,
)
from agentledger.schemas.spec import ModelSpec
from agentledger.services.adapters.metrics.instruments import Instruments
from agentledger.services.adapters.models.port import (
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
)
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.model import context_view
from agentledger.services.loops.sweeper import sweep_once

ONE_CALL = {"tool_use": [call("c1", "kv_read", key="k")]}
TWO_CALLS = {"tool_use": [call("c1", "kv_read", key="a"), call("c2", "kv_read", key="b")]}
DONE = {"end_turn": "done"}
REPLY = ("ModelResponded", "ToolCallProposed")
DRIVE = ("ToolCallValidated", "ToolCallScheduled", "ToolCallStarted")


def carried(tmp_path: Path, **options: object) -> Unit:
    return new_unit(tmp_path / "ws", carry=carrying(**options))  # type: ignore[arg-type]


def test_one_delivery_carries_a_run_from_its_first_model_request_to_completed(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    unit.create("run-a", spec(ONE_CALL, ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert [(a.types, a.queued) for a in unit.store.appends[1:]] == [
        (("ModelRequested",), ()),
        ((*REPLY, *DRIVE), ()),
        (("ToolCallSucceeded", "ModelRequested"), ()),
        ((*REPLY, *DRIVE), ()),
        (("ToolCallSucceeded", "ModelRequested"), ()),
        (("ModelResponded", "AcceptanceStarted"), ()),
        (("RunCompleted",), ()),
    ]
    assert unit.take() == [], "nothing was queued: acceptance was carried too"
    assert unit_tools.RAN == {"c1": 2}
    assert unit.state("run-a").status is RunStatus.COMPLETED
    sources = [(e.type, e.source) for e in unit.memory.read("run-a")]
    assert ("ModelRequested", "model") in sources and ("ToolCallStarted", "tools") in sources
    assert all(s == "model" for t, s in sources if t == "ModelRequested")
    assert all(s == "tools" for t, s in sources if t in (*DRIVE, "ToolCallSucceeded"))
    assert all(s == "accept" for t, s in sources if t in ("AcceptanceStarted", "RunCompleted"))


def test_a_carried_acceptance_runs_its_checks_and_a_failed_one_carries_the_model_on(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    checks = [{"file": "out.txt", "contains": "all done"}]  # never written: both fail
    unit.create("run-a", spec(DONE, DONE, acceptance=checks))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.appends_to("run-a")[1:] == [
        ("ModelRequested",),
        ("ModelResponded", "AcceptanceStarted"),
        ("AcceptanceChecked", "AcceptanceFailed", "ModelRequested"),
        ("ModelResponded", "AcceptanceStarted"),
        ("AcceptanceChecked", "AcceptanceFailed", "ModelRequested"),
        ("ModelRequestFailed", "RunFailed"),  # the script has no third turn
    ]
    assert unit.take() == []
    checked = [e.data for e in unit.memory.read("run-a") if isinstance(e.data, AcceptanceChecked)]
    assert [c.passed for c in checked] == [False, False]
    assert all(
        c.evidence == {"reason": "'out.txt' is not a file in the workspace"} for c in checked
    )


def test_a_worker_not_serving_the_accept_pool_queues_the_acceptance(tmp_path: Path) -> None:
    unit = carried(tmp_path, pools=frozenset({Pool.MODEL, Pool.TOOLS}))
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.store.appends[-1].types == ("ModelResponded",)
    assert unit.take() == [RunAcceptance("run-a")]
    unit.deliver(RunAcceptance("run-a"))
    assert unit.appends_to("run-a")[-2:] == [("AcceptanceStarted",), ("RunCompleted",)]


def test_a_carried_model_claim_is_decided_on_the_view_of_the_state_after_the_outcome(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    unit.create("run-a", spec(ONE_CALL, DONE))

    unit.deliver(RequestModel("run-a"))

    log = unit.memory.read("run-a")
    at = [i for i, e in enumerate(log) if isinstance(e.data, ModelRequested)]
    assert [log[i].data.turn for i in at] == [1, 2]
    before_claim, running = fold(log[: at[1]]), fold(log[: at[1] - 1])
    assert before_claim is not None and running is not None
    claimed = log[at[1]].data
    assert claimed.context_hash == context_view(unit.app.toolset, before_claim).digest
    assert claimed.context_hash != context_view(unit.app.toolset, running).digest, (
        "the view of the state before the outcome is another one"
    )


def test_the_other_call_of_a_turn_is_queued_with_the_claim_and_its_command_finds_it_done(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))  # nobody takes c2's command meanwhile: carried too

    reply = unit.store.appends[2]
    assert reply.queued == (DriveCall("run-a", "c2"),)
    assert [e.call_id for e in (x.data for x in unit.memory.read("run-a"))
            if isinstance(e, ToolCallStarted)] == ["c1", "c2"]  # fmt: skip
    seq = unit.state("run-a").seq
    unit.deliver(DriveCall("run-a", "c2"))
    assert unit.state("run-a").seq == seq, "the step was carried: its late command is a no-op"
    assert unit_tools.RAN == {"c1": 1, "c2": 1}


def test_a_worker_of_tools_only_queues_the_next_model_request(tmp_path: Path) -> None:
    unit = carried(tmp_path, pools=frozenset({Pool.TOOLS}))
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert [(a.types, a.queued) for a in unit.store.appends[1:]] == [
        (("ModelRequested",), ()),
        ((*REPLY, *DRIVE), ()),
        (("ToolCallSucceeded",), (RequestModel("run-a"),)),
    ]


def test_a_run_of_another_task_queue_is_never_carried(tmp_path: Path) -> None:
    unit = carried(tmp_path, queue=f"not-{QUEUE}")
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert [(a.types, a.queued) for a in unit.store.appends[1:]] == [
        (("ModelRequested",), ()),
        (REPLY, (DriveCall("run-a", "c1"),)),
    ]


def test_a_worker_that_is_stopping_carries_nothing(tmp_path: Path) -> None:
    unit = carried(tmp_path)
    assert unit.app.carrying is not None
    unit.app.carrying.stopping.set()
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.store.appends[-1].queued == (DriveCall("run-a", "c1"),)


def test_carrying_for_zero_seconds_is_no_carrying(tmp_path: Path) -> None:
    unit = carried(tmp_path, for_s=0.0)
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.store.appends[-1].types == REPLY
    assert unit.take() == [DriveCall("run-a", "c1")]


def test_a_delivery_past_its_time_bound_hands_the_next_step_to_the_queue(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path, for_s=5.0)
    gated = {"tool_use": [call("c1", "kv_read", key="k", at="c1")]}
    unit.create("run-a", spec(gated, DONE))
    unit.take()

    running = unit.start(RequestModel("run-a"))
    unit.wait_for(lambda: unit_tools.RAN["c1"] == 1, why="c1 runs, carried")
    unit.clock.advance(5.0)
    unit_tools.gate("c1").set()
    running.join()

    outcome = unit.store.appends[-1]
    assert (outcome.types, outcome.queued) == (("ToolCallSucceeded",), (RequestModel("run-a"),))


def test_a_run_cancelled_while_its_carried_call_runs_is_carried_no_further(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    gated = {"tool_use": [call("c1", "kv_read", key="k", at="c1")]}
    unit.create("run-a", spec(gated, DONE))
    unit.take()

    running = unit.start(RequestModel("run-a"))
    unit.wait_for(lambda: unit_tools.RAN["c1"] == 1, why="c1 runs, carried")
    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )
    unit_tools.gate("c1").set()
    running.join()

    assert unit.store.conflicts == 1, "the outcome was decided again on the cancelled run"
    assert unit.appends_to("run-a")[-1] == ("ToolCallSucceeded", "RunCancelled")
    assert unit.state("run-a").status is RunStatus.CANCELLED
    assert unit.take() == []


def test_a_carried_call_that_waits_for_its_lock_is_queued_and_runs_once_granted(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    holder = {"tool_use": [call("h1", "kv_write", key="k", value="1", at="h1")]}
    waiter = {"tool_use": [call("w1", "kv_write", key="k", value="2")]}
    unit.create("run-h", spec(holder, DONE))
    unit.create("run-w", spec(waiter, DONE))
    unit.take()
    holding = unit.start(RequestModel("run-h"))
    unit.wait_for(lambda: unit_tools.RAN["h1"] == 1, why="h1 holds kv:k")

    unit.deliver(RequestModel("run-w"))  # validated and queued at the lock, not claimed

    assert unit.call_of("run-w", "w1").status is CallStatus.WAITING
    assert unit.take() == []
    unit_tools.gate("h1").set()
    holding.join()
    assert unit.take() == [DriveCall("run-w", "w1")], "run-h was carried on to its end"
    assert unit.state("run-h").status is RunStatus.COMPLETED
    unit.deliver(DriveCall("run-w", "w1"))  # the grant's notice: claimed, run, carried on
    assert unit_tools.RAN == {"h1": 1, "w1": 1}
    assert unit.state("run-w").status is RunStatus.COMPLETED
    assert unit.foreign_appends() == []


def test_a_worker_of_the_model_pool_only_queues_the_reply_s_call(tmp_path: Path) -> None:
    unit = carried(tmp_path, pools=frozenset({Pool.MODEL}))
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.store.appends[-1].types == REPLY
    assert unit.take() == [DriveCall("run-a", "c1")]


def test_the_steps_carried_are_counted_by_the_pool_whose_step_they_were(tmp_path: Path) -> None:
    unit = carried(tmp_path)
    instruments = Instruments()
    unit.app.runs.observe = instruments.observe_step
    unit.create("run-a", spec(ONE_CALL, ONE_CALL, DONE))

    unit.deliver(RequestModel("run-a"))

    instruments.flush()
    out = generate_latest(instruments.registry).decode()
    assert 'agentledger_steps_carried_total{pool="tools"} 2.0' in out
    assert 'agentledger_steps_carried_total{pool="model"} 2.0' in out


def test_a_call_carried_after_another_call_s_outcome_is_counted_too(tmp_path: Path) -> None:
    unit = carried(tmp_path)
    instruments = Instruments()
    unit.app.runs.observe = instruments.observe_step
    unit.create("run-a", spec(TWO_CALLS, DONE))

    unit.deliver(RequestModel("run-a"))  # c1's outcome is appended with c2's claim

    assert ("ToolCallSucceeded", "ToolCallStarted") in unit.appends_to("run-a")
    instruments.flush()
    out = generate_latest(instruments.registry).decode()
    assert 'agentledger_steps_carried_total{pool="tools"} 2.0' in out
    assert 'agentledger_steps_carried_total{pool="model"} 1.0' in out


def test_every_status_a_carried_append_passes_through_is_counted_as_a_transition(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    instruments = Instruments()
    unit.app.runs.observe = instruments.observe_step
    unit.create("run-a", spec(ONE_CALL, DONE))

    unit.deliver(RequestModel("run-a"))  # the reply and c1's claim: one append
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.COMPLETED)

    assert (*REPLY, *DRIVE) in unit.appends_to("run-a")
    instruments.flush()
    found = {
        (m.labels["from_status"], m.labels["to_status"]): m.value
        for metric in instruments.registry.collect()
        if metric.name == "agentledger_run_transitions"
        for m in metric.samples
        if m.name.endswith("_total")
    }
    assert found == {
        ("none", "requesting_model"): 1.0,
        ("requesting_model", "validating"): 1.0,
        ("validating", "running_tools"): 1.0,
        ("running_tools", "requesting_model"): 1.0,
        ("requesting_model", "accepting"): 1.0,
        ("accepting", "completed"): 1.0,
    }, "one per move of the lifecycle, none it never makes (requesting_model -> running_tools)"


class OverloadedOnce:
    """The scripted model, whose first answer to `turn` is an overloaded API: a model
    error that retrying may fix (`retryable`)."""

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.asked: list[int] = []  # the turns asked, in order

    def adapter_for(self, model: ModelSpec) -> ModelAdapter:
        inner = scripted(model)
        outer = self

        class Adapter:
            def claim_lease_s(self) -> float:
                return inner.claim_lease_s()

            def respond(self, request: ModelRequest) -> ModelReply:
                outer.asked.append(request.turn)
                if request.turn == outer.turn and outer.asked.count(request.turn) == 1:
                    raise ModelError(
                        "overloaded (529 overloaded_error): Overloaded", kind="overloaded"
                    )
                return inner.respond(request)

        return Adapter()


def test_a_retryable_model_error_in_a_carried_step_is_recorded_and_the_turn_asked_again_after_its_wait(
    tmp_path: Path,
) -> None:
    unit = carried(tmp_path)
    model = OverloadedOnce(turn=2)
    unit.app = dataclasses.replace(unit.app, model_for=model.adapter_for)
    unit.create("run-a", spec(ONE_CALL, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))  # nothing raised: no traceback for dramatiq to log

    assert unit.store.appends[-1].types == ("ModelRequestFailed",)
    assert unit.call_of("run-a", "c1").status is CallStatus.SUCCEEDED, "the outcome is kept"
    failed = unit.memory.read("run-a")[-1].data
    assert isinstance(failed, ModelRequestFailed) and failed.kind == "overloaded"
    assert failed.retry_at is not None and failed.retry_at > unit.clock.now()
    appends = len(unit.store.appends)
    unit.deliver(RequestModel("run-a"))  # before its wait is over: a no-op
    assert len(unit.store.appends) == appends and unit.take() == []

    unit.clock.advance(failed.retry_at - unit.clock.now() + unit.app.settings.lease_s + 1.0)
    assert sweep_once(unit.app, [0]) == 1
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.COMPLETED)

    assert unit.state("run-a").status is RunStatus.COMPLETED
    assert model.asked == [1, 2, 2]
    claims = [e.data for e in unit.memory.read("run-a") if isinstance(e.data, ModelRequested)]
    assert [(c.turn, c.attempt) for c in claims] == [(1, 1), (2, 1), (2, 2)]
    assert unit_tools.RAN == {"c1": 1}, "the call ran once"

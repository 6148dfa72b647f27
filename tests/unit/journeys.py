"""Legal journeys: runs driven the way the workers, the sweeper and people drive
them (through the decision functions and controls, with the follow-ups the
services append), each ending in a known status. The transition tests prove
that together they exercise every row of both tables that a log can take;
other tests reuse them as ready-made runs.

Where no decision in `events/` makes an event (an operator ends a run from any
state, a log written by hand or by an older version), the journey appends it
itself with `Log.append` and says so."""

from __future__ import annotations

from collections.abc import Callable

from flow_journeys import FLOW_JOURNEYS, flow_spec
from runlog import (
    LEASE_S,
    T0,
    Log,
    check,
    do_accept,
    do_cancel,
    do_claim,
    do_finish,
    do_model_turn,
    do_request,
    do_tools,
    do_validate,
    text,
    use,
)

from agentledger.events import controls
from agentledger.events.acceptance_step import record_check_stopped, start_acceptance
from agentledger.events.flow_events import ChildRunEnded
from agentledger.events.lock_step import (
    LockAsk,
    record_lease_expired,
    record_lock,
    record_locks,
    request_id,
)
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.model_retry import ModelFailure
from agentledger.events.model_step import record_model_error, record_model_reply, request_model
from agentledger.events.resolution_step import resolve_unknown
from agentledger.events.run_caps import held_event, release
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_requests import ask_human, record_sample
from agentledger.events.tool_step import Errored, Outcome, Stopped, Succeeded, TimedOut, claim_call
from agentledger.events.types import (
    Event,
    FieldError,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunEscalated,
    RunFailed,
    ToolCallSucceeded,
    ToolError,
)
from agentledger.schemas.content import Usage

R = RunStatus
# where an operator, a budget or a cancel can stop a run: live and not already
# stopping, or waiting for an approval
STOPPABLE = (R.REQUESTING_MODEL, R.VALIDATING, R.RUNNING_TOOLS, R.ACCEPTING, R.AWAITING_APPROVAL)
WALL_CLOCK_S = 600.0

NOT_FOUND = ToolError(code="not_found", message="no such file", retryable=False)


def happy_path() -> Log:
    log = Log.created()
    do_model_turn(log, use("a", "read_file", path="x"), use("b", "write_file", path="y"))
    do_validate(log, "a")  # b still proposed: the run keeps validating
    do_validate(log, "b")  # the turn's last decision: tools may run
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output="contents"))
    do_claim(log, "b")
    do_finish(log, "b", Succeeded(output="ok"))  # the turn's last result
    do_model_turn(log, text("done"))
    do_accept(log, check(True), check(True))
    return log


def rejections_and_failures() -> Log:
    log = Log.created()
    do_model_turn(log, use("x", "no_such_tool"), use("y"), use("z"))
    do_validate(log, "x")  # rejected while others wait
    do_validate(log, "y")
    bad = FieldError(loc="path", msg="Field required")
    do_validate(log, "z", field_errors=[bad])  # rejected last: y may run
    do_claim(log, "y")
    do_finish(log, "y", Errored(NOT_FOUND))
    do_model_turn(log, use("p", "no_such_tool"))
    do_validate(log, "p")  # every call rejected: straight back to the model
    do_model_turn(log, use("q"), use("r"))
    do_validate(log, "q")
    do_validate(log, "r")
    do_claim(log, "q")
    do_claim(log, "r")
    do_finish(log, "q", TimedOut(after_s=5.0))  # a read timing out fails while r runs
    do_finish(log, "r", Succeeded(output="fine"))
    return log


def acceptance_retried_then_failed() -> Log:
    log = Log.created(max_turns=2)
    do_model_turn(log, text("done"))
    do_accept(log, check(False))
    do_model_turn(log, text("done now"))
    do_accept(log, check(False))
    return log


def paused_then_cut_off_then_going_on() -> Log:
    """pause_turn and max_tokens (policy continue) ask the model again; a call in
    a cut-off reply is recorded and rejected at once, never run."""
    log = Log.created(max_turns=4)
    do_model_turn(log, text("thinking"), stop="pause_turn")
    do_model_turn(log, text("and then"), stop="max_tokens")
    do_model_turn(log, use("a", "write_file", path="y"), stop="max_tokens", truncated=["a"])
    return log


def model_failed_at_max_tokens() -> Log:
    log = Log.created(policies={"on_max_tokens": "fail"})
    do_model_turn(log, text("and then"), stop="max_tokens")
    return log


def model_refused_and_failed() -> Log:
    log = Log.created(policies={"on_refusal": "fail"})
    do_model_turn(log, text("I cannot help with that"), stop="refusal")
    return log


def model_error() -> Log:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    refused = ModelFailure("invalid_request", "request refused (400 invalid_request_error): bad")
    log.decide(record_model_error, turn=1, attempt=1, failure=refused, now=T0)
    return log


def duplicate_tool_use_ids() -> Log:
    log = Log.created()
    do_model_turn(log, use("a"), use("a"))
    return log


def turns_exhausted() -> Log:
    log = Log.created(max_turns=1)
    do_model_turn(log, use("a"))
    do_tools(log)
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    return log


def write_timed_out() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"))
    do_validate(log, "w")
    do_claim(log, "w")
    do_finish(log, "w", TimedOut(after_s=10.0))
    return log


def read_claim_expired_three_times() -> Log:
    log = Log.created()
    do_model_turn(log, use("r"))
    do_validate(log, "r")
    for _ in range(3):
        do_claim(log, "r")
        log.decide(on_tick, now=log.call("r").claim_deadline)
    return log


def approvals_granted_denied_and_expired() -> Log:
    log = Log.created(max_turns=4)
    ask = "writes need a person"
    # turn 1: two calls wait for a person while the others are decided
    do_model_turn(
        log,
        use("a", "write_file", path="a"),
        use("b", "write_file", path="b"),
        use("c", path="c"),
        use("d"),
    )
    do_validate(log, "a", needs_approval=ask)  # others proposed: still validating
    do_validate(log, "b", needs_approval=ask)
    do_validate(log, "c")  # d still proposed
    do_validate(log, "d", field_errors=[FieldError(loc="path", msg="Field required")])
    log.decide(controls.approve, "a", by="bob")  # b still waits
    log.decide(controls.deny, "b", by="bob", note="not that file")  # a and c may run
    for call_id in ("a", "c"):
        do_claim(log, call_id)
        do_finish(log, call_id, Succeeded(output="ok"))
    # turn 2: the last validation leaves a call waiting; its grant lets the tools run
    do_model_turn(log, use("e", "write_file", path="e"), use("f", path="f"))
    do_validate(log, "e", needs_approval=ask)
    do_validate(log, "f")
    log.decide(controls.approve, "e", by="bob", note="fine")
    # turn 3: nobody answers; the sweeper denies both once they expire
    do_tools_left(log)
    do_model_turn(log, use("g", "write_file", path="g"), use("h", "write_file", path="h"))
    do_validate(log, "g", needs_approval=ask)
    do_validate(log, "h", needs_approval=ask)  # the last one: awaiting approval
    log.decide(on_tick, now=log.call("g").approval_expires_at)
    return log


def approvals_answered_while_validating() -> Log:
    """A person answers before the turn's other calls are validated."""
    log = Log.created()
    do_model_turn(log, use("a", "write_file", path="a"), use("b", "write_file", path="b"), use("c"))
    do_validate(log, "a", needs_approval="writes need a person")
    do_validate(log, "b", needs_approval="writes need a person")
    log.decide(controls.approve, "a", by="bob")  # c still proposed: still validating
    log.decide(controls.deny, "b", by="bob")
    do_validate(log, "c")
    return log


def approval_asked_last() -> Log:
    """The turn's last validation asks for approval; a rejection leaves the run waiting."""
    log = Log.created()
    do_model_turn(log, use("a", "write_file", path="a"), use("b", "no_such_tool"))
    do_validate(log, "a", needs_approval="writes need a person")
    do_validate(log, "b")
    log.decide(controls.deny, "a", by="bob")
    do_model_turn(log, use("c", "write_file", path="c"))
    do_validate(log, "c", needs_approval="writes need a person")
    return log


def do_tools_left(log: Log) -> None:
    """Claim and succeed every call of the current turn that is ready to run."""
    for call in log.s.current_turn.calls:  # type: ignore[union-attr]
        if call.status is CallStatus.VALIDATED:
            do_claim(log, call.call_id)
            do_finish(log, call.call_id, Succeeded(output="ok"))


def repeated_failure_then_reply() -> Log:
    log = Log.created(max_turns=5)
    for i in range(3):
        do_model_turn(log, use(f"r{i}", path="x"))
        do_validate(log, f"r{i}")
        do_claim(log, f"r{i}")
        do_finish(log, f"r{i}", Errored(NOT_FOUND))  # the third: settle escalates
    log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="the file is called y")
    return log


def unknown_write_told_on_reply() -> Log:
    """A write with an unknown outcome goes back to the model as exactly that when
    a person replies, and the run resumes where its calls are: another call runs."""
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"), use("r", path="x"))
    do_validate(log, "w")
    do_validate(log, "r")
    do_claim(log, "w")
    do_finish(log, "w", TimedOut(after_s=10.0))  # escalates; r not started yet
    log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="it did write; go on")
    do_claim(log, "r")
    do_finish(log, "r", Succeeded(output="contents"))
    return log


def reach(status: RunStatus) -> Log:
    """A run brought to a status through the decisions."""
    if status is R.FLOWING:
        return Log.created(flow_spec())  # a flow's own run, its first stage due
    log = Log.created(budgets={"max_wall_clock_s": WALL_CLOCK_S})
    if status in (R.VALIDATING, R.RUNNING_TOOLS):
        do_model_turn(log, use("a"))
    if status is R.RUNNING_TOOLS:
        do_validate(log, "a")
    if status is R.ACCEPTING:
        do_model_turn(log, text("done"))
    if status is R.AWAITING_APPROVAL:
        do_model_turn(log, use("a", "write_file", path="y"))
        do_validate(log, "a", needs_approval="writes need a person")
    if status is R.AWAITING_HUMAN:
        do_model_turn(log, text("I cannot help with that"), stop="refusal")
    if status is R.CANCELLING:
        do_model_turn(log, use("a"))
        do_validate(log, "a")
        do_claim(log, "a")
        do_cancel(log)
    assert log.s.status is status
    return log


ENDINGS: dict[str, Event] = {
    "RunFailed": RunFailed(reason="operator", detail="an operator stopped it"),
    "RunBudgetExhausted": RunBudgetExhausted(budget="turns", used=1, limit=1, detail="out"),
    "RunEscalated": RunEscalated(reason="refusal", detail="a human asked to look"),
}


def ended_from(status: RunStatus, ending: str) -> Callable[[], Log]:
    # No decision in events/ ends a run from every state (operators may), so these
    # journeys append the ending themselves.
    def journey() -> Log:
        log = reach(status)
        log.append(ENDINGS[ending])
        return log

    return journey


def timed_out_from(status: RunStatus) -> Callable[[], Log]:
    """The wall clock ends the run by whichever decision looks first."""

    def journey() -> Log:
        log = reach(status)
        now = T0 + WALL_CLOCK_S
        if status is R.REQUESTING_MODEL:
            log.decide(request_model, now=now, lease_s=LEASE_S)
        elif status is R.RUNNING_TOOLS:
            log.decide(claim_call, "a", worker="worker-1", now=now)
        else:
            log.decide(on_tick, now=now)
        return log

    return journey


def cancelled_from(status: RunStatus) -> Callable[[], Log]:
    """Nothing runs: the cancel and the run's end go in one batch."""

    def journey() -> Log:
        log = reach(status)
        do_cancel(log)
        return log

    return journey


def escalated_then(status: RunStatus, answer: str) -> Callable[[], Log]:
    """A person answers a run escalated (by an operator) from `status`: it goes back there."""

    def journey() -> Log:
        log = reach(status)
        if status is R.REQUESTING_MODEL:  # a reply needs a turn to follow
            do_model_turn(log, use("a"))
            do_tools(log)
        log.append(ENDINGS["RunEscalated"])
        if answer == "reply":
            log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="carry on")
        else:
            log.decide(controls.resume, by="dana", escalation=log.s.escalation)
        return log

    return journey


def in_flight(log: Log, *call_ids: str) -> None:
    """A turn of writes, every one of them claimed and running."""
    do_model_turn(log, *(use(c, "write_file", path=c) for c in call_ids))
    for call_id in call_ids:
        do_validate(log, call_id)
    for call_id in call_ids:
        do_claim(log, call_id)


def late_outcomes(log: Log, *call_ids: str) -> None:
    """Each way a running call can end, recorded after the run stopped or while it stops."""
    requested = log.s.cancel_requested_at or log.now
    outcomes: list[Outcome] = [
        Succeeded(output="written"),
        Errored(NOT_FOUND),
        TimedOut(after_s=10.0),  # a write: its outcome is unknown
        Stopped(requested_at=requested, killed=False),
        Stopped(requested_at=requested, killed=True, detail="SIGKILL after 5s"),
    ]
    for call_id, outcome in zip(call_ids, outcomes, strict=True):
        before = log.s.status
        do_finish(log, call_id, outcome)
        assert log.s.status is before, "a late outcome does not move the run"


LATE_IDS = ("l1", "l2", "l3", "l4", "l5")


def late_while_waiting_then_after_abort() -> Log:
    log = Log.created(budgets={"max_parallel_calls": 16})
    in_flight(log, "w", *LATE_IDS, *(f"{c}x" for c in LATE_IDS))
    do_finish(log, "w", TimedOut(after_s=10.0))  # unknown: the run waits for a person
    late_outcomes(log, *LATE_IDS)
    # record_outcome drops a result that comes after the claim expired (see
    # test_tool_step), so the worker's word on w is appended by hand
    log.append(ToolCallSucceeded(call_id="w", output="written", started_at=T0, finished_at=T0 + 30))
    log.decide(controls.abort, by="dana", escalation=log.s.escalation, note="enough")
    late_outcomes(log, *(f"{c}x" for c in LATE_IDS))
    return log


def late_after_timeout() -> Log:
    log = Log.created(budgets={"max_wall_clock_s": WALL_CLOCK_S})
    in_flight(log, *LATE_IDS)
    log.decide(on_tick, now=T0 + WALL_CLOCK_S)
    late_outcomes(log, *LATE_IDS)
    return log


def late_after_budget_exhausted() -> Log:
    log = Log.created()
    in_flight(log, *LATE_IDS)
    log.append(ENDINGS["RunBudgetExhausted"])  # an operator's; no decision ends a run here
    late_outcomes(log, *LATE_IDS)
    return log


def late_while_cancelling() -> Log:
    """Every call stops its own way; the last to stop lets the run be cancelled."""
    log = Log.created()
    in_flight(log, *LATE_IDS, "last")
    do_cancel(log, now=log.now + 1)
    late_outcomes(log, *LATE_IDS)
    do_finish(log, "last", Stopped(requested_at=log.s.cancel_requested_at or 0.0, killed=False))
    return log


def late_after_cancelled_by_hand() -> Log:
    # settle cancels a run only once nothing runs, so no service writes this log;
    # a hand-written (or older) one may, and the late records must still fold
    log = Log.created()
    in_flight(log, *LATE_IDS)
    log.append(RunCancelRequested(by="carol", source="cli"))
    log.append(RunCancelled(requested_at=log.now, by="carol", side_effects=(), detail="by hand"))
    late_outcomes(log, *LATE_IDS)
    return log


def reply_after_cancel() -> Log:
    """The model's reply to a request made before the cancel is recorded, not acted on."""
    log = Log.created()
    claimed = do_request(log)
    do_cancel(log)
    log.decide(
        record_model_reply,
        turn=claimed.turn,
        attempt=claimed.attempt,
        content=[use("a", "write_file", path="y")],
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=5),
        model="scripted",
    )
    return log


def reply_while_cancelling_by_hand() -> Log:
    # no service leaves a run cancelling with nothing in flight (settle cancels it in
    # the same batch), so this log is written by hand; the reply is still recorded
    log = Log.created()
    claimed = do_request(log)
    log.append(RunCancelRequested(by="carol", source="cli"))
    log.decide(
        record_model_reply,
        turn=claimed.turn,
        attempt=claimed.attempt,
        content=[text("done")],
        stop_reason="end_turn",
        usage=Usage(),
        model="scripted",
    )
    return log


def cancelled_while_waiting() -> Log:
    """A person cancels a run that waits for them while one of its calls still runs."""
    log = Log.created()
    in_flight(log, "w", "v")
    do_finish(log, "w", TimedOut(after_s=10.0))
    do_cancel(log)
    do_finish(log, "v", Stopped(requested_at=log.s.cancel_requested_at or 0.0, killed=False))
    return log


def locks_waited_granted_and_lost() -> Log:
    """Resource locks, only so that their rows of the tables are exercised: what the
    lock rule decides is not what these tests are about."""
    log = Log.created()
    do_model_turn(log, use("r", path="x"), use("w", "write_file", path="x"), use("q", path="y"))
    do_validate(log, "r", reads=["file:x"])
    do_validate(log, "w", writes=["file:x"])
    do_validate(log, "q", reads=["file:y"])

    def lock(call_id: str, granted: bool) -> None:
        request = request_id(log.s, log.call(call_id))
        tokens = {"file:x": 1} if granted else None
        log.decide(record_lock, call_id, request=request, tokens=tokens, lease_until=log.now + 30)

    def lose_lease(call_id: str) -> None:
        log.decide(record_lease_expired, call_id, request=log.call(call_id).lock_request or "")

    lock("r", granted=True)
    lock("w", granted=False)  # waits behind r
    # a service's back-off closes a key it waits for too (as if it named one)
    backoff = LockAsk(log.s.run_id, "w", log.call("w").lock_request or "", {}, {"limit:x": 1})
    log.decide(record_locks, [backoff], {}, {"limit:x": (1, log.now + 5.0)})
    do_claim(log, "r")
    lose_lease("r")  # running: its claim decides what happened
    do_finish(log, "r", Succeeded(output="x"))
    lock("w", granted=True)
    lose_lease("w")  # granted, never started: it asks again
    lock("w", granted=True)
    do_claim(log, "w")
    do_finish(log, "w", Succeeded(output="written"))
    # a read whose claim expired asks for its lock again: it may wait or be granted at once
    lock("q", granted=True)
    do_claim(log, "q")
    log.decide(on_tick, now=log.call("q").claim_deadline)
    lock("q", granted=False)
    lock("q", granted=True)
    do_claim(log, "q")
    log.decide(on_tick, now=log.call("q").claim_deadline)
    lock("q", granted=True)
    return log


def leases_lost_while_waiting_for_a_human_and_cancelling() -> Log:
    """A running call keeps its locks by renewing them; one that stops renewing loses
    them whatever the run is doing meanwhile (waiting for a person, cancelling)."""
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="x"), use("v", "write_file", path="y"))
    do_validate(log, "w", writes=["file:x"])
    do_validate(log, "v", writes=["file:y"])
    for call_id, key in (("w", "file:x"), ("v", "file:y")):
        request = request_id(log.s, log.call(call_id))
        log.decide(record_lock, call_id, request=request, tokens={key: 1}, lease_until=log.now + 30)
        do_claim(log, call_id)
    do_finish(log, "w", TimedOut(after_s=10.0))  # an unknown write: a person must look
    assert log.s.status is R.AWAITING_HUMAN
    request = log.call("v").lock_request or ""
    log.decide(record_lease_expired, "v", request=request)
    do_cancel(log)
    log.decide(record_lease_expired, "v", request=request)
    do_finish(log, "v", Stopped(requested_at=log.s.cancel_requested_at or 0.0, killed=False))
    return log


def unknown_writes_resolved_by_lookup() -> Log:
    """Idempotent writes, only so that their rows of the tables are exercised: a
    write whose outcome is unknown is looked up instead of escalated."""
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"))
    do_validate(log, "w", op_key="write:y", resolvable=True)
    for finding in ("not_done", "done"):
        do_claim(log, "w")
        do_finish(log, "w", TimedOut(after_s=10.0))
        # asked once the claim's deadline has passed: a write under way is not taken for not done
        past = log.call("w").claim_deadline
        log.decide(resolve_unknown, "w", finding=finding, output="written", now=past)
    return log


def check_stopped_by(ending: str) -> Callable[[], Log]:
    """A check runs when its run is cancelled (or its wall clock ends): the check is
    stopped, SIGTERM then SIGKILL, and recorded after the run's end."""

    def journey() -> Log:
        log = reach(R.ACCEPTING)
        [started] = log.decide(start_acceptance, now=log.now, lease_s=LEASE_S)
        if ending == "cancel":
            do_cancel(log)
        else:
            log.decide(on_tick, now=T0 + WALL_CLOCK_S)
        asked = log.now
        log.decide(
            record_check_stopped, attempt=started.attempt, index=0, check="sleep exits 0",  # type: ignore[union-attr]
            requested_at=asked, stopped_at=asked + 5, signals=("SIGTERM", "SIGKILL"),
            detail="SIGKILL after 5s",
        )  # fmt: skip
        return log

    return journey


def mcp_server_sampled_and_asked() -> Log:
    """An MCP server's requests during a call: a model answer (sampling) recorded while
    the tools run, while the run waits for the person the server asked, and while it stops."""
    log = Log.created()
    do_model_turn(log, use("c1"))
    do_validate(log, "c1")
    do_claim(log, "c1")
    sample = ToolSampledModel(
        call_id="c1", server="ev", sample=1, prompt="[user] hi", max_tokens=10, text="hello",
        stop_reason="end_turn", model="scripted", usage=Usage(input_tokens=3, output_tokens=2),
    )  # fmt: skip
    log.decide(record_sample, sample)
    log.decide(ask_human, "c1", "MCP server 'ev' asks during call c1: your name?")
    log.decide(record_sample, sample)
    log.decide(controls.cancel, by="carol", source="cli")
    log.decide(record_sample, sample)
    return log


def held_released_then_done() -> Log:
    """Past its tenant's cap: held, released when a place frees, then an ordinary run."""
    log = Log.created()
    log.step(*held_event("acme", "default", 2, 1))
    log.decide(release, now=log.now + 5, queue="default", tenant="acme")
    do_model_turn(log, text("done"))
    do_accept(log, check(True))
    return log


def delegate_child_ended() -> Log:
    """A `delegate` call's child ended: its spend is the run's, then the call's outcome."""
    log = Log.created()
    in_flight(log, "d1")
    log.step(ChildRunEnded(stage="delegate:d1", attempt=1, child_run_id="r-c", outcome="completed",
                           status="completed", usage=Usage(input_tokens=7, output_tokens=3)))  # fmt: skip
    do_finish(log, "d1", Succeeded(output={"status": "completed"}))
    return log


def held_then_cancelled() -> Log:
    """A held run cancelled: it ends at once (nothing of it ever ran)."""
    log = Log.created()
    log.step(*held_event("acme", "default", 1, 1))
    do_cancel(log)
    return log


JOURNEYS: dict[str, tuple[Callable[[], Log], RunStatus]] = {
    **FLOW_JOURNEYS,
    "mcp_server_sampled_and_asked": (mcp_server_sampled_and_asked, R.CANCELLING),
    "held_released_then_done": (held_released_then_done, R.COMPLETED),
    "held_then_cancelled": (held_then_cancelled, R.CANCELLED),
    "delegate_child_ended": (delegate_child_ended, R.REQUESTING_MODEL),
    "check_stopped_by_cancel": (check_stopped_by("cancel"), R.CANCELLED),
    "check_stopped_by_wall_clock": (check_stopped_by("wall_clock"), R.TIMEOUT),
    "happy_path": (happy_path, R.COMPLETED),
    "rejections_and_failures": (rejections_and_failures, R.REQUESTING_MODEL),
    "acceptance_retried_then_failed": (acceptance_retried_then_failed, R.FAILED),
    "paused_then_cut_off_then_going_on": (paused_then_cut_off_then_going_on, R.REQUESTING_MODEL),
    "model_failed_at_max_tokens": (model_failed_at_max_tokens, R.FAILED),
    "model_refused_and_failed": (model_refused_and_failed, R.FAILED),
    "model_error": (model_error, R.FAILED),
    "duplicate_tool_use_ids": (duplicate_tool_use_ids, R.FAILED),
    "turns_exhausted": (turns_exhausted, R.BUDGET_EXHAUSTED),
    "write_timed_out": (write_timed_out, R.AWAITING_HUMAN),
    "read_claim_expired_three_times": (read_claim_expired_three_times, R.REQUESTING_MODEL),
    "approvals_granted_denied_and_expired": (
        approvals_granted_denied_and_expired,
        R.REQUESTING_MODEL,
    ),
    "approval_asked_last": (approval_asked_last, R.AWAITING_APPROVAL),
    "approvals_answered_while_validating": (approvals_answered_while_validating, R.RUNNING_TOOLS),
    "repeated_failure_then_reply": (repeated_failure_then_reply, R.REQUESTING_MODEL),
    "unknown_write_told_on_reply": (unknown_write_told_on_reply, R.REQUESTING_MODEL),
    "late_while_waiting_then_after_abort": (late_while_waiting_then_after_abort, R.FAILED),
    "late_after_timeout": (late_after_timeout, R.TIMEOUT),
    "late_after_budget_exhausted": (late_after_budget_exhausted, R.BUDGET_EXHAUSTED),
    "late_while_cancelling": (late_while_cancelling, R.CANCELLED),
    "late_after_cancelled_by_hand": (late_after_cancelled_by_hand, R.CANCELLED),
    "reply_after_cancel": (reply_after_cancel, R.CANCELLED),
    "reply_while_cancelling_by_hand": (reply_while_cancelling_by_hand, R.CANCELLED),
    "cancelled_while_waiting": (cancelled_while_waiting, R.CANCELLED),
    "locks_waited_granted_and_lost": (locks_waited_granted_and_lost, R.RUNNING_TOOLS),
    "leases_lost_while_waiting_for_a_human_and_cancelling": (
        leases_lost_while_waiting_for_a_human_and_cancelling,
        R.CANCELLED,
    ),
    "unknown_writes_resolved_by_lookup": (unknown_writes_resolved_by_lookup, R.REQUESTING_MODEL),
    **{
        f"{ending}_from_{status}": (ended_from(status, ending), to)
        for status in STOPPABLE
        for ending, to in (
            ("RunFailed", R.FAILED),
            ("RunBudgetExhausted", R.BUDGET_EXHAUSTED),
            ("RunEscalated", R.AWAITING_HUMAN),
        )
    },
    **{f"timed_out_from_{s}": (timed_out_from(s), R.TIMEOUT) for s in STOPPABLE},
    **{
        f"cancelled_from_{s}": (cancelled_from(s), R.CANCELLED)
        for s in (*STOPPABLE, R.AWAITING_HUMAN)
    },
    **{
        f"escalated_from_{s}_then_{answer}": (escalated_then(s, answer), s)
        for s in (R.VALIDATING, R.AWAITING_APPROVAL, R.RUNNING_TOOLS, R.REQUESTING_MODEL)
        for answer in ("reply", "resume")
    },
}

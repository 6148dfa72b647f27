"""One line per event for timelines, `tail` and `replay`: `summary` matches every
event of the union to its family's function (`assert_never` for the rest), and each
family's function matches every event of its own union the same way, so an event
added without its line fails mypy and `tests/unit/test_exhaustive.py`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, assert_never

from agentledger.events.causes import check_cause
from agentledger.events.model_step import refusal_details
from agentledger.events.run_caps import held_detail
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ChildRunEnded,
    ChildRunStarted,
    Event,
    FlowRouted,
    HumanReplied,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    RunHeld,
    RunReleased,
    RunResumed,
    RunTimedOut,
    ToolCallBackedOff,
    ToolCallCancelled,
    ToolCallConfirmedNotDone,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallLeaseExpired,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolCallWaiting,
    ToolSampledModel,
)
from agentledger.schemas.content import ProviderBlock, TextBlock
from agentledger.schemas.envelope import Envelope
from agentledger.services.clock import RUN_ID_WIDTH

WIDTH = 100
CAUSE_WIDTH = 240  # a failed check's line: what it checked and why it failed, output tail included
LEDGER = "answered from the ledger, not run again"  # a write whose operation was done before


def line(env: Envelope[Any], *, with_run: bool = False) -> str:
    at = datetime.fromtimestamp(env.at, UTC).strftime("%H:%M:%S.%f")[:-3]
    run = f"{env.run_id:<{RUN_ID_WIDTH}}  " if with_run else ""
    return f"{run}{env.seq:>4}  {at}  {env.source:<8} {env.type:<24} {summary(env.data)}"


def summary(e: Event) -> str:
    """The event's line after its header: by family, each family's function an
    exhaustive match of its own union."""
    match e:
        case (
            RunCreated() | RunCompleted() | RunFailed() | RunEscalated() | RunBudgetExhausted()
            | RunTimedOut() | RunCancelled() | RunCancelRequested() | HumanReplied()
            | RunResumed() | RunAborted() | RunHeld() | RunReleased()
        ):  # fmt: skip
            return _run(e)
        case ModelRequested() | ModelRequestFailed() | ModelResponded():
            return _model(e)
        case (
            ToolCallProposed() | ToolCallValidated() | ToolCallRejected() | ApprovalRequested()
            | ApprovalGranted() | ApprovalDenied() | ToolCallWaiting() | ToolCallScheduled()
            | ToolCallLeaseExpired() | ToolCallBackedOff()
        ):  # fmt: skip
            return _call_asked(e)
        case (
            ToolCallStarted() | ToolCallSucceeded() | ToolCallFailed() | ToolCallOutcomeUnknown()
            | ToolCallConfirmedNotDone() | ToolCallCancelled() | ToolCallForceTerminated()
        ):  # fmt: skip
            return _call_run(e)
        case (
            AcceptanceStarted()
            | AcceptanceChecked()
            | AcceptanceCheckStopped()
            | AcceptanceFailed()
        ):
            return _acceptance(e)
        case ChildRunStarted() | ChildRunEnded() | FlowRouted():
            return _flow(e)
        case ToolSampledModel():
            return (
                f"{e.call_id} {e.server} sample {e.sample}: {e.model} {e.usage.output_tokens} "
                f"tokens out, {e.stop_reason}: {_cut(e.text)}"
            )
        case _:
            assert_never(e)


_RunEvent = (
    RunCreated | RunCompleted | RunFailed | RunEscalated | RunBudgetExhausted | RunTimedOut
    | RunCancelled | RunCancelRequested | HumanReplied | RunResumed | RunAborted | RunHeld
    | RunReleased
)  # fmt: skip


def _flow(e: ChildRunStarted | ChildRunEnded | FlowRouted) -> str:
    match e:
        case ChildRunStarted():
            return _cut(f"{e.stage} attempt {e.attempt}: {e.child_run_id} {e.spec.task!r}")
        case ChildRunEnded():
            tokens = f"{e.usage.input_tokens}+{e.usage.output_tokens} tokens ${e.cost_usd:.4f}"
            said = json.dumps(e.result, default=str)
            return _cut(f"{e.stage} {e.outcome} ({e.child_run_id} {e.status}) {tokens} {said}")
        case FlowRouted():
            to = e.to if e.to is not None else "the end"
            return f"{e.stage} {e.outcome} -> {to}{' (a loop)' if e.loop else ''}"
        case _:
            assert_never(e)


_ModelEvent = ModelRequested | ModelRequestFailed | ModelResponded
_CallAsked = (
    ToolCallProposed | ToolCallValidated | ToolCallRejected | ApprovalRequested | ApprovalGranted
    | ApprovalDenied | ToolCallWaiting | ToolCallScheduled | ToolCallLeaseExpired
    | ToolCallBackedOff
)  # fmt: skip
"""A call's events up to its start: proposed, validated or rejected, approved, its locks."""
_CallRun = (
    ToolCallStarted | ToolCallSucceeded | ToolCallFailed | ToolCallOutcomeUnknown
    | ToolCallConfirmedNotDone | ToolCallCancelled | ToolCallForceTerminated
)  # fmt: skip
"""A call's events from its start: its claim and its outcome."""
_AcceptanceEvent = AcceptanceStarted | AcceptanceChecked | AcceptanceCheckStopped | AcceptanceFailed


def _run(e: _RunEvent) -> str:
    match e:
        case RunCreated():
            return _cut(f"task={e.spec.task!r} principal={e.spec.principal.id}")
        case RunCompleted():
            return _cut(e.detail)
        case RunFailed() | RunEscalated():
            return _cut(f"{e.reason}: {e.detail}")
        case RunBudgetExhausted() | RunTimedOut() | RunCancelled():
            return _cut(e.detail)
        case RunCancelRequested():
            via = e.publisher if e.publisher and e.publisher != e.by else e.source
            return _cut(f"by {e.by} via {via} {e.reason}".rstrip())
        case HumanReplied():
            return _cut(f"{_who(e.by, e.publisher)}: {e.text!r}")
        case RunResumed() | RunAborted():
            return _cut(f"by {_who(e.by, e.publisher)} {e.note}".rstrip())
        case RunHeld():
            return _cut(held_detail(e))
        case RunReleased():
            return f"after {e.held_s:.3f}s held"

        case _:
            assert_never(e)


def _model(e: _ModelEvent) -> str:
    match e:
        case ModelRequested():
            return f"turn {e.turn} (attempt {e.attempt})"
        case ModelRequestFailed():
            again = "not retried" if e.retry_at is None else f"again at {_clock(e.retry_at)}"
            return _cut(f"turn {e.turn} attempt {e.attempt} ({again}): {e.cause}")
        case ModelResponded():
            text = " ".join(b.text for b in e.content if isinstance(b, TextBlock))
            tokens = f"{e.usage.input_tokens}+{e.usage.output_tokens} tokens"
            said = f" {text!r}" if text else ""
            return _cut(f"turn {e.turn} stop={e.stop_reason}{_why(e)} {tokens}{_provider(e)}{said}")
        case _:
            assert_never(e)


def _call_asked(e: _CallAsked) -> str:
    match e:
        case ToolCallProposed():
            return _cut(f"{e.call_id} {e.name}({_args(e.input)})")
        case ToolCallValidated():
            res = " ".join([*(f"r:{r}" for r in e.reads), *(f"w:{w}" for w in e.writes)])
            return _cut(f"{e.call_id} {'read-only' if e.read_only else 'write'} {res}".rstrip())
        case ToolCallRejected():
            return _cut(f"{e.call_id} {e.error.code}: {e.error.message}")
        case ApprovalRequested():
            return _cut(f"{e.call_id} {e.reason}")
        case ApprovalGranted() | ApprovalDenied():
            expired = " (expired)" if isinstance(e, ApprovalDenied) and e.expired else ""
            return _cut(f"{e.call_id} by {_who(e.by, e.publisher)}{expired} {e.note}".rstrip())
        case ToolCallWaiting():
            keys = [f"{k} ({e.holders[k]} holding)" if k in e.holders else k for k in e.waiting_for]
            shut = f"; closed until {_clock(e.closed_until)}" if e.closed_until else ""
            return _cut(f"{e.call_id} waits for {', '.join(keys)}{shut}")
        case ToolCallBackedOff():
            return _cut(
                f"{e.call_id} backs off: {', '.join(e.keys)} closed until {_clock(e.until)}"
            )
        case ToolCallScheduled():
            tokens = " ".join(f"{k}#{v}" for k, v in e.tokens.items())
            return _cut(f"{e.call_id} locks granted {tokens}")
        case ToolCallLeaseExpired():
            return f"{e.call_id} lost its locks ({e.request_id})"
        case _:
            assert_never(e)


def _call_run(e: _CallRun) -> str:
    match e:
        case ToolCallStarted():
            return f"{e.call_id} attempt {e.attempt} on {e.worker}"
        case ToolCallSucceeded():
            output = json.dumps(e.output, default=str)
            if e.replay_of is not None:
                return _cut(f"{e.call_id} {LEDGER} (done as {e.replay_of}) -> {output}")
            ms = (e.finished_at - e.started_at) * 1000
            return _cut(f"{e.call_id} in {ms:.1f} ms -> {output}")
        case ToolCallFailed():
            return _cut(f"{e.call_id} {e.error.code}: {e.error.message}")
        case ToolCallOutcomeUnknown():
            return _cut(f"{e.call_id} {e.reason}")
        case ToolCallConfirmedNotDone():
            return _cut(f"{e.call_id} not done, its lookup of {e.op_key} says: it may run again")
        case ToolCallCancelled():
            return f"{e.call_id} stopped {e.stopped_at - e.requested_at:.2f}s after the request"
        case ToolCallForceTerminated():
            return _cut(
                f"{e.call_id} killed {e.terminated_at - e.requested_at:.2f}s after the request: {e.detail}"
            )
        case _:
            assert_never(e)


def _acceptance(e: _AcceptanceEvent) -> str:
    match e:
        case AcceptanceStarted():
            return f"attempt {e.attempt}"
        case AcceptanceChecked():
            if e.passed:
                return _cut(f"PASS {e.check}")
            return _cut(f"FAIL {e.check}: {check_cause(e.evidence)}", CAUSE_WIDTH)
        case AcceptanceCheckStopped():
            took = e.stopped_at - e.requested_at
            return _cut(f"{e.check} stopped {took:.2f}s after the request: {e.detail}")
        case AcceptanceFailed():
            return _cut(e.feedback.replace("\n", " | "))
        case _:
            assert_never(e)


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def _who(by: str, publisher: str | None) -> str:
    """`alice via billing-svc`: who spoke, and the inbox publisher that signed it
    (`bob` alone when the publisher is bob: the web view speaks as its publisher)."""
    return f"{by} via {publisher}" if publisher and publisher != by else by


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _cut(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _why(e: ModelResponded) -> str:
    """What the API said about the stop: its category and explanation, the sequence."""
    if e.stop_sequence:
        return f" ({e.stop_sequence!r})"
    return refusal_details(e.stop_details)


def _provider(e: ModelResponded) -> str:
    """The server tools the provider ran in this reply (never run by our executor)."""
    used = [
        str(b.fields.get("name"))
        for b in e.content
        if isinstance(b, ProviderBlock) and b.is_server_tool_use
    ]
    return f" provider ran {', '.join(used)}" if used else ""

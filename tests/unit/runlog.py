"""Builders for the unit tests: a run spec, a few registered tools, and `Log`, a
run's log under construction. `Log` wraps events in envelopes with consecutive
`seq`, folds each one as it is appended (so an illegal event fails where it is
appended) and records every run and call move it sees, which is how the
transition tests prove that each table row is exercised.

`Log.decide` is load → decide → append as `agentledger.services.handlers.engine.Engine.take` does it:
the decision's events, then in the same batch the follow-ups they make due
(`agentledger.events.settle.settle_batch`: a cancelled run with nothing left running is cancelled, a
streak of identical failures goes to a human). `Log.append` writes events by
hand, with no follow-ups. The log carries a clock (`now`) that stamps each
envelope; the `do_*` helpers move it and drive a run the way the workers do."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, settings

from agentledger.events import controls
from agentledger.events.acceptance_step import CheckResult, record_acceptance, start_acceptance
from agentledger.events.fold import apply
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.model_step import record_model_reply, request_model
from agentledger.events.settle import settle_batch
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Outcome, Succeeded, claim_call, record_outcome
from agentledger.events.types import Event, FieldError, ModelRequested, RunCreated, StopReason
from agentledger.events.validation_step import Finding, validate_call
from agentledger.schemas.content import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec, ToolSpec

RUN_ID = "run-1"
T0 = 1_000.0
LEASE_S = 30.0
NO_USAGE = Usage()
CHECK_STARTS = T0 + 50  # after every write the helpers make at their default times

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

READ = ToolSpec(
    name="read_file",
    description="read a file",
    input_schema={"type": "object"},
    read_only=True,
    timeout_s=5.0,
)
WRITE = ToolSpec(
    name="write_file",
    description="write a file",
    input_schema={"type": "object"},
    read_only=False,
    scope="fs:write",
    timeout_s=10.0,
)
ADMIN = ToolSpec(
    name="drop_table",
    description="drop a table",
    input_schema={"type": "object"},
    read_only=False,
    scope="db:admin",  # the default principal lacks it
)
TOOLS = {t.name: t for t in (READ, WRITE, ADMIN)}

RunMove = tuple[RunStatus | None, type[Event], RunStatus]
CallMove = tuple[CallStatus | None, type[Event], CallStatus]


def make_spec(
    *,
    max_turns: int = 3,
    scopes: Sequence[str] = ("fs:write",),
    budgets: dict[str, Any] | None = None,
    policies: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "fix the failing test",
            "workspace": "/tmp/ws",
            "tools": sorted(TOOLS),
            "principal": {"id": "alice", "tenant": "acme", "scopes": list(scopes)},
            "budgets": {"max_turns": max_turns, **(budgets or {})},
            "policies": policies or {},
            "model": model or {"scripted": [{"end_turn": "done"}]},
            "acceptance": [{"command": "pytest -q"}],
        }
    )


def envelope(event: Event, *, seq: int, run_id: str = RUN_ID, at: float = T0) -> Envelope[Any]:
    return Envelope[Any](
        id=f"{run_id}:{seq}",
        run_id=run_id,
        seq=seq,
        type=event.type,
        at=at,
        source="test",
        data=event,
    )


class Log:
    def __init__(self, run_id: str = RUN_ID) -> None:
        self.run_id = run_id
        self.now = T0
        self.envelopes: list[Envelope[Any]] = []
        self.state: RunState | None = None
        self.run_moves: set[RunMove] = set()
        self.call_moves: set[CallMove] = set()

    @classmethod
    def created(cls, spec: RunSpec | None = None, *, max_turns: int = 3, **spec_args: Any) -> Log:
        log = cls()
        spec = spec or make_spec(max_turns=max_turns, **spec_args)
        log.append(RunCreated(spec=spec, workspace="/tmp/ws"))
        return log

    @property
    def s(self) -> RunState:
        assert self.state is not None, "the log has no RunCreated yet"
        return self.state

    def call(self, call_id: str) -> Call:
        call = self.s.call(call_id)
        assert call is not None, f"no call {call_id!r} in the current turn"
        return call

    def append(self, *events: Event) -> list[Event]:
        """Write events by hand, stamped `now`: no follow-ups are added."""
        for event in events:
            env = envelope(event, seq=len(self.envelopes) + 1, run_id=self.run_id, at=self.now)
            old = self.state
            new = apply(old, env)
            self.run_moves.add((old.status if old else None, type(event), new.status))
            call_id = getattr(event, "call_id", None)
            if call_id is not None and not isinstance(event, ToolSampledModel):  # a run event
                before = old.call(call_id) if old else None
                after = new.call(call_id)
                assert after is not None
                self.call_moves.add((before.status if before else None, type(event), after.status))
            self.state, self.envelopes = new, [*self.envelopes, env]
        return list(events)

    def step(self, *events: Event) -> list[Event]:
        """Append a batch as Engine.take does: the events, then the follow-ups they make due."""
        if not events:
            return []

        def fold_on(_: RunState, more: Sequence[Event]) -> RunState:
            self.append(*more)
            return self.s

        batch, _ = settle_batch(self.s, events, fold_on)
        return batch

    def decide(
        self, decision: Callable[..., list[Event]], *args: Any, **kwargs: Any
    ) -> list[Event]:
        """Load → decide → append, as a handler does; stamped with the decision's `now`."""
        if isinstance(kwargs.get("now"), float | int):
            self.now = float(kwargs["now"])
        return self.step(*decision(self.s, *args, **kwargs))

    def at(self, now: float | None) -> float:
        """Move the log's clock to `now` (if given) and return the time."""
        if now is not None:
            self.now = now
        return self.now


def use(call_id: str, name: str = "read_file", **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input=arguments)


def text(words: str) -> TextBlock:
    return TextBlock(text=words)


def do_request(log: Log, *, now: float | None = None) -> ModelRequested:
    [claimed] = log.decide(request_model, now=log.at(now), lease_s=LEASE_S)
    assert isinstance(claimed, ModelRequested), f"the model was not asked: {claimed!r}"
    return claimed


def do_model_turn(
    log: Log,
    *content: ContentBlock,
    stop: StopReason | None = None,
    now: float | None = None,
    usage: Usage = NO_USAGE,
    model: str = "scripted",
    truncated: Sequence[str] = (),
) -> list[Event]:
    """Claim the model call and record its reply: tool_use if any block asks for a tool."""
    if stop is None:
        stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"
    claimed = do_request(log, now=now)
    return log.decide(
        record_model_reply,
        turn=claimed.turn,
        attempt=claimed.attempt,
        content=content,
        stop_reason=stop,
        usage=usage,
        model=model,
        truncated=truncated,
    )


def do_validate(
    log: Log,
    call_id: str,
    *,
    field_errors: Sequence[FieldError] = (),
    needs_approval: str | None = None,
    reads: Sequence[str] = (),
    writes: Sequence[str] = (),
    now: float | None = None,
    **contract: Any,
) -> list[Event]:
    """The validator's decision; `contract` passes further findings on (op_key…)."""
    found = Finding(
        tool=TOOLS.get(log.call(call_id).name),
        field_errors=tuple(field_errors),
        reads=tuple(reads),
        writes=tuple(writes),
        approval=needs_approval,
        **contract,
    )
    return log.decide(
        validate_call, call_id, found=found, known_tools=sorted(TOOLS), now=log.at(now)
    )


def do_claim(log: Log, call_id: str, *, now: float | None = None) -> int:
    [started] = log.decide(claim_call, call_id, worker="worker-1", now=log.at(now))
    return started.attempt  # type: ignore[union-attr]


def do_finish(log: Log, call_id: str, outcome: Outcome, *, now: float | None = None) -> list[Event]:
    """Record the outcome of the call's attempt: started at `now`, finished a second later."""
    started_at = log.at(now)
    log.now = started_at + 1
    return log.decide(
        record_outcome,
        call_id,
        attempt=log.call(call_id).attempts,
        outcome=outcome,
        started_at=started_at,
        finished_at=started_at + 1,
    )


def do_tools(log: Log, *, now: float | None = None) -> None:
    """Validate, claim and succeed every call of the current turn."""
    ids = [c.call_id for c in log.s.current_turn.calls]  # type: ignore[union-attr]
    for call_id in ids:
        do_validate(log, call_id, now=now)
    for call_id in ids:
        do_claim(log, call_id, now=now)
        do_finish(log, call_id, Succeeded(output=f"output of {call_id}"), now=now)


def do_cancel(log: Log, *, by: str = "carol", now: float | None = None) -> list[Event]:
    log.at(now)
    return log.decide(controls.cancel, by=by, source="cli", reason="not needed any more")


def check(
    passed: bool,
    *,
    reason: str = "exit status 1",
    started_at: float = CHECK_STARTS,
    depends_on: tuple[str, ...] = ("*",),
) -> CheckResult:
    evidence = {"exit_code": 0} if passed else {"exit_code": 1, "reason": reason}
    return CheckResult(
        check="pytest -q exits 0",
        passed=passed,
        evidence=evidence,
        started_at=started_at,
        checked_at=started_at + 1,
        depends_on=depends_on,
    )


def do_accept(log: Log, *results: CheckResult, now: float | None = None) -> list[Event]:
    [started] = log.decide(start_acceptance, now=log.at(now), lease_s=LEASE_S)
    return log.decide(record_acceptance, attempt=started.attempt, results=results)  # type: ignore[union-attr]


def assert_every_tool_use_is_answered_in_order(conversation: Sequence[Message]) -> None:
    for i, message in enumerate(conversation):
        uses = [b.id for b in message.content if isinstance(b, ToolUseBlock)]
        if not uses:
            continue
        assert message.role == "assistant"
        reply = conversation[i + 1]
        assert reply.role == "user"
        results = [b.tool_use_id for b in reply.content if isinstance(b, ToolResultBlock)]
        assert results == uses


def assert_roles_alternate(conversation: Sequence[Message]) -> None:
    roles = [m.role for m in conversation]
    assert roles[0] == "user"
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles

"""Builders for the unit tests: a run spec, a few registered tools, and `Log`, a
run's log under construction. `Log` wraps events in envelopes with consecutive
`seq`, folds each one as it is appended (so an illegal event fails where it is
appended) and records every run and call move it sees, which is how the
transition tests prove that each table row is exercised. The `do_*` helpers
drive a run through the decision functions, the way the workers would."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, settings

from events.acceptance_step import CheckResult, record_acceptance, start_acceptance
from events.fold import apply
from events.model_step import record_model_reply, request_model
from events.state import RunState
from events.status import CallStatus, RunStatus
from events.tool_step import Outcome, Succeeded, claim_call, record_outcome, validate_call
from events.types import Event, FieldError, RunCreated, StopReason
from schemas.content import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from schemas.envelope import Envelope
from schemas.spec import RunSpec, ToolSpec

RUN_ID = "run-1"
T0 = 1_000.0
LEASE_S = 30.0
NO_USAGE = Usage()

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

RunMove = tuple[RunStatus | None, str, RunStatus]
CallMove = tuple[CallStatus | None, str, CallStatus]


def make_spec(*, max_turns: int = 3, scopes: Sequence[str] = ("fs:write",)) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "fix the failing test",
            "workspace": "/tmp/ws",
            "tools": sorted(TOOLS),
            "principal": {"id": "alice", "tenant": "acme", "scopes": list(scopes)},
            "budgets": {"max_turns": max_turns},
            "model": {"scripted": [{"end_turn": "done"}]},
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
        self.envelopes: list[Envelope[Any]] = []
        self.state: RunState | None = None
        self.run_moves: set[RunMove] = set()
        self.call_moves: set[CallMove] = set()

    @classmethod
    def created(cls, spec: RunSpec | None = None, *, max_turns: int = 3) -> Log:
        log = cls()
        log.append(RunCreated(spec=spec or make_spec(max_turns=max_turns), workspace="/tmp/ws"))
        return log

    @property
    def s(self) -> RunState:
        assert self.state is not None, "the log has no RunCreated yet"
        return self.state

    def next_envelope(self, event: Event) -> Envelope[Any]:
        return envelope(event, seq=len(self.envelopes) + 1, run_id=self.run_id)

    def append(self, *events: Event) -> list[Event]:
        for event in events:
            env = self.next_envelope(event)
            old = self.state
            new = apply(old, env)
            self.run_moves.add((old.status if old else None, event.type, new.status))
            call_id = getattr(event, "call_id", None)
            if call_id is not None:
                before = old.call(call_id) if old else None
                after = new.call(call_id)
                assert after is not None
                self.call_moves.add((before.status if before else None, event.type, after.status))
            self.state, self.envelopes = new, [*self.envelopes, env]
        return list(events)

    def decide(
        self, decision: Callable[..., list[Event]], *args: Any, **kwargs: Any
    ) -> list[Event]:
        """Load → decide → append, as a handler does."""
        return self.append(*decision(self.s, *args, **kwargs))


def use(call_id: str, name: str = "read_file", **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input=arguments)


def text(words: str) -> TextBlock:
    return TextBlock(text=words)


def do_model_turn(
    log: Log,
    *content: ContentBlock,
    stop: StopReason | None = None,
    now: float = T0,
    usage: Usage = NO_USAGE,
) -> list[Event]:
    """Claim the model call and record its reply: tool_use if any block asks for a tool."""
    if stop is None:
        stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"
    [claimed] = log.decide(request_model, now=now, lease_s=LEASE_S)
    return log.decide(
        record_model_reply,
        turn=claimed.turn,  # type: ignore[union-attr]
        attempt=claimed.attempt,  # type: ignore[union-attr]
        content=content,
        stop_reason=stop,
        usage=usage,
        model="scripted",
    )


def do_validate(log: Log, call_id: str, *, field_errors: Sequence[FieldError] = ()) -> list[Event]:
    call = log.s.call(call_id)
    assert call is not None
    return log.decide(
        validate_call,
        call_id,
        tool=TOOLS.get(call.name),
        known_tools=sorted(TOOLS),
        field_errors=field_errors,
    )


def do_claim(log: Log, call_id: str, *, now: float = T0) -> int:
    [started] = log.decide(claim_call, call_id, worker="worker-1", now=now)
    return started.attempt  # type: ignore[union-attr]


def do_finish(log: Log, call_id: str, outcome: Outcome, *, now: float = T0) -> list[Event]:
    call = log.s.call(call_id)
    assert call is not None
    return log.decide(
        record_outcome,
        call_id,
        attempt=call.attempts,
        outcome=outcome,
        started_at=now,
        finished_at=now + 1,
    )


def do_tools(log: Log, *, now: float = T0) -> None:
    """Validate, claim and succeed every call of the current turn."""
    assert log.s.current_turn is not None
    ids = [c.call_id for c in log.s.current_turn.calls]
    for call_id in ids:
        do_validate(log, call_id)
    for call_id in ids:
        do_claim(log, call_id, now=now)
        do_finish(log, call_id, Succeeded(output=f"output of {call_id}"), now=now)


def check(passed: bool, *, reason: str = "exit status 1") -> CheckResult:
    evidence = {"exit_code": 0} if passed else {"exit_code": 1, "reason": reason}
    return CheckResult(check="pytest -q exits 0", passed=passed, evidence=evidence, checked_at=T0)


def do_accept(log: Log, *results: CheckResult, now: float = T0) -> list[Event]:
    [started] = log.decide(start_acceptance, now=now, lease_s=LEASE_S)
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

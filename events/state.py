"""The folded state of a run. Frozen; only `fold.apply` makes new ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentledger.events.flow_state import FlowState
from agentledger.events.history import History
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import EscalationReason, Overflow, ToolError
from agentledger.schemas.content import ContentBlock, Usage
from agentledger.schemas.spec import RunSpec


@dataclass(frozen=True, slots=True)
class Call:
    call_id: str
    turn: int
    name: str
    input: dict[str, Any]
    status: CallStatus
    read_only: bool = False
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    timeout_s: float = 0.0
    max_concurrency: int | None = None
    limits: tuple[tuple[str, int], ...] = ()  # concurrency keys (filled in) and their max
    slot_holders: tuple[tuple[str, int], ...] = ()  # each slot key's holders when it began waiting
    backed_off_until: float | None = None  # a service's back-off closed a key it waits for
    op_key: str | None = None
    request_hash: str | None = None
    resolvable: bool = False
    output_cap: int | None = None
    resolution_asked: bool = False
    attempts: int = 0
    claim_deadline: float | None = None
    claimed_by: str | None = None  # the worker (host:pid:nonce) of the latest claim
    approval_expires_at: float | None = None
    lock_request: str | None = None
    expiries: int = 0  # leases it lost while scheduled or running: a new ask has a new id
    tokens: dict[str, int] | None = None  # fencing token per resource, once scheduled
    waited_at: float | None = None  # when it last queued for its locks (ToolCallWaiting)
    started_at: float | None = None
    finished_at: float | None = None
    output: Any = None
    error: ToolError | None = None
    overflow: Overflow | None = None  # the output was cut: `output` is its text's head


@dataclass(frozen=True, slots=True)
class Turn:
    index: int
    content: tuple[ContentBlock, ...]
    stop_reason: str
    model: str
    calls: tuple[Call, ...] = ()
    feedback: str | None = None

    def call(self, call_id: str) -> Call | None:
        for (
            c
        ) in self.calls:  # a plain loop: looked up ~20 times a tool call, a generator costs more
            if c.call_id == call_id:
                return c
        return None

    @property
    def finished(self) -> bool:
        return all(c.status.finished for c in self.calls)


@dataclass(frozen=True, slots=True)
class Check:
    index: int
    check: str
    passed: bool
    evidence: dict[str, Any]
    checked_at: float


@dataclass(frozen=True, slots=True)
class RunState:
    run_id: str
    status: RunStatus
    spec: RunSpec
    workspace: str | None
    created_at: float
    # when its wall clock started: its release for a run that was held, else None (created_at)
    clock_from: float | None = None
    base_dir: str | None = None
    request_id: str | None = None
    queue: str = "default"  # the task queue its commands go to
    toolset: str = ""  # the fingerprint of the tool code that may serve it
    seq: int = 0
    last_event_id: str = (
        ""  # the id of the event at `seq`: an append checks the log still ends there
    )
    updated_at: float = 0.0
    history: History[Turn] = field(default_factory=History)  # turns before the current one
    current_turn: Turn | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0
    counting_from_turn: int = 0  # repeats are counted after this turn (a person spoke)
    cancel_requested_at: float | None = None
    cancel_by: str = ""
    model_attempts: int = 0
    model_claim_deadline: float | None = None  # after a failed attempt: when the next may start
    model_first_attempt_at: float | None = (
        None  # the turn's first model request (the retry bound's start)
    )
    model_failed_attempt: int = 0  # the turn's latest attempt recorded as failed: its claim is over
    acceptance_attempts: int = 0
    acceptance_claim_deadline: float | None = None
    checks: tuple[Check, ...] = ()
    detail: str = ""
    failed_acceptance: str | None = (
        None  # the latest failed acceptance, told (agentledger.events.causes)
    )
    escalated_for: EscalationReason | None = (
        None  # why the run waits for a human (RunEscalated.reason)
    )
    escalation: int | None = None  # the seq of the latest RunEscalated: what an answer must name
    publisher: str | None = None  # who published its request (RunCreated.publisher)
    samples: int = 0  # model answers MCP servers asked for during calls (ToolSampledModel)
    flow: FlowState | None = None  # a flow's own run: where its stages are
    parent_run_id: str | None = None  # the flow's run it is a stage of (RunCreated.parent_run_id)
    stage: str | None = None  # the stage of that flow it runs (RunCreated.stage)

    @property
    def turns_used(self) -> int:
        return len(self.history) + (self.current_turn is not None)

    @property
    def in_flight(self) -> list[Call]:
        """Calls of the current turn that are running right now."""
        turn = self.current_turn
        return [c for c in turn.calls if c.status is CallStatus.STARTED] if turn else []

    @property
    def over(self) -> bool:
        """Ended, with no call still running: nothing more will be appended (a late
        outcome comes only for a started call)."""
        return self.status.terminal and not self.in_flight

    @property
    def turns(self) -> list[Turn]:
        return [*self.history, *([self.current_turn] if self.current_turn else [])]

    def call(self, call_id: str) -> Call | None:
        turn = self.current_turn
        return turn.call(call_id) if turn else None

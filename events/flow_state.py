"""A flow's state machine, as a table, and its folded state (a part of its run's state,
`RunState.flow`). Read the table top to bottom like the flow's life:

    starting -> in_child (ChildRunStarted) -> routing (ChildRunEnded)
    starting -> at_gate (RunEscalated, reason flow_gate) -> routing (RunResumed | RunAborted | HumanReplied)
    routing -> starting (FlowRouted to a stage) | ended (FlowRouted to the end)

The run around it keeps its own table (`agentledger.events.transitions`): a flow's run
is `flowing` while its stages go on, `awaiting_human` at a gate, and ends in the run's
usual terminal states. Anything not in the table raises `IllegalTransition`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentledger.events.flow_events import ChildRunEnded, ChildRunStarted, FlowRouted
from agentledger.events.run_events import HumanReplied, RunAborted, RunEscalated, RunResumed
from agentledger.schemas.spec import RunSpec


class FlowPhase(StrEnum):
    STARTING = "starting"  # the current stage is due to start
    IN_CHILD = "in_child"  # its child run goes on
    AT_GATE = "at_gate"  # a person is asked
    ROUTING = "routing"  # the stage has its outcome: where it leads is due
    ENDED = "ended"  # routed to the end: the run's terminal event follows


P = FlowPhase
FlowRow = tuple[FlowPhase, type, FlowPhase]

FLOW_TRANSITIONS: frozenset[FlowRow] = frozenset(
    {
        (P.STARTING, ChildRunStarted, P.IN_CHILD),
        (P.STARTING, RunEscalated, P.AT_GATE),
        (P.IN_CHILD, ChildRunEnded, P.ROUTING),
        (P.AT_GATE, RunResumed, P.ROUTING),  # approved
        (P.AT_GATE, RunAborted, P.ROUTING),  # denied
        (P.AT_GATE, HumanReplied, P.ROUTING),  # replied (routed by `on: {replied: …}`)
        (P.ROUTING, FlowRouted, P.STARTING),
        (P.ROUTING, FlowRouted, P.ENDED),
    }
)
FLOW_EVENTS = frozenset(kind for _, kind, _ in FLOW_TRANSITIONS)


@dataclass(frozen=True, slots=True)
class FlowState:
    phase: FlowPhase
    stage: str  # the current stage
    attempt: int = 0  # the current stage's attempt, once started (1: its first)
    child: str | None = None  # the current stage's child run
    child_spec: RunSpec | None = None  # its spec (ChildRunStarted.spec): what makes it
    outcome: str | None = None  # the current stage's outcome, once it has one
    entries: tuple[tuple[str, int], ...] = ()  # times each stage was started
    results: tuple[tuple[str, dict[str, Any]], ...] = ()  # each stage's latest result
    outcomes: tuple[tuple[str, str], ...] = ()  # each stage's latest outcome
    loops: int = 0  # routes back (to the stage itself, or one before it)
    turns: int = 0  # model responses its children used

    def entered(self, stage: str) -> int:
        return dict(self.entries).get(stage, 0)

    def result(self, stage: str) -> dict[str, Any] | None:
        return dict(self.results).get(stage)

    def outcome_of(self, stage: str) -> str | None:
        return dict(self.outcomes).get(stage)


def with_item(
    pairs: tuple[tuple[str, Any], ...], key: str, value: Any
) -> tuple[tuple[str, Any], ...]:
    """`pairs` with `key` set to `value` (in place of its old one, kept in first order)."""
    if any(k == key for k, _ in pairs):
        return tuple((k, value if k == key else v) for k, v in pairs)
    return (*pairs, (key, value))


def flow_record(f: FlowState) -> dict[str, Any]:
    """The flow as plain data, for its run's snapshot (`agentledger.events.snapshot`)."""
    return {
        "phase": str(f.phase), "stage": f.stage, "attempt": f.attempt, "child": f.child,
        "child_spec": f.child_spec.model_dump(mode="json") if f.child_spec else None,
        "outcome": f.outcome, "entries": [list(e) for e in f.entries],
        "results": [[k, v] for k, v in f.results], "outcomes": [list(o) for o in f.outcomes],
        "loops": f.loops, "turns": f.turns,
    }  # fmt: skip


def flow_of_record(r: dict[str, Any]) -> FlowState:
    spec = r.get("child_spec")
    return FlowState(
        phase=FlowPhase(r["phase"]), stage=r["stage"], attempt=int(r["attempt"]),
        child=r.get("child"), child_spec=RunSpec.model_validate(spec) if spec else None,
        outcome=r.get("outcome"), entries=tuple((k, int(n)) for k, n in r["entries"]),
        results=tuple((k, dict(v)) for k, v in r["results"]),
        outcomes=tuple((k, str(o)) for k, o in r["outcomes"]),
        loops=int(r["loops"]), turns=int(r["turns"]),
    )  # fmt: skip

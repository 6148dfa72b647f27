"""A short run made through the deciders, for a new worker to read before its
threads start: two tool calls and an end turn, each event of the hot path twice
(`sample_log`). Folding it, and reading it back through the codec and a
snapshot, runs the code a run's first load runs, so that the first load of a
real run is not the one that pays for the interpreter's first pass over it
(`agentledger.services.bootstrap.prepare_readers`). It is never written anywhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from agentledger.events.fold import fold
from agentledger.events.model_step import record_model_reply, request_model
from agentledger.events.settle import settle_batch
from agentledger.events.state import RunState
from agentledger.events.tool_step import Succeeded, claim_call, record_outcome
from agentledger.events.types import Event, ModelRequested, RunCreated, ToolCallStarted
from agentledger.events.validation_step import Finding, validate_call
from agentledger.schemas.content import TextBlock, ToolUseBlock, Usage
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec, ToolSpec

E = TypeVar("E", bound=Event)
RUN_ID = "sample-run"
_T0 = 1_700_000_000.0
_TOOL = ToolSpec(
    name="read_file", description="read a file", input_schema={"type": "object"}, read_only=True
)


def sample_spec() -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "read a file",
            "workspace": "/tmp/sample",
            "tools": [_TOOL.name],
            "principal": {"id": "sample", "tenant": "sample", "scopes": []},
            "model": {"scripted": [{"end_turn": "done"}]},
        }
    )


def sample_log() -> list[Envelope[Any]]:
    """RunCreated, two model turns each asking for one read (its validation, claim
    and outcome), and a model turn that ends: the run stands at its acceptance."""
    log = _Log(sample_spec())
    for call_id in ("c1", "c2"):
        claimed = _as(log.step(request_model(log.s, now=log.now, lease_s=30.0)), ModelRequested)
        log.step(
            record_model_reply(
                log.s, turn=claimed.turn, attempt=claimed.attempt,
                content=[TextBlock(text="reading"), ToolUseBlock(id=call_id, name=_TOOL.name, input={})],
                stop_reason="tool_use", usage=Usage(input_tokens=10, output_tokens=5), model="scripted",
            )
        )  # fmt: skip
        found = Finding(tool=_TOOL)
        log.step(validate_call(log.s, call_id, found=found, known_tools=[_TOOL.name], now=log.now))
        claim = claim_call(log.s, call_id, worker="sample", now=log.now)
        started = _as(log.step(claim), ToolCallStarted)
        log.step(
            record_outcome(
                log.s, call_id, attempt=started.attempt, outcome=Succeeded(output="text"),
                started_at=log.now, finished_at=log.now,
            )
        )  # fmt: skip
    claimed = _as(log.step(request_model(log.s, now=log.now, lease_s=30.0)), ModelRequested)
    log.step(
        record_model_reply(
            log.s, turn=claimed.turn, attempt=claimed.attempt, content=[TextBlock(text="done")],
            stop_reason="end_turn", usage=Usage(input_tokens=20, output_tokens=2), model="scripted",
        )
    )  # fmt: skip
    return log.envelopes


def _as(event: Event, kind: type[E]) -> E:
    if not isinstance(event, kind):
        raise AssertionError(f"the sample run's decider decided {event.type}, not {kind.__name__}")
    return event


class _Log:
    def __init__(self, spec: RunSpec) -> None:
        self.now = _T0
        self.envelopes: list[Envelope[Any]] = []
        self._state: RunState | None = None
        self._append([RunCreated(spec=spec, workspace=spec.workspace)])

    @property
    def s(self) -> RunState:
        if self._state is None:
            raise AssertionError("the sample run has no RunCreated")
        return self._state

    def step(self, decided: Sequence[Event]) -> Event:
        """Append the decision and its follow-ups (`settle_batch`); the first event."""
        if not decided:
            raise AssertionError("the sample run's decider decided nothing")
        settle_batch(self.s, decided, lambda _, more: self._append(more))
        self.now += 0.01
        return decided[0]

    def _append(self, events: Sequence[Event]) -> RunState:
        start = len(self.envelopes)
        made = [
            Envelope[Any](
                id=f"{RUN_ID}:{start + i + 1}", run_id=RUN_ID, seq=start + i + 1, type=e.type,
                at=self.now, source="sample", data=e,
            )
            for i, e in enumerate(events)
        ]  # fmt: skip
        self._state = fold(made, self._state)
        self.envelopes += made
        return self.s

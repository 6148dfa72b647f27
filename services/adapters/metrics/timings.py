"""What an append's events say about durations and sizes, for the histograms: a
tool call's run (claimed → its outcome), a model call (the claim → its reply or
failure) and the tokens of its reply, a lock wait (queued → granted, 0 when
granted at once), a run's life (created → its terminal state). Every time is an
event's own (`Envelope.at`), so what the histograms say is what the log says.

A model call's start is the `ModelRequested` of its turn, which the same worker
appended just before (it claims, calls, records): it is kept here, bounded, by
run and turn; a reply whose claim this process did not see is timed from the
turn's first request when that was its only attempt, and not timed otherwise."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from agentledger.events.batch import Appended
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus
from agentledger.events.types import (
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    ToolCallScheduled,
)

KEEP_CLAIMS = 10_000  # model claims remembered (one per live turn this process serves)
TOKEN_KINDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_input_tokens"),
    ("cache_write", "cache_creation_input_tokens"),
)
# (histogram, its labels, the value observed); the histograms are Instruments' attributes
Observation = tuple[str, tuple[str, ...], float]


class Timings:
    """The observations of each append, in order; holds only the model claims."""

    def __init__(self) -> None:
        self._claims: OrderedDict[tuple[str, int], float] = OrderedDict()

    def of(self, appended: Appended, tool_outcomes: dict[type[Any], str]) -> Iterator[Observation]:
        before, after = appended.before, appended.after
        for env in appended.batch:
            data = env.data
            if isinstance(data, ModelRequested):
                self._claim((after.run_id, data.turn), env.at)
            elif isinstance(data, ModelResponded | ModelRequestFailed):
                yield from self._model(before, after, data, env.at)
            elif isinstance(data, ToolCallScheduled):
                yield from _lock_wait(before, after, data.call_id, env.at)
            elif (outcome := tool_outcomes.get(type(data))) is not None:
                yield from _tool_run(before, after, data.call_id, outcome, env.at)
        for was, status in appended.moves():
            if status.terminal and not (was and was.terminal):
                yield "run_seconds", (str(status),), max(0.0, after.updated_at - after.created_at)

    def _claim(self, key: tuple[str, int], at: float) -> None:
        self._claims[key] = at
        self._claims.move_to_end(key)
        while len(self._claims) > KEEP_CLAIMS:
            self._claims.popitem(last=False)

    def _model(
        self,
        before: RunState | None,
        after: RunState,
        data: ModelResponded | ModelRequestFailed,
        at: float,
    ) -> Iterator[Observation]:
        started = self._claims.pop((after.run_id, data.turn), None)
        if started is None and before is not None and before.model_attempts == 1:
            started = before.model_first_attempt_at
        if isinstance(data, ModelResponded):
            model, outcome = data.model, "ok"
            for kind, field_name in TOKEN_KINDS:
                yield "model_call_tokens", (model, kind), float(getattr(data.usage, field_name))
        else:
            model, outcome = after.spec.model.model_id, data.kind
        if started is not None:
            yield "model_call_seconds", (model, outcome), max(0.0, at - started)


def _lock_wait(
    before: RunState | None, after: RunState, call_id: str, at: float
) -> Iterator[Observation]:
    was = find_call(before, call_id)
    if was is None:
        return
    queued = was.waited_at if was.status is CallStatus.WAITING else None
    yield "lock_wait_seconds", (was.name,), max(0.0, at - queued) if queued is not None else 0.0


def _tool_run(
    before: RunState | None, after: RunState, call_id: str, outcome: str, at: float
) -> Iterator[Observation]:
    call = find_call(after, call_id) or find_call(before, call_id)
    if call is not None and call.started_at is not None:
        yield "tool_call_seconds", (call.name, outcome), max(0.0, at - call.started_at)


def find_call(state: RunState | None, call_id: str) -> Call | None:
    """The call in the run's current turn, or else in a past one (newest first)."""
    if state is None:
        return None
    if (call := state.call(call_id)) is not None:
        return call
    for turn in reversed(state.turns):
        if (call := turn.call(call_id)) is not None:
            return call
    return None

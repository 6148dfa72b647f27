"""Properties of the fold over generated logs. Logs are grown step by step: most
steps are decisions a worker could take (so logs get deep), some are random
events with plausible fields, and a few envelopes get a wrong seq or run id.
The fold is total: every log folds into a state or is refused with
IllegalTransition or BrokenLog at its first illegal entry — never anything else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runlog import PROPERTY, T0, assert_every_tool_use_is_answered_in_order, envelope
from strategies import SPEC, decision, random_events

from events.conversation import messages
from events.dispatch import due_commands
from events.errors import BrokenLog, IllegalTransition
from events.fold import apply, fold
from events.state import RunState
from events.status import RunStatus
from events.tool_step import expire_claims
from events.types import Event, ModelRequested, RunCreated
from schemas.envelope import Envelope

TICKS = (0.0, 1.0, 30.0, 100.0)
MAX_STEPS = 80


@dataclass
class Grown:
    envelopes: list[Envelope[Any]] = field(default_factory=list)
    state: RunState | None = None
    refused: Envelope[Any] | None = None
    error: Exception | None = None
    chaos: int = 0


def wrapped(data: st.DataObject, event: Event, seq: int, chaos: int) -> Envelope[Any]:
    slip = "ok"
    if chaos and data.draw(st.integers(0, 99), label="slip?") < chaos:
        slip = data.draw(st.sampled_from(["gap", "repeat", "other run"]), label="slip")
    if slip == "gap":
        return envelope(event, seq=seq + 1)
    if slip == "repeat" and seq > 1:
        return envelope(event, seq=seq - 1)
    if slip == "other run":
        return envelope(event, seq=seq, run_id="run-2")
    return envelope(event, seq=seq)


def grow(data: st.DataObject) -> Grown:
    """A log of decisions with, at a drawn level of chaos, random events and slips."""
    g, now = Grown(), T0
    chaos = g.chaos = data.draw(st.sampled_from([0, 0, 1, 3, 8]), label="chaos %")
    for _ in range(MAX_STEPS):
        ended = g.state is not None and not g.state.status.live
        if ended and not chaos:
            break  # no decision moves an ended or escalated run
        dice = data.draw(st.integers(0, 99), label="dice")
        if dice == 99:
            break
        if ended or dice < chaos:
            events = [data.draw(random_events)]
        elif g.state is None:
            events = [RunCreated(spec=SPEC)]
        else:
            now += TICKS[dice % len(TICKS)]  # the dice sets the clock too: fewer draws
            events = decision(data, g.state, now)(g.state)
        for event in events:
            env = wrapped(data, event, len(g.envelopes) + 1, chaos)
            try:
                g.state = apply(g.state, env)
            except (IllegalTransition, BrokenLog) as err:
                g.refused, g.error = env, err
                return g
            g.envelopes.append(env)
    return g


@PROPERTY
@given(st.data())
def test_any_log_folds_or_is_refused_at_its_first_illegal_entry(data: st.DataObject) -> None:
    g = grow(data)
    if g.state is not None:
        assert isinstance(g.state.status, RunStatus)
        assert g.state.seq == len(g.envelopes)
    assert fold(g.envelopes) == g.state
    if g.refused is None:
        return
    assert g.chaos, f"a decision made an illegal move: {g.error}"
    assert g.error is not None
    if isinstance(g.error, IllegalTransition):
        assert (g.error.run_id, g.error.event_type) == (g.refused.run_id, g.refused.type)
    else:
        assert g.error.seq == g.refused.seq
    later = envelope(RunCreated(spec=SPEC), seq=g.refused.seq + 1)
    with pytest.raises(type(g.error)) as again:
        fold([*g.envelopes, g.refused, later])
    assert str(again.value) == str(g.error)


@settings(PROPERTY, max_examples=100)
@given(st.data())
def test_folding_a_prefix_then_the_rest_equals_folding_the_whole(data: st.DataObject) -> None:
    log = grow(data).envelopes
    k = data.draw(st.integers(0, len(log)), label="k")
    whole, split = fold(log), fold(log[k:], fold(log[:k]))
    if whole is None:
        assert split is None
        return
    assert split is not None
    assert (split.status, split.seq, split.turns_used) == (
        whole.status,
        whole.seq,
        whole.turns_used,
    )
    assert split == whole


@settings(PROPERTY, max_examples=100)
@given(st.data())
def test_a_run_driven_by_its_decisions_never_moves_illegally_repeats_itself_or_gets_stuck(
    data: st.DataObject,
) -> None:
    envelopes = [envelope(RunCreated(spec=SPEC), seq=1)]
    state, now = fold(envelopes), T0
    assert state is not None
    for _ in range(MAX_STEPS):
        dice = data.draw(st.integers(0, 99), label="dice")
        if not state.status.live or dice == 99:
            break
        now += TICKS[dice % len(TICKS)]
        decide = decision(data, state, now)
        events = decide(state)
        for event in events:
            envelopes.append(envelope(event, seq=len(envelopes) + 1))
            state = apply(state, envelopes[-1])
        assert decide(state) == [], "a decision repeated after its events must be a no-op"
        if any(isinstance(e, ModelRequested) for e in events):
            assert_every_tool_use_is_answered_in_order(messages(state))
        if state.status.live:
            later = now + 10_000
            assert due_commands(state, now=later) or expire_claims(state, now=later)
    assert fold(envelopes) == state

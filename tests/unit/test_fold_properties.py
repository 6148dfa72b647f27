"""Properties of the fold over generated logs. Logs are grown step by step: most
steps are decisions a worker, the sweeper or a person could take, appended
with the follow-ups `agentledger.services.handlers.engine.Engine.take` adds in the same batch
(`agentledger.events.settle`), so logs get deep; some are random events with plausible
fields, and a few envelopes get a wrong seq or run id. The fold is total:
every log folds into a state or is refused with IllegalTransition or
BrokenLog at its first illegal entry — never anything else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runlog import (
    PROPERTY,
    T0,
    assert_every_tool_use_is_answered_in_order,
    assert_roles_alternate,
    envelope,
)
from strategies import SPEC, decision, random_events

from agentledger.events.conversation import messages
from agentledger.events.dispatch import due_commands
from agentledger.events.errors import BrokenLog, IllegalTransition
from agentledger.events.fold import apply, fold
from agentledger.events.settle import settle
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.types import Event, ModelRequested, RunCreated
from agentledger.schemas.envelope import Envelope

TICKS = (0.0, 1.0, 30.0, 100.0)
MAX_STEPS = 80
STOP = 50  # a dice value that ends a log early (not an end of the range: hypothesis favours those)


@dataclass
class Grown:
    envelopes: list[Envelope[Any]] = field(default_factory=list)
    state: RunState | None = None
    refused: Envelope[Any] | None = None
    error: Exception | None = None
    chaos: int = 0

    def add(self, env: Envelope[Any]) -> bool:
        """Fold one envelope; False (and the refusal kept) when the fold refuses it."""
        try:
            new = apply(self.state, env)
        except (IllegalTransition, BrokenLog) as err:
            self.refused, self.error = env, err
            return False
        self.state = new
        self.envelopes.append(env)
        return True


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
        done = g.state is not None and g.state.over
        if done and not chaos:
            break  # no decision moves an ended run with nothing running
        dice = data.draw(st.integers(0, 99), label="dice")
        if dice == STOP:
            break
        by_hand = done or dice < chaos
        if by_hand:
            events = [data.draw(random_events)]
        elif g.state is None:
            events = [RunCreated(spec=SPEC)]
        else:
            now += TICKS[dice % len(TICKS)]  # the dice sets the clock too: fewer draws
            events = decision(data, g.state, now)(g.state)
        for event in events:
            if not g.add(wrapped(data, event, len(g.envelopes) + 1, chaos)):
                return g
        if events and not by_hand and g.state is not None:
            for event in settle(g.state):
                if not g.add(wrapped(data, event, len(g.envelopes) + 1, chaos)):
                    return g
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


def step(envelopes: list[Envelope[Any]], state: RunState, events: list[Event]) -> RunState:
    """Append a batch as Engine.take does: the events, then the follow-ups they make due."""
    if not events:
        return state
    for batch in (events, "follow-ups"):
        for event in batch if isinstance(batch, list) else settle(state):
            envelopes.append(envelope(event, seq=len(envelopes) + 1))
            state = apply(state, envelopes[-1])
    return state


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
        if state.over or dice == STOP:
            break
        now += TICKS[dice % len(TICKS)]
        decide = decision(data, state, now)
        events = decide(state)
        state = step(envelopes, state, events)
        assert decide(state) == [], "a decision repeated after its events must be a no-op"
        if any(isinstance(e, ModelRequested) for e in events):
            assert_roles_alternate(messages(state))
            assert_every_tool_use_is_answered_in_order(messages(state))
        if state.status.watched:
            later = now + 10_000
            assert due_commands(state, now=later) or on_tick(state, now=later)
    assert fold(envelopes) == state

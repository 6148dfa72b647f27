"""What a delivery does, top to bottom (`go_on`): take the step its command asks
for (a model call's claim, a call's drive, the run's acceptance), do the side
effect that step claimed, take the step that records its outcome — composed
(`engine.Then`) with the step due next when this process serves its pool
(`App.carrying`, `agentledger.events.dispatch.carried_command`), so that step is decided
into the same append as the outcome before it — and do what *it* claimed, on
the same thread. A run goes claim → side effect → outcome and next claim → …
with no message between and no reload: pinned to the worker that drives it,
whose held state each append's expected seq checks.

A delivery carries on for at most `Carrying.for_s` seconds; then what is due
goes through its queue, behind the other runs. It never carries a run of
another task queue or tool set, nor anything once its process is stopping. A
worker that dies while it carries leaves a claim that runs out, as any dead
worker does: the sweeper re-drives the run. Each step's log lines carry its run,
its pool and (a tool call's) its call id, whichever message the delivery began with.

A carrying thread hands its turn on (`agentledger.services.handlers.turns`, the
rule in `agentledger.events.carrying`): after a tool call's outcome, the run's
next model request claimed in the same append, it parks the run in hand when
another waits and carries the first run in hand instead, or gives its slot to a
message that waits; a run whose model request finds the model pool full is
claimed all the same and parked for a thread of that pool. Round-robin, with no
message and no append of its own.

Each pool has its own thread budget (`agentledger.services.adapters.broker.budgets`): a
delivery carries a step of another pool on only by moving its slot to that
pool, when it has one free (else the step goes through its queue), so a pool's
steps never run on more threads than its budget. The acceptance of a run whose
checks run code is its tenant's: a tenant holding all but one of the pool's
slots already is not given another (`handle_run_acceptance` lets the message
go; the sweeper sends it again after a lease), so another tenant always finds
one."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agentledger.events.acceptance_step import may_take_long
from agentledger.events.commands import DriveCall, Pool, RequestModel, RunAcceptance
from agentledger.events.dispatch import carried_command
from agentledger.events.state import RunState
from agentledger.services.adapters.broker.budgets import current_slot
from agentledger.services.errors import UnknownRun
from agentledger.services.handlers.accept import AcceptClaim, AcceptHeld, check
from agentledger.services.handlers.app import App
from agentledger.services.handlers.call import CallClaim, CallHeld, run
from agentledger.services.handlers.engine import Decided, Next, Then
from agentledger.services.handlers.model import ModelClaim, ModelHeld, answer
from agentledger.services.handlers.turns import PARKED_POOLS, Turns
from agentledger.services.structured_logs import scope

Claim = ModelClaim | CallClaim | AcceptClaim
Held = ModelHeld | CallHeld | AcceptHeld


def handle_request_model(app: App, run_id: str) -> None:
    state = app.runs.current(run_id)
    if state is not None and not _takes(app, Pool.MODEL, state):
        return  # its tenant holds its share of the pool: the sweeper sends it again after a lease
    go_on(app, run_id, ModelClaim(app))


def handle_run_acceptance(app: App, run_id: str) -> None:
    state = app.runs.current(run_id)
    if state is not None and not _takes(app, Pool.ACCEPT, state):
        return  # its tenant holds its share of the pool: the sweeper sends it again after a lease
    go_on(app, run_id, AcceptClaim(app))


def handle_drive_call(app: App, run_id: str, call_id: str) -> None:
    state = app.runs.current(run_id)
    if state is None:
        raise UnknownRun(run_id)
    if not app.serves(state):
        return
    # A claim that lands while its reply is lost is known only here (nobody else will
    # run it): sent again across an outage, the store recognises it as landed.
    go_on(app, run_id, CallClaim(app, call_id), held=state, outage_s=app.settings.outcome_retry_s)


def go_on(
    app: App, run_id: str, claim: Claim, *, held: RunState | None = None, outage_s: float = 0.0
) -> None:
    """Take `claim`'s step; do what it claimed; record the outcome with the next step
    carried on when that step is ours; do what that one claimed, and so on — handing
    the turn on to the runs that wait (`agentledger.services.handlers.turns`)."""
    carry = carrier(app, since=app.clock.now())
    taken = app.engine.take(run_id, claim, held=held, outage_s=outage_s)
    holding = claim.held(taken.appended)
    mine = _in_hand(app, run_id, taken.state, holding, carry) if holding is not None else None
    if app.carrying is None or mine is None and not app.carrying.turns.in_hand():
        while mine is not None:
            mine = _step(app, mine)
        return
    carrying = app.carrying
    with carrying.turns.carrier() as me:
        if mine is None:  # this delivery's step was done already: a run in hand gets it
            mine = me.next_run(stopping=carrying.stopping.is_set())
        began = app.clock.now()
        while mine is not None:
            after = _step(app, mine)
            stopping = carrying.stopping.is_set()
            if after is None:
                mine = me.next_run(stopping=stopping)
            else:
                carried_s = app.clock.now() - began
                mine = me.next_turn(after, carried_s=carried_s, stopping=stopping)
            if mine is not after:
                began = app.clock.now()


@dataclass(frozen=True, slots=True)
class InHand:
    """A run a thread carries (or has parked): the claim of its next step is held."""

    run_id: str
    state: RunState
    holding: Held
    carry: Next | None
    lease_s: float = math.inf  # a model claim's, as it was made (runs in hand: `turns`)

    @property
    def pool(self) -> str:
        match self.holding:
            case ModelHeld():
                return str(Pool.MODEL)
            case CallHeld():
                return str(Pool.TOOLS)
            case AcceptHeld():
                return str(Pool.ACCEPT)


def _step(app: App, mine: InHand) -> InHand | None:
    """Do what `mine` claimed; record its outcome with the next step carried on; the
    run with that step's claim held, or None when nothing was carried on."""
    with _scope(mine.run_id, mine.holding):
        outcome = _do(app, mine.state, mine.holding)
        if outcome is None:
            return None  # recorded already, and nothing carried on after it
        step = Then(outcome, mine.carry) if mine.carry is not None else outcome
        taken = app.engine.take(
            mine.run_id, step, held=mine.state, outage_s=app.settings.outcome_retry_s
        )  # the state of our own claim: no reload
    carried = taken.carried
    holding = carried.held(taken.appended) if isinstance(carried, Claim) else None
    if holding is None:
        return None
    return _in_hand(app, mine.run_id, taken.state, holding, mine.carry)


def _in_hand(app: App, run_id: str, state: RunState, holding: Held, carry: Next | None) -> InHand:
    if isinstance(holding, ModelHeld):
        lease_s = holding.claimed.deadline_at - app.clock.now()
        return InHand(run_id, state, holding, carry, lease_s)
    return InHand(run_id, state, holding, carry)


def _do(app: App, state: RunState, holding: Held) -> Decided | None:
    """The side effect a claim of ours is for; the step that records its outcome."""
    match holding:
        case ModelHeld():
            return answer(app, state, holding)
        case CallHeld():
            return run(app, state, holding)
        case AcceptHeld():
            return check(app, state, holding)


@contextmanager
def _scope(run_id: str, holding: Held) -> Iterator[None]:
    """Each step's log lines carry its run, its pool and (a tool call's) its call id."""
    match holding:
        case ModelHeld():
            with scope(run_id, None, Pool.MODEL):
                yield
        case CallHeld():
            with scope(run_id, holding.started.call_id, Pool.TOOLS):
                yield
        case AcceptHeld():
            with scope(run_id, None, Pool.ACCEPT):
                yield


def carrier(app: App, *, since: float) -> Next | None:
    """The step a delivery that began at `since` carries on after a batch, named on
    the state the batch leads to. A call's step is the same object for the same call
    throughout the delivery, so a batch planned again after a conflict does not ask
    the lock table again for what it asked already."""
    carrying = app.carrying
    if carrying is None:
        return None
    until = since + carrying.for_s
    calls: dict[str, CallClaim] = {}

    def then(s: RunState) -> Claim | None:
        if carrying.stopping.is_set() or app.clock.now() >= until:
            return None
        if s.queue != carrying.queue or not app.serves(s):
            return None
        command = carried_command(s, now=app.clock.now(), pools=carrying.pools)
        if command is None:
            return None
        if not _takes(app, command.pool, s) and not _parks(app, command, carrying.turns):
            return None
        match command:
            case RequestModel():
                return ModelClaim(app)
            case DriveCall(call_id=call_id):
                return calls.setdefault(call_id, CallClaim(app, call_id))
            case RunAcceptance():
                return AcceptClaim(app)

    return then


def _parks(app: App, command: RequestModel | DriveCall | RunAcceptance, turns: Turns[Any]) -> bool:
    """Whether a step this delivery cannot take now (its pool is full) is claimed all
    the same and the run parked in hand for a thread of that pool (no message, no
    append of its own): a model request's, whose claim may wait (a lease; asking
    again is safe), never a tool call's (its claim's deadline counts from the claim);
    only while the runs in hand have room (`agentledger.events.carrying`), and never
    in a pool the operator shares between tenants (a tenant past its share waits for
    a message, not in another tenant's hand)."""
    pool = str(command.pool)
    parked = isinstance(command, RequestModel) and pool in PARKED_POOLS
    shared = pool in app.settings.tenant_share.split(",")
    return parked and not shared and current_slot() is not None and turns.room()


def _takes(app: App, pool: Pool, s: RunState) -> bool:
    """Whether this delivery may take `s`'s step of `pool`: it holds (or moves its
    slot to) a slot of that pool — named for the run's tenant in the pools the
    operator shares between tenants (`AGENTLEDGER_TENANT_SHARE`; an acceptance only
    when its checks run code). Outside a worker's delivery (no slot), yes."""
    slot = current_slot()
    if slot is None:
        return True
    shared = str(pool) in app.settings.tenant_share.split(",")
    named = shared and (pool is not Pool.ACCEPT or may_take_long(s.spec))
    return slot.move(str(pool), tenant=s.spec.principal.tenant if named else None)

"""Which commands are due for a run, from its folded state alone.

The writer dispatches: the handler that appends a step sends, in the same
round trip, the commands its batch made due (`new_commands`: due after it and
not before). The sweeper re-sends everything due for a run that made no
progress within its lease (`due_commands(..., redrive=True)`, which also asks
again for the locks a waiting call is queued for). Both are safe to repeat:
every handler re-checks the folded run before acting.

A writer that serves the pool of a step its batch made due may carry that step
on itself (`carried_command`): its decision joins the same append (the model
call's claim after a turn's last outcome; validation and a call's claim after a
reply), so it is due no more and nothing is queued for it; the writer then does
it on the same thread. What it does not carry is queued as usual."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import assert_never

from agentledger.events.acceptance_step import acceptance_due
from agentledger.events.claims import Window
from agentledger.events.commands import (
    Command,
    DriveCall,
    DriveFlow,
    Pool,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    StopChild,
)
from agentledger.events.delegate import waits_on_children
from agentledger.events.flow_step import child_live
from agentledger.events.lock_step import lock_asks
from agentledger.events.model_step import model_request_due
from agentledger.events.resolution_step import needs_resolution
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import runnable
from agentledger.events.validation_step import undecided


def due_commands(
    s: RunState, *, now: float, redrive: bool = False, unreachable: Sequence[Window] = ()
) -> list[Command]:
    """`unreachable`: the windows in which the caller (the sweeper) could not reach
    Redis, which do not count against a claim (`agentledger.events.claims`)."""
    if (flows := _of_flows(s)) is not None:
        return flows
    match s.status:
        case RunStatus.REQUESTING_MODEL:
            if model_request_due(s, now=now, unreachable=unreachable):
                return [RequestModel(s.run_id)]
        case RunStatus.VALIDATING:
            first = undecided(s)[:1]  # one step validates every undecided call of the turn
            return [DriveCall(s.run_id, call_id) for call_id in first]
        case RunStatus.RUNNING_TOOLS:
            return _running_tools(s, now=now, redrive=redrive, unreachable=unreachable)
        case RunStatus.ACCEPTING:
            if acceptance_due(s, now=now, unreachable=unreachable):
                return [RunAcceptance(s.run_id)]
        case (
            RunStatus.HELD | RunStatus.AWAITING_APPROVAL | RunStatus.AWAITING_HUMAN
            | RunStatus.CANCELLING | RunStatus.FLOWING
            | RunStatus.COMPLETED | RunStatus.FAILED | RunStatus.BUDGET_EXHAUSTED
            | RunStatus.TIMEOUT | RunStatus.CANCELLED
        ):  # fmt: skip
            pass  # a person, its running calls' outcomes or nothing moves it: no command
        case unplaced:
            assert_never(unplaced)
    return []


def _of_flows(s: RunState) -> list[Command] | None:
    """A flow's run moves on by `DriveFlow`: its stage to start or its child to follow
    (`flowing`); `StopChild`: its live child to cancel (the flow is cancelling, or
    ended while the child ran: timed out, failed by an operator). None: not a flow's."""
    if s.status is RunStatus.FLOWING:
        return [DriveFlow(s.run_id)]
    stopping = s.status is RunStatus.CANCELLING or s.status.terminal
    if stopping and (child_live(s) or waits_on_children(s)):
        return [StopChild(s.run_id)]  # a flow cancelled, or ended by its clock or an operator
    return None


def _parent_told(before: RunState | None, after: RunState) -> list[Command]:
    """A flow's child that ended, or began or stopped waiting for a person, tells its
    parent (which records its end, or waits with it: `flow_step.surfaced`)."""
    if after.parent_run_id is None:
        return []

    def mark(s: RunState | None) -> tuple[bool, bool]:
        return (s.status.waiting, s.status.terminal) if s is not None else (False, False)

    return [DriveFlow(after.parent_run_id)] if mark(before) != mark(after) else []


def new_commands(before: RunState | None, after: RunState, *, now: float) -> list[Command]:
    """What the batch that led from `before` to `after` made due."""
    was = set(due_commands(before, now=now)) if before is not None else set()
    made = [c for c in due_commands(after, now=now) if c not in was]
    return made + _parent_told(before, after)


def carried_command(
    s: RunState, *, now: float, pools: Collection[Pool]
) -> RequestModel | DriveCall | RunAcceptance | None:
    """The step due now that a writer serving `pools` takes on itself, in its own
    append: the first due model request, call drive or acceptance (a resolution,
    rare and slow, always goes through its pool's queue)."""
    for command in due_commands(s, now=now):
        if isinstance(command, RequestModel | DriveCall | RunAcceptance) and command.pool in pools:
            return command
    return None


def _running_tools(
    s: RunState, *, now: float, redrive: bool, unreachable: Sequence[Window]
) -> list[Command]:
    calls = s.current_turn.calls if s.current_turn else ()
    asks = lock_asks(s)[:1]  # one step asks for every lock the turn needs, in order
    out: list[Command] = [DriveCall(s.run_id, a.call_id) for a in asks]
    out += [DriveCall(s.run_id, c.call_id) for c in runnable(s)]
    if redrive:  # a grant may have been made while nobody was told
        out += [DriveCall(s.run_id, c.call_id) for c in calls if c.status is CallStatus.WAITING]
    out += [
        ResolveCall(s.run_id, c.call_id)
        for c in calls
        if needs_resolution(c, now=now, unreachable=unreachable)
    ]
    return out

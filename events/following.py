"""When a reader following a run stops: the one stop rule every follower (`tail
--follow`, `run` and `run --attach`, `replay --rerun`, the web view's stream)
names, as data. Pure: a rule and the state folded so far."""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus


class Until(StrEnum):
    """What a follower waits for."""

    OVER = "over"  # ended with no call still running: nothing more will be appended (tail)
    # ended, or escalated to a person (run, attach: they say how to go on) — but not while a
    # tool's question (MCP elicitation) waits: its call runs on in this process for the answer
    SETTLED = "settled"
    ASKS_A_PERSON = "asks_a_person"  # ended, or waiting for any person (a rerun: nobody answers)
    NEVER = "never"  # only the follower's own stop (the web view's stream)


def reached(until: Until, state: RunState | None) -> bool:
    """Whether a follower under `until` stops at `state` (None: no run yet)."""
    if state is None:
        return False
    match until:
        case Until.OVER:
            return state.over
        case Until.SETTLED:
            waits = state.status is RunStatus.AWAITING_HUMAN
            # a tool's question is answered to the call that asked, which runs in the follower's
            # process: it follows on while that call runs
            asked_by_a_call = state.escalated_for == "tool_question" and bool(state.in_flight)
            return state.status.terminal or (waits and not asked_by_a_call)
        case Until.ASKS_A_PERSON:
            return state.status.terminal or state.status.waiting
        case Until.NEVER:
            return False
        case _:
            assert_never(until)

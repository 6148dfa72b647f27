"""What a model reply's stop reason asks of the run, its one home. Every stop
reason the API sends has its meaning here; the fold (`agentledger.events.fold`: where the
reply moves the run) and the model step (`agentledger.events.model_step`: what follows the
reply in its batch) both read it, so a new stop reason is handled in one place,
and mypy fails until it is:

    tool_use                      -> validate and run the calls
    end_turn, stop_sequence       -> acceptance (never straight to completed)
    max_tokens                    -> calls in the reply are recorded and never run;
                                     go on (policies.on_max_tokens=continue) or fail
    pause_turn                    -> ask again with the reply as it is (a server tool's
                                     loop paused: the provider goes on from it)
    refusal                       -> the fallback model the spec names (once), else a
                                     human (policies.on_refusal=escalate), else fail; the
                                     refused turn stays in the log and leaves the view
    model_context_window_exceeded -> fail

A reply that asks for tools is validated whatever its stop reason (every
tool_use is answered, run or not)."""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from agentledger.events.status import RunStatus
from agentledger.events.types import StopReason


class AfterStop(StrEnum):
    RUN_CALLS = "run_calls"
    ACCEPT = "accept"
    CUT_OFF = "cut_off"
    ASK_AGAIN = "ask_again"
    REFUSED = "refused"
    FAIL = "fail"


def after_stop(stop_reason: StopReason) -> AfterStop:
    match stop_reason:
        case "tool_use":
            return AfterStop.RUN_CALLS
        case "end_turn" | "stop_sequence":
            return AfterStop.ACCEPT
        case "max_tokens":
            return AfterStop.CUT_OFF
        case "pause_turn":
            return AfterStop.ASK_AGAIN
        case "refusal":
            return AfterStop.REFUSED
        case "model_context_window_exceeded":
            return AfterStop.FAIL
        case _:
            assert_never(stop_reason)


def status_after_reply(stop_reason: StopReason, *, asks_for_tools: bool) -> RunStatus:
    """Where a reply moves a run that was requesting the model: validating when it
    asks for tools, accepting when the model ended its turn, else requesting the
    model again (paused or cut off; a refusal or a stop the run does not go on from
    is moved on by the events the model step appends with the reply)."""
    if asks_for_tools:
        return RunStatus.VALIDATING
    if after_stop(stop_reason) is AfterStop.ACCEPT:
        return RunStatus.ACCEPTING
    return RunStatus.REQUESTING_MODEL

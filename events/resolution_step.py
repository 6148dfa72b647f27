"""Resolving an unknown write through the tool's `lookup(op_key)`: confirmed
done (the result is recorded and the model told), confirmed not done (it may
run again with the same key), or still unknown (a human decides; nothing is
retried blindly)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, assert_never

from agentledger.events.claims import Window, expired
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    Event,
    RunEscalated,
    ToolCallConfirmedNotDone,
    ToolCallSucceeded,
)

Finding = Literal["done", "not_done", "unknown"]


def needs_resolution(c: Call, *, now: float, unreachable: Sequence[Window] = ()) -> bool:
    """A resolvable write whose outcome is unknown, once its claim has expired
    (`agentledger.events.claims`): asked earlier, a write still under way could be taken for
    not done."""
    unknown = c.status is CallStatus.OUTCOME_UNKNOWN and not c.read_only and c.resolvable
    return unknown and expired(
        c.claim_deadline, now=now, claimed_at=c.started_at, unreachable=unreachable
    )


def resolve_unknown(
    s: RunState, call_id: str, *, finding: Finding, output: Any = None, now: float, detail: str = ""
) -> list[Event]:
    call = s.call(call_id)
    if (
        s.status is not RunStatus.RUNNING_TOOLS
        or call is None
        or not needs_resolution(call, now=now)
    ):
        return []
    match finding:
        case "done":
            started = call.started_at or now
            return [
                ToolCallSucceeded(
                    call_id=call_id,
                    output=output,
                    started_at=started,
                    finished_at=now,
                    resolved_by="lookup",
                )
            ]
        case "not_done":
            return [ToolCallConfirmedNotDone(call_id=call_id, op_key=call.op_key or "")]
        case "unknown":
            why = f"outcome of write {call.name}({call_id}) unknown and lookup could not tell"
            return [
                RunEscalated(reason="outcome_unknown", detail=f"{why}: {detail}" if detail else why)
            ]
        case _:
            assert_never(finding)

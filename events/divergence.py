"""Where a re-run departs from the run it replays. Each event is reduced to what
must repeat — its type, turn, call id, tool name and input, stop reason, the
code of an error, the result of a check, how the run ended — leaving out ids,
times, attempts, claims and lock bookkeeping, which differ between any two runs.
The first position where the reduced logs differ is the divergence. Calls that
ran at the same time end in whatever order their threads finished: their
outcomes, one after the other in a log, are compared as a set (sorted)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.schemas.envelope import Envelope

# claims, leases and locks: how often they happen depends on timing, not on the run;
# and a model request that failed (a re-run plays the recorded replies: it never fails)
SKIPPED = frozenset(
    {
        "RunCreated",
        "ModelRequested",
        "ModelRequestFailed",
        "ToolCallStarted",
        "AcceptanceStarted",
        "ToolCallWaiting",
        "ToolCallBackedOff",
        "ToolCallScheduled",
        "ToolCallLeaseExpired",
    }
)
KEPT = ("turn", "call_id", "name", "input", "stop_reason", "read_only", "index", "check", "passed")
# how a call ended: the order of consecutive ones is the scheduler's, not the run's
OUTCOMES = frozenset(
    {
        "ToolCallSucceeded",
        "ToolCallFailed",
        "ToolCallOutcomeUnknown",
        "ToolCallConfirmedNotDone",
        "ToolCallCancelled",
        "ToolCallForceTerminated",
    }
)
KEPT_BY_TYPE = {
    "RunFailed": ("reason",),
    "RunEscalated": ("reason",),
    "RunBudgetExhausted": ("budget",),
}


@dataclass(frozen=True, slots=True)
class Divergence:
    position: int  # among the compared events
    recorded_seq: int | None  # None: the recorded log has no more compared events
    rerun_seq: int | None
    recorded: str | None
    rerun: str | None


def essence(env: Envelope[Any]) -> str | None:
    """What of this event must repeat, as text; None for an event not compared."""
    if env.type in SKIPPED:
        return None
    data = env.data.model_dump(mode="json")
    kept = {k: data[k] for k in (*KEPT, *KEPT_BY_TYPE.get(env.type, ())) if k in data}
    if isinstance(data.get("error"), dict):
        kept["error"] = data["error"].get("code")
    return f"{env.type} {json.dumps(kept, sort_keys=True, ensure_ascii=False)}"


def first_divergence(
    recorded: Sequence[Envelope[Any]], rerun: Sequence[Envelope[Any]]
) -> Divergence | None:
    a = _in_order(recorded)
    b = _in_order(rerun)
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else (None, None)
        right = b[i] if i < len(b) else (None, None)
        if left[1] != right[1]:
            return Divergence(i, left[0], right[0], left[1], right[1])
    return None


def _in_order(log: Sequence[Envelope[Any]]) -> list[tuple[int, str]]:
    """The compared events' (seq, essence), each run of consecutive call outcomes sorted."""
    out: list[tuple[int, str]] = []
    block: list[tuple[int, str]] = []
    for env in log:
        e = essence(env)
        if e is None:
            continue
        if env.type in OUTCOMES:
            block.append((env.seq, e))
            continue
        out += sorted(block, key=lambda pair: pair[1])
        block = []
        out.append((env.seq, e))
    return out + sorted(block, key=lambda pair: pair[1])

"""Where a re-run departs from the run it replays. Each event is reduced to what
must repeat — its type, turn, call id, tool name and input, stop reason, the
code of an error, the result of a check, how the run ended — leaving out ids,
times, attempts, claims and lock bookkeeping, which differ between any two runs.
The first position where the reduced logs differ is the divergence."""

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
        "ToolCallScheduled",
        "ToolCallLeaseExpired",
    }
)
KEPT = ("turn", "call_id", "name", "input", "stop_reason", "read_only", "index", "check", "passed")
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
    a = [(env.seq, e) for env in recorded if (e := essence(env)) is not None]
    b = [(env.seq, e) for env in rerun if (e := essence(env)) is not None]
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else (None, None)
        right = b[i] if i < len(b) else (None, None)
        if left[1] != right[1]:
            return Divergence(i, left[0], right[0], left[1], right[1])
    return None

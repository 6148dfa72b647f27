"""Which message read ahead a process's next free thread takes: round-robin across
tenants, and within a tenant across its runs, each run's own messages in arrival
order — the turn `agentledger.events.lock_turns` gives the lock table's waiters,
here over the messages one pool's consumer has read and not yet started. So a
tenant whose many runs fill a pool (slow model turns) holds another tenant's one
message behind at most the steps already running, not behind its whole backlog.

`Turn` is what the consumer remembers between choices: how many messages it has
handed out (`count`) and, per tenant and run with something read ahead, the count
at its last hand-out (`served`, names `t:<tenant>` and `r:<run>`, as the lock
table keeps them). Unlike the lock table it keeps a name after its last message
is handed out — a tenant whose read-ahead ran dry for a moment keeps its place
behind the tenants served less recently — but at most `REMEMBERED` names, the
most recently served beyond those still waiting. A message without a tenant (sent
by an older release) is tenant ``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.events.lock_turns import Waiter, granted_to, turns

REMEMBERED = 1024  # names kept beyond those with a message waiting


@dataclass(frozen=True)
class Turn:
    count: int = 0  # messages handed out so far
    served: Mapping[str, int] = field(default_factory=dict)


def next_up(waiting: Sequence[Waiter], turn: Turn) -> int | None:
    """The index in `waiting` (arrival order) of the message the next free thread
    takes; None when nothing waits."""
    if not waiting:
        return None
    first = turns(waiting, turn.served)[0]
    return next(i for i, w in enumerate(waiting) if w.id == first)


def handed(waiting: Sequence[Waiter], index: int, turn: Turn) -> Turn:
    """The turn once `waiting[index]` is handed to a thread (it leaves `waiting`)."""
    count = turn.count + 1
    served = granted_to(waiting[index], turn.served, count)
    if len(served) <= REMEMBERED:
        return Turn(count, served)
    left = {f"t:{w.tenant}" for w in waiting} | {f"r:{w.run}" for w in waiting}
    recent = sorted((n for n in served if n not in left), key=lambda n: -served[n])
    keep = left | set(recent[: REMEMBERED // 2])  # half: trimmed once in a while, not each time
    return Turn(count, {n: v for n, v in served.items() if n in keep})

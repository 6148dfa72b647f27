"""The read-only retry rule, its one home. A claim with no result is never
assumed not to have happened, but a read has no effect to lose: a read-only
call whose outcome is unknown (its claim ran out, its worker died, its answer
was lost) is claimed again, MAX_READ_ATTEMPTS tries in all, asking again for its
locks first if it needs any; the unknown outcome of its last try fails it — but a
`delegate` call's: each try finds its child run again (never a second), so it is
tried for as long as its child lives, and the child's end is always recorded with
its spend in the parent (a claim runs out every 600 s while a long child goes on). A
write is never tried again here: its lookup, a late outcome or a person says
what happened (`agentledger.events.resolution_step`).

Read by `tool_step` (which calls may be claimed, what an unknown outcome leads
to) and `lock_step` (which calls ask for their locks again)."""

from __future__ import annotations

from agentledger.events.delegate_name import DELEGATE
from agentledger.events.state import Call
from agentledger.events.status import CallStatus

MAX_READ_ATTEMPTS = 3


def tries_left(call: Call) -> bool:
    """A read-only call that has not used its tries: an unknown outcome of its
    latest attempt leaves it to be tried again (a write: never)."""
    return call.read_only and (call.attempts < MAX_READ_ATTEMPTS or call.name == DELEGATE)


def retried(call: Call) -> bool:
    """An unknown read with tries left: it may be claimed, and ask for its locks, again."""
    return call.status is CallStatus.OUTCOME_UNKNOWN and tries_left(call)

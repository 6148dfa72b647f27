"""Fair carrying: when a thread that carries a run on hands its turn to another.

A worker thread carries a run from step to step with no message between
(`agentledger.services.handlers.carry`). Left alone it would keep it for the
whole carrying slice, and every other run waiting for a thread would wait that
long. So after a tool call's outcome (appended with the run's next model
request claimed) a carrying thread asks `after_step`: once it has carried this
run for the shared slice, and another run waits — one in hand in this process
(its model request claimed already, parked) or a message waiting for a slot of
this pool — it parks its run at the back of the process's runs in hand (no
message, no append) and takes the one at the front (`SWAP`), or, for a message,
gives its slot back so the message starts (`LEAVE`, only while another thread
carries: it will take the parked run). Round-robin: every run in hand gets a
turn in order, so a turn's latency follows the work, not the slice.

A thread whose run has nothing more to carry asks `after_run`: it takes the
next run in hand, unless a message waits for its slot and another carrying
thread is still there to take the runs in hand (`LEAVE`). The last carrying
thread never leaves runs in hand behind: nothing else would take them (their
claims are this worker's). A delivery past `MAX_DELIVERY_S` takes no other run
while another thread carries. While the first run in hand has waited
`MAX_LEASE_SHARE` of its claim's lease, no run joins them (a thread does not leave for a message,
and a model request finding its pool full goes through its queue): their claims'
leases run while they wait."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# a delivery stops taking other runs after this long: a message's time limit (an hour)
# would stop its thread wherever it is, between a side effect and its outcome
MAX_DELIVERY_S = 60.0
# runs in hand hold claims whose leases run (the scripted model's is its longest delay + 1 s,
# Claude's minutes): while the first has waited this share of its lease, no run joins them
# — more go through their queues, unclaimed
MAX_LEASE_SHARE = 0.5


class Turn(StrEnum):
    GO_ON = "go_on"  # keep carrying this run
    SWAP = "swap"  # park this run; carry the first run in hand
    LEAVE = "leave"  # park this run (if any); give the slot back to a waiting message
    TAKE = "take"  # this thread's run is done: carry the first run in hand
    DONE = "done"  # nothing in hand: the delivery ends


@dataclass(frozen=True, slots=True)
class Waiting:
    """What waits besides the run a thread holds: runs in hand in this process,
    messages read and waiting for a slot of the thread's pool, and the other threads
    carrying runs (the thread itself not counted)."""

    in_hand: int
    messages: int
    other_carriers: int
    oldest_share: float = 0.0  # the share of its claim's lease the first run in hand waited

    def __post_init__(self) -> None:
        if min(self.in_hand, self.messages, self.other_carriers, self.oldest_share) < 0:
            raise ValueError(f"a negative count of what waits: {self!r}")

    @property
    def room(self) -> bool:
        """Whether another run may join the runs in hand (`MAX_LEASE_SHARE`)."""
        return self.oldest_share < MAX_LEASE_SHARE


def after_step(
    *, carried_s: float, shared_s: float, waiting: Waiting, stopping: bool, old: bool = False
) -> Turn:
    """After a step of a run this thread has carried for `carried_s` seconds: go on,
    or hand the turn on (round-robin once the shared slice `shared_s` is used). An
    `old` delivery (past `MAX_DELIVERY_S`) takes no other run: it finishes its own."""
    if stopping or old or carried_s < shared_s:
        return Turn.GO_ON  # a stopping process parks nothing: it finishes what it holds
    if waiting.messages and waiting.other_carriers and waiting.room:
        return Turn.LEAVE  # another carrying thread is left to take the runs in hand
    if waiting.in_hand:
        return Turn.SWAP
    return Turn.GO_ON


def after_run(*, waiting: Waiting, stopping: bool = False, old: bool = False) -> Turn:
    """After this thread's run has nothing more to carry: take a run in hand, or end
    the delivery (never leaving runs in hand with no thread to take them; a stopping
    process takes no new message, so its threads take every run in hand). An `old`
    delivery leaves the runs in hand to the other carrying threads, if any."""
    if waiting.in_hand == 0:
        return Turn.DONE
    if (waiting.messages or old) and waiting.other_carriers and not stopping:
        return Turn.LEAVE
    return Turn.TAKE

"""The runs in hand of one process, and the threads that carry them: fair carrying
(the rule: `agentledger.events.carrying`).

A run in hand has the claim of its next step in the log already (this worker's),
its side effect not done yet; it is parked here by a carrying thread that handed
its turn on, and taken — first in, first out — by the next carrying thread that
hands its turn on or whose own run is done. Parking costs no message and no
append: the run's next step was decided into the append of its last outcome, as
when it is carried on at once. A thread taking a run moves its slot to that run's
pool first (`agentledger.services.adapters.broker.budgets`), or leaves it for
another thread. Only model and tool steps are parked; an acceptance is carried
to its end by the thread that claimed it (its slot may be named for its tenant).

The count of carrying threads and the runs in hand change together, under one
lock, so the last carrying thread never leaves runs in hand behind. A process that
dies with runs in hand leaves their claims to run out, as any dead worker does
(the sweeper re-drives them); a stopping one parks nothing and its carrying
threads take the runs in hand before their deliveries end."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

from agentledger.events.carrying import MAX_DELIVERY_S, Turn, Waiting, after_run, after_step
from agentledger.services.adapters.broker.budgets import Slot, current_slot

PARKED_POOLS = frozenset({"model"})


class InPool(Protocol):
    @property
    def pool(self) -> str: ...

    @property
    def lease_s(self) -> float: ...  # how long its claim held when it was made


T = TypeVar("T", bound=InPool)


def no_messages(pool: str) -> int:
    return 0


class Turns(Generic[T]):
    """`shared_s`: how long a thread carries one run before handing its turn on to a
    run that waits; `messages(pool)`: how many messages wait for a slot of `pool`."""

    def __init__(self, *, shared_s: float, messages: Callable[[str], int] = no_messages):
        self.shared_s = shared_s
        self._messages = messages
        self._lock = threading.Lock()
        self._in_hand: deque[tuple[float, T]] = deque()  # (when parked, the run)
        self._carriers = 0

    def room(self) -> bool:
        """Whether another run may join the runs in hand (`Waiting.room`)."""
        with self._lock:
            return Waiting(len(self._in_hand), 0, 0, self._oldest_share()).room

    def _oldest_share(self) -> float:
        """The share of its claim's lease the first run in hand has spent waiting."""
        if not self._in_hand:
            return 0.0
        parked_at, run = self._in_hand[0]
        if run.lease_s <= 0:
            return math.inf  # claimed with no lease left
        return (time.monotonic() - parked_at) / run.lease_s

    def _park(self, run: T) -> None:
        self._in_hand.append((time.monotonic(), run))

    def fresh(self) -> Turns[T]:
        """Turns of the same settings and no run in hand (a new tool set's)."""
        return Turns(shared_s=self.shared_s, messages=self._messages)

    def in_hand(self) -> int:
        with self._lock:
            return len(self._in_hand)

    def carriers(self) -> int:
        with self._lock:
            return self._carriers

    @contextmanager
    def carrier(self) -> Iterator[Carrier[T]]:
        """This thread carries runs while inside (and may take the runs in hand)."""
        with self._lock:
            self._carriers += 1
        me = Carrier(self, current_slot())
        try:
            yield me
        finally:
            if not me.left:
                with self._lock:
                    self._carriers -= 1


class Carrier(Generic[T]):
    """One carrying thread's handle: what it carries next, decided under the lock."""

    def __init__(self, turns: Turns[T], slot: Slot | None):
        self._t = turns
        self._slot = slot
        self.left = False
        self._began = time.monotonic()  # this delivery's, not a clock of the run's

    def next_turn(self, mine: T, *, carried_s: float, stopping: bool) -> T | None:
        """After a step of `mine` (carried `carried_s` so far): `mine` again, another
        run in hand (`mine` parked), or None (`mine` parked; this thread leaves)."""
        if mine.pool not in PARKED_POOLS:
            return mine
        t = self._t
        with t._lock:
            if self._slot is not None and not self._slot.move(mine.pool):
                t._park(mine)  # its pool is full: a thread of that pool takes it
                other = self._take()
                if other is None:
                    self._leave()
                return other
            waiting = self._waiting()
            turn = after_step(
                carried_s=carried_s, shared_s=t.shared_s, waiting=waiting, stopping=stopping,
                old=self._old(),
            )  # fmt: skip
            if turn is Turn.LEAVE:
                t._park(mine)
                self._leave()
                return None
            other = self._take() if turn is Turn.SWAP else None
            if other is None:
                return mine
            t._park(mine)
            return other

    def next_run(self, *, stopping: bool) -> T | None:
        """This thread's run is done: the run in hand it takes, or None (it leaves)."""
        t = self._t
        with t._lock:
            turn = after_run(waiting=self._waiting(), stopping=stopping, old=self._old())
            other = self._take() if turn is Turn.TAKE else None
            if other is None:
                self._leave()
            return other

    def _old(self) -> bool:
        return time.monotonic() - self._began >= MAX_DELIVERY_S

    def _waiting(self) -> Waiting:
        t = self._t
        pool = self._slot.pool if self._slot is not None else None
        messages = t._messages(pool) if pool is not None else 0
        return Waiting(len(t._in_hand), messages, t._carriers - 1, t._oldest_share())

    def _take(self) -> T | None:
        """The first run in hand whose pool this thread's slot can move to."""
        t = self._t
        for i, (_, run) in enumerate(t._in_hand):
            if self._slot is None or self._slot.move(run.pool):
                del t._in_hand[i]
                return run
        return None

    def _leave(self) -> None:
        self._t._carriers -= 1
        self.left = True

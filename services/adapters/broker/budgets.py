"""Thread budgets: how many deliveries of each pool one process runs at once.

A process's worker threads are shared, but each pool has a budget of its own
(`thread_budgets`: the operator's per-pool settings, else a split of
`worker_threads`), and the threads are the sum of the budgets. A pool's
consumer takes a message only with a slot of its pool's budget (`Budgets.take`);
the delivery holds that `Slot` until its message is acked. A delivery that
carries its run on into another pool's step moves its slot there first
(`Slot.move`), giving the old one back, or does not carry on (the step goes
through its queue). So a pool never runs more than its budget, whichever pool
its steps came in through: the acceptance or tools pool's slow steps never take
the model pool's threads, and every slot taken has a thread to run on.

Within a pool a slot may be named for a tenant (`Slot.name`, `Slot.move(...,
tenant=...)`: the acceptance of a run whose checks run code). A tenant holds at
most all but one of a pool's slots, so another tenant's run always finds one:
one tenant's slow checks hold another's for no time at all while a single
tenant is slow, and for at most one check's duration when several are.

A pool may also have a spare slot (`spares`; its thread is added to the
process's): only its consumer takes it, and only for a message of a tenant with
nothing of that pool running, when every other slot is taken — so a lone tenant
keeps the whole budget, and another tenant's first step starts at once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from contextvars import ContextVar

# the pools in the order a split of worker_threads serves them (model gets an odd one)
POOLS = ("model", "tools", "accept")
ACCEPT_SHARE = 4  # the acceptance pool's share of worker_threads: a quarter


def thread_budgets(
    total: int, pools: Iterable[str], given: Mapping[str, int | None]
) -> dict[str, int]:
    """Each pool's threads: the ones `given` (the operator's settings), then the rest
    of `total` split among the others — a quarter to accept, the rest evenly to
    model and tools — and at least one each."""
    served = [p for p in POOLS if p in set(pools)]
    out = {p: int(n) for p in served if (n := given.get(p))}
    rest = [p for p in served if p not in out]
    left = max(0, total - sum(out.values()))
    if "accept" in rest and len(rest) > 1:
        out["accept"] = max(1, left // ACCEPT_SHARE)
        left = max(0, left - out["accept"])
        rest.remove("accept")
    for i, pool in enumerate(rest):
        out[pool] = max(1, left // len(rest) + (1 if i < left % len(rest) else 0))
    return {p: out[p] for p in served}


class _Pool:
    def __init__(self, size: int, spare: int = 0):
        self.size = size
        self.spare = spare  # slots beyond `size`, for a tenant with nothing running here
        self.taken = 0
        self.tenants: Counter[str] = Counter()
        self.wakers: list[threading.Event] = []
        self.waiting = 0  # messages read and waiting for a slot (their consumer says)

    @property
    def share(self) -> int:
        """The most slots one tenant may hold: all but one (all, in a pool of one)."""
        return max(1, self.size - 1)


class Budgets:
    """The slots of every pool of one process, behind one lock. `process_wide`: these
    are the process's budgets (a consumer's own, of its prefetch, are not: a
    delivery holding one of those carries on unbounded, as before budgets)."""

    def __init__(
        self,
        sizes: Mapping[str, int],
        *,
        process_wide: bool = True,
        spares: Mapping[str, int] | None = None,
    ):
        self.process_wide = process_wide
        self._lock = threading.Lock()
        spare = spares or {}
        self._pools = {name: _Pool(size, spare.get(name, 0)) for name, size in sizes.items()}

    def size(self, pool: str) -> int:
        return self._pools[pool].size

    def spare(self, pool: str) -> int:
        """Slots beyond `pool`'s budget, for a tenant with nothing running in it."""
        return self._pools[pool].spare

    def take_spare(self, pool: str) -> Slot | None:
        """A spare slot of `pool` (its consumer asks for one only for a tenant with
        nothing running there), or None when every one is taken."""
        with self._lock:
            p = self._pools[pool]
            if p.taken >= p.size + p.spare:
                return None
            p.taken += 1
        return Slot(self, pool)

    def free(self, pool: str) -> int:
        with self._lock:
            p = self._pools[pool]
            return max(0, p.size - p.taken)

    def take(self, pool: str) -> Slot | None:
        """A slot of `pool`, or None when every one is taken."""
        with self._lock:
            p = self._pools[pool]
            if p.taken >= p.size:
                return None
            p.taken += 1
        return Slot(self, pool)

    def on_free(self, pool: str, wake: threading.Event) -> None:
        """Set `wake` whenever a slot of `pool` is given back."""
        with self._lock:
            self._pools[pool].wakers.append(wake)

    def forget(self, pool: str, wake: threading.Event) -> None:
        """Stop setting `wake` (its consumer closed)."""
        with self._lock:
            wakers = self._pools[pool].wakers
            if wake in wakers:
                wakers.remove(wake)

    def wait(self, pool: str, messages: int) -> None:
        """`pool`'s consumer holds `messages` read and waiting for a slot."""
        with self._lock:
            self._pools[pool].waiting = messages

    def waiting(self, pool: str) -> int:
        """Messages read and waiting for a slot of `pool`: a carrying thread of that
        pool hands its turn on to them (`agentledger.services.handlers.turns`)."""
        with self._lock:
            p = self._pools.get(pool)
            return p.waiting if p is not None else 0

    def serves(self, pool: str) -> bool:
        return pool in self._pools

    # --- what a Slot does, under the lock ------------------------------------------

    def _move(self, slot: Slot, to: str, tenant: str | None) -> bool:
        if slot.pool == to and slot.tenant == tenant and to is not None:
            return True  # already there: only its delivery's thread moves a slot
        with self._lock:
            if slot.pool is None or to not in self._pools:
                return False
            old, new = self._pools[slot.pool], self._pools[to]
            same = old is new
            if not same and new.taken >= new.size:
                return False
            if tenant is not None:
                held = new.tenants[tenant] - (1 if same and slot.tenant == tenant else 0)
                if held >= new.share:
                    return False
            _unname(old, slot.tenant)
            if not same:
                old.taken -= 1
                new.taken += 1
            if tenant is not None:
                new.tenants[tenant] += 1
            slot.pool, slot.tenant = to, tenant
            freed = [] if same else list(old.wakers)
        for wake in freed:
            wake.set()
        return True

    def _release(self, slot: Slot) -> None:
        with self._lock:
            if slot.pool is None:
                return
            p = self._pools[slot.pool]
            p.taken -= 1
            _unname(p, slot.tenant)
            slot.pool, slot.tenant = None, None
            wakers = list(p.wakers)
        for wake in wakers:
            wake.set()


def _unname(pool: _Pool, tenant: str | None) -> None:
    if tenant is not None:
        pool.tenants[tenant] -= 1
        if pool.tenants[tenant] <= 0:
            del pool.tenants[tenant]


class Slot:
    """One delivery's place in a pool's budget (`pool` None once given back)."""

    def __init__(self, budgets: Budgets, pool: str):
        self._budgets = budgets
        self.process_wide = budgets.process_wide
        self.pool: str | None = pool
        self.tenant: str | None = None

    def move(self, pool: str, *, tenant: str | None = None) -> bool:
        """Hold a slot of `pool` (named for `tenant`, if given) instead of this one;
        False, holding this one still, when `pool` has none free (for that tenant)."""
        return self._budgets._move(self, pool, tenant)

    def name(self, tenant: str) -> bool:
        """Count this slot as `tenant`'s; False when the tenant holds its share already."""
        assert self.pool is not None, "a slot given back has no pool"
        return self._budgets._move(self, self.pool, tenant)

    def release(self) -> None:
        self._budgets._release(self)


# the slot of the delivery this thread runs (set around each message by `SlotContext`)
CURRENT: ContextVar[Slot | None] = ContextVar("agentledger_slot", default=None)


def current_slot() -> Slot | None:
    """The slot of the delivery this thread runs; None outside a worker's delivery."""
    return CURRENT.get()

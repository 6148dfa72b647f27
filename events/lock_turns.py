"""Whose turn it is among the lock table's waiters: round-robin across tenants, and
within a tenant across its runs, each run's own requests in arrival order, so one
tenant's burst of waiting calls cannot hold another tenant's one behind it.

The k-th waiting request of each tenant comes before the (k+1)-th of any; among the
k-th ones, the tenant served longest ago (or never) goes first, then the one that
began waiting first. A tenant's k-th is its runs' requests taken round-robin, the
run served longest ago first. "Served" is the table's grant count at the tenant's
(run's) last grant (`served`, names `t:<tenant>` and `r:<run>`); a name with nothing
waiting is forgotten at the next pass (so the table keeps no name for ever, and a
run that comes back waits as a new one). Requests without a tenant and run (``)
are one queue: arrival order. `locks.lua` does the same; the differential test
compares them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class Waiter(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def run(self) -> str: ...

    @property
    def tenant(self) -> str: ...


def turns(waiting: Sequence[Waiter], served: Mapping[str, int]) -> list[str]:
    """The ids of `waiting` (in arrival order) in their turn."""
    runs: dict[str, dict[str, list[str]]] = {}  # tenant -> run -> its waiting requests
    for r in waiting:
        runs.setdefault(r.tenant, {}).setdefault(r.run, []).append(r.id)
    tenants = sorted(runs, key=lambda tn: served.get(f"t:{tn}", 0))  # stable: first waiting
    out: list[tuple[int, int, str]] = []
    for rank, tenant in enumerate(tenants):
        by_run = runs[tenant]
        queues = [by_run[run] for run in sorted(by_run, key=lambda rn: served.get(f"r:{rn}", 0))]
        k = 0
        for depth in range(max(len(q) for q in queues)):
            for q in queues:
                if depth < len(q):
                    out.append((k, rank, q[depth]))
                    k += 1
    return [rid for _, _, rid in sorted(out)]


def remembered(waiting: Sequence[Waiter], served: Mapping[str, int]) -> dict[str, int]:
    """`served` without the names that have nothing waiting."""
    names = {f"t:{r.tenant}" for r in waiting} | {f"r:{r.run}" for r in waiting}
    return {k: v for k, v in served.items() if k in names}


def granted_to(r: Waiter, served: Mapping[str, int], count: int) -> dict[str, int]:
    """`served` once `r` is granted as the table's `count`-th grant."""
    return {**served, f"t:{r.tenant}": count, f"r:{r.run}": count}

"""The nonces the intake has seen, each kept for a while (twice the replay window):
one key per publisher's nonce, set only if absent, its name a digest (never the
nonce itself), so a signed message seen once is refused as replayed when it
comes again. The key holds when it was first seen and the inbox entry that
carried it: the same entry handed to an intake again (its first intake died
before acknowledging it) is not a replay of itself.

`RedisNonces` keeps them in Redis (every intake of a deployment shares them);
`MemoryNonces` in a dict, for tests. The window itself is decided in
`agentledger.events.grants.freshness_refusal`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import redis

from agentledger.services.keys import Keys


@dataclass(frozen=True, slots=True)
class NonceClaim:
    """One nonce to record as seen (`Nonces.claim`'s arguments)."""

    partition: int
    publisher: str
    nonce: str
    entry: str


class Nonces(Protocol):
    def claim(
        self, partition: int, publisher: str, nonce: str, *, entry: str, now: float, keep_s: float
    ) -> float | None:
        """Record the nonce as seen now by `entry`; None when it is new (or `entry`
        itself saw it), else when it was first seen."""
        ...

    def claim_many(
        self, claims: Sequence[NonceClaim], *, now: float, keep_s: float
    ) -> list[float | None]:
        """`claim` of each, in order (on Redis two round trips at most for them all):
        a nonce twice among them is new the first time only."""
        ...


def _seen_by_another(kept: str, entry: str) -> float | None:
    at, _, by = kept.partition(" ")
    if by == entry:
        return None
    try:
        return float(at)
    except ValueError:  # not a value this code wrote: seen, at an unknown time
        return 0.0


class RedisNonces:
    def __init__(self, client: redis.Redis, keys: Keys):
        self._r = client
        self._keys = keys

    def claim(
        self, partition: int, publisher: str, nonce: str, *, entry: str, now: float, keep_s: float
    ) -> float | None:
        key = self._keys.nonce(partition, publisher, nonce)
        keep_ms = max(1, int(keep_s * 1000))
        for _ in range(2):  # the second time only if it expired between the SET and the GET
            if self._r.set(key, f"{now:.6f} {entry}", nx=True, px=keep_ms):
                return None
            kept = cast(bytes | None, self._r.get(key))
            if kept is not None:
                return _seen_by_another(kept.decode(errors="replace"), entry)
        return now  # twice set by another in between: refused, to be safe

    def claim_many(
        self, claims: Sequence[NonceClaim], *, now: float, keep_s: float
    ) -> list[float | None]:
        """SET NX of every nonce pipelined, then GET of those set before, pipelined;
        one whose key expired in between is claimed alone as `claim` does."""
        if not claims:
            return []
        keep_ms = max(1, int(keep_s * 1000))
        keys = [self._keys.nonce(c.partition, c.publisher, c.nonce) for c in claims]
        with self._r.pipeline(transaction=False) as pipe:
            for key, c in zip(keys, claims, strict=True):
                pipe.set(key, f"{now:.6f} {c.entry}", nx=True, px=keep_ms)
            set_now: list[Any] = pipe.execute()
        taken = [i for i, ok in enumerate(set_now) if not ok]
        out: list[float | None] = [None] * len(claims)
        if not taken:
            return out
        with self._r.pipeline(transaction=False) as pipe:
            for i in taken:
                pipe.get(keys[i])
            kept: list[Any] = pipe.execute()
        for i, value in zip(taken, kept, strict=True):
            c = claims[i]
            out[i] = (
                _seen_by_another(value.decode(errors="replace"), c.entry)
                if value is not None
                else self.claim(
                    c.partition, c.publisher, c.nonce, entry=c.entry, now=now, keep_s=keep_s
                )
            )
        return out


class MemoryNonces:
    def __init__(self) -> None:
        self._seen: dict[tuple[int, str, str], tuple[str, float]] = {}  # -> (value, expires at)
        self._lock = threading.Lock()

    def claim(
        self, partition: int, publisher: str, nonce: str, *, entry: str, now: float, keep_s: float
    ) -> float | None:
        with self._lock:
            key = (partition, publisher, nonce)
            kept = self._seen.get(key)
            if kept is None or kept[1] <= now:
                self._seen[key] = (f"{now:.6f} {entry}", now + keep_s)
                return None
            return _seen_by_another(kept[0], entry)

    def claim_many(
        self, claims: Sequence[NonceClaim], *, now: float, keep_s: float
    ) -> list[float | None]:
        return [
            self.claim(c.partition, c.publisher, c.nonce, entry=c.entry, now=now, keep_s=keep_s)
            for c in claims
        ]

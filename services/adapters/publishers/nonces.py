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
from typing import Protocol, cast

import redis

from agentledger.services.keys import Keys


class Nonces(Protocol):
    def claim(
        self, partition: int, publisher: str, nonce: str, *, entry: str, now: float, keep_s: float
    ) -> float | None:
        """Record the nonce as seen now by `entry`; None when it is new (or `entry`
        itself saw it), else when it was first seen."""
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

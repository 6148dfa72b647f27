"""The unit tier's clock: it stands still until a test moves it, so leases, claim
deadlines and keep times pass exactly when the test says."""

from __future__ import annotations

from tests.contracts.envelopes import T0


class ManualClock:
    """A clock that stands still until `advance` moves it (the unit tier's clock)."""

    def __init__(self, start: float = T0):
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

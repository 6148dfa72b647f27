"""The idempotency ledger port: a write runs at most once per operation key. The
ledger says run, replay the stored result (same key, same request), refuse
(same key, different request), or wait (the same operation is pending: in
flight, or its outcome unknown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class Verdict:
    action: Literal["run", "replay", "conflict", "in_progress"]
    owner: str = ""
    result: Any = None
    since: float = 0.0


class Ledger(Protocol):
    def begin(self, op_key: str, request: str, owner: str, *, now: float) -> Verdict: ...

    def finish(self, op_key: str, request: str, owner: str, result: Any, *, now: float) -> None:
        """The write happened with this result (stored as given: redact it first)."""
        ...

    def abandon(self, op_key: str) -> None:
        """A write that surely did not happen: the key may be used again."""
        ...

"""What the chaos suite counts, from the event logs and the tools' own ground
truth: how each run ended, side effects done twice (duplicate) or claimed by
the log but never done (missing), runs never created (lost) or neither ended
nor waiting for a person (stuck), runs ever sent to a human and why, and how
long live runs waited for their next step after each fault (recovery)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from agentledger.events.fold import fold
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import RunEscalated
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.store.redis_store import RedisEventStore
from tests.chaos.kit import TRUTH, retrying


@dataclass
class RunRecord:
    run_id: str
    state: RunState | None
    events: list[Envelope[Any]]
    truth: Counter[str]  # op key -> real executions

    @property
    def escalations(self) -> list[str]:
        return [e.data.reason for e in self.events if isinstance(e.data, RunEscalated)]

    @property
    def escalation_details(self) -> list[str]:
        return [e.data.detail for e in self.events if isinstance(e.data, RunEscalated)]


def truth_of(workspace: Path) -> Counter[str]:
    path = workspace / TRUTH
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split(" ", 1)[0] for line in lines if line.strip())


def read_runs(
    client: redis.Redis, store: RedisEventStore, workspaces: dict[str, Path]
) -> list[RunRecord]:
    records = []
    for run_id, ws in workspaces.items():
        events = retrying(lambda r=run_id: store.read(r))  # type: ignore[misc]
        records.append(RunRecord(run_id, fold(events) if events else None, events, truth_of(ws)))
    return records


def settled(s: RunState | None) -> bool:
    return s is not None and (s.status.terminal or s.status is RunStatus.AWAITING_HUMAN)


def wait_settled(store: RedisEventStore, run_ids: Iterable[str], *, timeout_s: float) -> set[str]:
    """Poll until every run ended or waits for a person; the ids that did not."""
    waiting = set(run_ids)
    deadline = time.monotonic() + timeout_s
    while waiting:
        for run_id in list(waiting):
            events = retrying(lambda r=run_id: store.read(r))  # type: ignore[misc]
            if events and settled(fold(events)):
                waiting.discard(run_id)
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return waiting


@dataclass
class Figures:
    scenario: str
    runs: int = 0
    kills: int = 0
    created: int = 0
    lost: int = 0
    stuck: int = 0
    ended: Counter[str] = field(default_factory=Counter)
    to_human: Counter[str] = field(default_factory=Counter)  # runs ever escalated, by reason
    why_human: list[str] = field(default_factory=list)  # what each escalation said
    side_effects: int = 0
    duplicate: int = 0
    missing: int = 0
    recovery_s: list[float] = field(default_factory=list)
    slowest: list[str] = field(default_factory=list)  # per fault: the run that waited longest
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def count(self, records: list[RunRecord]) -> Figures:
        for r in records:
            s = r.state
            if s is None:
                self.lost += 1
                continue
            self.created += 1
            self.ended[str(s.status)] += 1
            if not settled(s):
                self.stuck += 1
            for reason in set(r.escalations):
                self.to_human[reason] += 1
            self.why_human += [f"{r.run_id}: {d}" for d in r.escalation_details]
            self.side_effects += sum(r.truth.values())
            self.duplicate += sum(n - 1 for n in r.truth.values() if n > 1)
            self.missing += sum(1 for op in done_writes(s) if r.truth[op] == 0)
        return self

    def recovery(self, records: list[RunRecord], faults: list[float]) -> Figures:
        """After each fault, the longest a run live at that moment waited for its next event."""
        for at in faults:
            waits = [(w, r) for r in records if (w := _wait_after(r.events, at)) is not None]
            if waits:
                wait, worst = max(waits, key=lambda x: x[0])
                self.recovery_s.append(wait)
                last = [e for e in worst.events if e.at <= at][-1]
                self.slowest.append(f"{wait:.2f}s {worst.run_id} after {last.type}")
        return self

    def expect(self, what: str, ok: bool) -> None:
        if not ok:
            self.failures.append(what)

    def zeros(self) -> None:
        for name in ("lost", "stuck", "duplicate", "missing"):
            self.expect(f"{name} = {getattr(self, name)}, expected 0", getattr(self, name) == 0)

    def as_dict(self) -> dict[str, Any]:
        rec = sorted(self.recovery_s)
        return {
            "scenario": self.scenario,
            "runs": self.runs,
            "kills": self.kills,
            "lost": self.lost,
            "stuck": self.stuck,
            "duplicate": self.duplicate,
            "missing": self.missing,
            "side_effects": self.side_effects,
            "ended": dict(self.ended),
            "to_human": dict(self.to_human),
            "why_human": self.why_human,
            "recovery_p50_s": round(statistics.median(rec), 2) if rec else None,
            "recovery_max_s": round(rec[-1], 2) if rec else None,
            "elapsed_s": round(self.elapsed_s, 1),
            **self.extra,
            "failures": self.failures,
        }


def done_writes(s: RunState) -> list[str]:
    """Operation keys of the writes the log says happened (run now, not replayed)."""
    return [
        c.op_key
        for t in s.turns
        for c in t.calls
        if not c.read_only and c.op_key and c.status is CallStatus.SUCCEEDED
    ]


NOT_PROGRESS = frozenset({"ToolCallLeaseExpired", "ToolCallWaiting"})  # a step of nobody's work


def _wait_after(events: list[Envelope[Any]], at: float) -> float | None:
    before = [e for e in events if e.at <= at]
    after = [e for e in events if e.at > at and e.type not in NOT_PROGRESS]
    if not before or not after:
        return None
    state = fold(before)
    if state is None or not state.status.live or state.status is RunStatus.AWAITING_HUMAN:
        return None
    return after[0].at - at

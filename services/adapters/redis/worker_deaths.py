"""Which workers holding a run's read-only calls are dead, proven, never guessed
(`agentledger.events.ticks` settles such a claim at once instead of at its deadline).

A worker is dead when both hold:
- it is silent: its heartbeat in the membership of the pool that claims tool
  calls (the run's task queue and tool set) is older than the member ttl, by
  Redis's clock, as the beats are, or gone (a silent member is removed). A
  live worker beats every quarter of the broker's claim idle time, so a live
  but slow worker is never silent;
- its process is gone from this host: its name (`host:pid:nonce`) names this
  host, this host has a /proc, and /proc holds no such pid, or only threads
  of it that have exited (a zombie). A stopped (SIGSTOPped) process is not
  gone: its claim waits for its deadline, as before.
A worker on another host is never proven dead here; nor is one whose pid a new
process has taken (it looks alive): their claims keep their deadlines."""

from __future__ import annotations

import socket
from pathlib import Path

import redis

from agentledger.events.commands import Pool
from agentledger.events.state import RunState
from agentledger.events.ticks import dead_claimants
from agentledger.services.adapters.redis.directory import group
from agentledger.services.keys import Keys

EXITED = frozenset({"Z", "X", "x"})  # zombie, dead: the thread has ended


class WorkerDeaths:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        member_ttl_s: float,
        host: str | None = None,
        proc: Path = Path("/proc"),
    ) -> None:
        self._r = client
        self._keys = keys
        self._ttl_ms = member_ttl_s * 1000
        self._host = host or socket.gethostname()
        self._proc = proc

    def __call__(self, s: RunState) -> frozenset[str]:
        """The dead among the workers holding the run's read-only calls in flight."""
        gone = [w for w in dead_claimants(s) if self.process_gone(w)]
        if not gone:
            return frozenset()  # the usual case: no Redis call
        key = self._keys.members(group(s.queue, s.toolset, Pool.TOOLS))
        now_s, now_us = self._r.time()
        now_ms = now_s * 1000 + now_us / 1000
        beats = [self._r.zscore(key, w) for w in gone]
        return frozenset(
            w for w, at in zip(gone, beats, strict=True) if at is None or at < now_ms - self._ttl_ms
        )

    def process_gone(self, worker: str) -> bool:
        """The worker's process is on this host and no thread of it is left."""
        host, pid, _nonce = (worker.rsplit(":", 2) + ["", ""])[:3]
        if host != self._host or not pid.isdigit() or not (self._proc / "self").exists():
            return False  # not ours to judge, or no /proc to judge by
        tasks = self._proc / pid / "task"
        try:
            states = [_state(t / "stat") for t in tasks.iterdir()]
        except FileNotFoundError:
            return True  # no such process
        except OSError:
            return False  # not ours to read: not proven
        return all(state is None or state in EXITED for state in states)


def _state(stat: Path) -> str | None:
    """A thread's state letter (`R`, `S`, `T`, `Z`…); None when it has just gone."""
    try:
        text = stat.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 1 :].split()  # the name in parentheses may hold anything
    return fields[0] if fields else None

"""A model reply's text while it streams, for the web view: the adapter tells the
handler each piece (`ModelRequest.watch`), a `Streamer` puts the text so far —
redacted as a whole by the run's redactor, its last unfinished word held back
so a secret cut in two is never shown in part — at most every `every_s`, and
the view reads it while the turn waits for its reply. Nothing of it is the
run's record: the log gets the whole reply (`ModelResponded`) as ever; the
text so far is one short-lived value per run (Redis: a string under the run's
shard, gone after TTL_S), and a Redis that fails to take it never fails the
model call."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis

from agentledger.services.keys import Keys

log = logging.getLogger(__name__)
TTL_S = 600.0  # the text so far outlives its request by at most this
EVERY_S = 0.25  # put at most this often while the text streams


@dataclass(frozen=True, slots=True)
class Said:
    turn: int
    attempt: int
    text: str


class LiveText(Protocol):
    def put(self, run_id: str, said: Said) -> None: ...

    def get(self, run_id: str) -> Said | None: ...


class MemoryLiveText:
    def __init__(self) -> None:
        self.said: dict[str, Said] = {}

    def put(self, run_id: str, said: Said) -> None:
        self.said[run_id] = said

    def get(self, run_id: str) -> Said | None:
        return self.said.get(run_id)


class RedisLiveText:
    def __init__(self, client: redis.Redis, keys: Keys, *, ttl_s: float = TTL_S) -> None:
        self._r, self._keys, self._ttl_ms = client, keys, int(ttl_s * 1000)

    def put(self, run_id: str, said: Said) -> None:
        value = json.dumps({"turn": said.turn, "attempt": said.attempt, "text": said.text})
        try:
            self._r.set(self._keys.live_text(run_id), value, px=self._ttl_ms)
        except redis.RedisError as exc:  # shown text is a courtesy: the reply goes on
            log.warning("the text so far of run %s was not stored: %s", run_id, exc)

    def get(self, run_id: str) -> Said | None:
        raw = self._r.get(self._keys.live_text(run_id))
        try:
            found = json.loads(raw) if raw is not None else None
            return (
                Said(int(found["turn"]), int(found["attempt"]), str(found["text"]))
                if found
                else None
            )
        except (ValueError, KeyError, TypeError):
            return None  # not ours: nothing to show


class Streamer:
    """A `ModelRequest.watch`: told each piece of a reply's text, it puts the text
    so far (`flush` puts what is left to show at the end)."""

    def __init__(
        self,
        sink: LiveText,
        run_id: str,
        turn: int,
        attempt: int,
        redact: Callable[[str], str],
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
    ) -> None:
        self._sink, self._run_id, self._turn, self._attempt = sink, run_id, turn, attempt
        self._redact, self._clock, self._every_s = redact, clock, every_s
        self._text, self._shown, self._put_at = "", "", -float("inf")

    def __call__(self, piece: str) -> None:
        self._text += piece
        if self._clock() - self._put_at >= self._every_s:
            self.flush(whole=False)

    def flush(self, *, whole: bool = True) -> None:
        """Put the text so far; without `whole`, up to its last space or line end."""
        cut = len(self._text) if whole else max(self._text.rfind(" "), self._text.rfind("\n")) + 1
        shown = self._redact(self._text[:cut])
        self._put_at = self._clock()
        if shown != self._shown:
            self._shown = shown
            self._sink.put(self._run_id, Said(self._turn, self._attempt, shown))

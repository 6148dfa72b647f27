"""Whether a deployment intake's publishers file is the deployment's: the sha256 of
the bytes it judges entries by against the digest recorded in the deployment's
meta (`agentledger.services.adapters.publishers.agreed`). While they differ the intake reads
nothing — entries stay pending, neither accepted nor rejected under a file the
deployment did not agree to — and says why (logs, readiness); it reads again
once they match (the file put back, or adopted by an operator). The record is
read again whenever the file changes and every `every_s` (an adoption elsewhere)."""

from __future__ import annotations

import logging
import time

import redis

from agentledger.services.adapters.publishers import agreed
from agentledger.services.keys import Keys

log = logging.getLogger(__name__)


class Agreement:
    def __init__(self, client: redis.Redis, keys: Keys, path: str, *, every_s: float):
        self._r = client
        self._keys = keys
        self.path = path
        self._every_s = every_s
        self._digest: str | None = None  # the file's, when the record was read last
        self._recorded: str | None = None
        self._next = 0.0  # time.monotonic()
        self.held: str | None = None  # why entries are left pending; None: they are read

    def check(self, digest: str) -> str | None:
        """None when `digest` (of the file as this intake reads it) is the recorded
        one; else why this intake leaves the inbox alone."""
        now = time.monotonic()
        if digest != self._digest or now >= self._next:
            self._recorded = agreed.recorded(self._r, self._keys) or agreed.record_first(
                self._r, self._keys, digest
            )
            self._digest, self._next = digest, now + self._every_s
        held = None if self._recorded == digest else mismatch(self.path, digest, self._recorded)
        if held != self.held:
            if held is not None:
                log.error("%s; inbox entries are left pending", held)
            else:
                log.warning(
                    "the publishers file %s is the deployment's again: reading the inbox", self.path
                )
        self.held = held
        return held


def mismatch(path: str, digest: str, recorded: str | None) -> str:
    """The one-line reason a file is not the deployment's, and how to adopt it."""
    return (
        f"the publishers file {path} (sha256 {digest}) is not the deployment's: it records "
        f"sha256 {recorded}; `agentledger publishers adopt` (with this file) makes it the "
        "deployment's"
    )

"""The sweepers' retention duty: every AGENTLEDGER_ARCHIVE_INTERVAL_S, a sweeper
archives the finished runs of the shards it owns that are past their retention
age (`agentledger.services.handlers.archiver`), a bounded number a pass so the
sweep of live runs is never held up for long."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agentledger.services.adapters.archive.archive import Archive
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.adapters.store.request_keys import RequestKeys
from agentledger.services.clock import Clock
from agentledger.services.handlers.archiver import PassReport, retention_pass
from agentledger.services.settings import Settings

log = logging.getLogger(__name__)
MOST_A_PASS = 200  # runs archived by one pass of one sweeper; the rest wait for the next


class RetentionDuty:
    def __init__(
        self,
        store: EventStore,
        archive: Archive,
        requests: RequestKeys,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._store, self._archive, self._requests = store, archive, requests
        self._settings, self._clock = settings, clock
        self._next = 0.0

    def maybe_run(self, shards: Sequence[int]) -> PassReport | None:
        """A pass over `shards` when one is due (None: not yet)."""
        now = self._clock.now()
        if now < self._next or not shards:
            return None
        self._next = now + self._settings.archive_interval_s
        report = retention_pass(
            self._store, self._archive, self._requests, self._settings.retention,
            now=now, shards=shards, most=MOST_A_PASS,
        )  # fmt: skip
        if report.archived or report.failed:
            log.info(
                "retention: %d runs archived to %s, %d left for the next pass, %d failed",
                len(report.archived), self._archive.url, len(report.left), len(report.failed),
            )  # fmt: skip
        return report

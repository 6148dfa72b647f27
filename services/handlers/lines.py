"""The shell of a tenant's cap of live runs on a task queue (`agentledger.events.run_caps`):
a new run's place asked of the line before its first append (`held_events`); a
run that ended taken out of its line and the held runs that go live released
(`Lines.left`: the step engine calls it after a save that ended a run); and a
line made right again from the runs' own logs (`Lines.reconcile`), which the
intake does each time it holds a run and the sweeper every LINES_EVERY_S for the
lines whose first held run is in a shard it owns: a process that died between a run's end
and telling its line leaves a count nobody frees, and one that died between
popping a held run and recording its release leaves a run held that counts as
live — both are put right here, each from what the log says."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agentledger.events.run_caps import Caps, belongs, cap_of, held_event, left_line
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event, RunCreated
from agentledger.services.adapters.run_caps.port import RunLines

log = logging.getLogger(__name__)
# append the release of a held run from the line of (queue, tenant): the engine's take
Release = Callable[[str, str, str], None]
Load = Callable[[str], RunState | None]


class Lines:
    def __init__(self, port: RunLines, caps: Caps) -> None:
        self.port = port
        self.caps = caps

    def held_events(self, created: RunCreated, run_id: str) -> list[Event]:
        """What a new run's creation records beside `RunCreated`: its place if held."""
        most = cap_of(self.caps, created.queue)
        if most is None:
            return []
        tenant = created.spec.principal.tenant  # the grant's principal: checked by the intake
        place = self.port.admit(created.queue, tenant, run_id, most)
        return held_event(tenant, created.queue, place, most)

    def left(self, before: RunState | None, after: RunState, released: Release) -> None:
        """After a save: if it ended the run, take it out of its line and release the
        held runs that take its place."""
        most = cap_of(self.caps, after.queue)
        if most is None or not left_line(before, after):
            return
        tenant = after.spec.principal.tenant
        for run_id in self.port.finish(after.queue, tenant, after.run_id, most):
            released(run_id, after.queue, tenant)

    def reconcile_held(
        self, load: Load, released: Release, *, mine: Callable[[str], bool], limit: int = 1000
    ) -> int:
        """The sweeper's pass: each line holding a run whose first held run is `mine`
        (a shard this process owns) is put right from the logs, so a count a dead
        process left is freed even when its tenant sends no new run."""
        fixed = 0
        for run_id in self.port.first_held(limit):
            s = load(run_id) if mine(run_id) else None
            if s is not None:
                fixed += self.reconcile(s.queue, s.spec.principal.tenant, load, released)
        return fixed

    def reconcile(self, queue: str, tenant: str, load: Load, released: Release) -> int:
        """Put the line right from the logs: a counted run that ended, or that is not
        this line's (a run id named in a request that was refused), is taken out; a
        counted run still recorded held is released. How many were put right."""
        most = cap_of(self.caps, queue)
        if most is None:
            return 0
        fixed = 0
        for run_id in sorted(self.port.look(queue, tenant).live):
            s = load(run_id)
            if s is None:
                continue  # maybe another intake's, its first append in flight
            if s.status.terminal or not belongs(s, queue=queue, tenant=tenant):
                fixed += 1
                for other in self.port.finish(queue, tenant, run_id, most):
                    released(other, queue, tenant)
            elif s.status is RunStatus.HELD:
                fixed += 1
                released(run_id, queue, tenant)
        if fixed:
            log.warning("tenant %r's line on queue %r: %d run(s) put right", tenant, queue, fixed)
        return fixed

"""Retention, decided: which finished runs are due to leave Redis for the cold
store, given when each ended, its tenant and the policy (an age for every
tenant, one tenant's own age where the operator set one). A run is due when
nothing more will be appended to it (`RunState.over`) and it ended at least its
tenant's age ago; a live run, or one waiting for a person, never is. Pure: the
time comes in as an argument."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_RETENTION_S = 7 * 86400.0
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def parse_duration(text: str) -> float:
    """`7d`, `12h`, `30m`, `45s`, `0` or a number of seconds; ValueError saying why not."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(f"{text!r} is not a duration (a number of seconds, or 30m, 12h, 7d, 2w)")
    seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too large a duration")
    return seconds


def parse_tenant_ages(text: str) -> tuple[tuple[str, float], ...]:
    """`tenant=age,tenant=age` (ages as `parse_duration` reads them), in order, each
    tenant once; ValueError naming the first entry that is not one."""
    ages: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        tenant, sep, age = (x.strip() for x in item.partition("="))
        if not sep or not _TENANT.fullmatch(tenant):
            raise ValueError(f"{item!r} is not tenant=age (e.g. acme=30d)")
        if tenant in ages:
            raise ValueError(f"tenant {tenant!r} is named twice")
        ages[tenant] = parse_duration(age)
    return tuple(ages.items())


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long a finished run stays in Redis: `default_s` for every tenant, and
    the tenants' own ages (`tenants`) where the operator set them."""

    default_s: float = DEFAULT_RETENTION_S
    tenants: Mapping[str, float] = field(default_factory=dict)

    def age_for(self, tenant: str | None) -> float:
        return self.tenants.get(tenant or "", self.default_s)

    def scan_before(self, now: float) -> float:
        """No run created after this can be due now (a run ends after it is created):
        where a pass over the runs index by creation time may stop."""
        return now - min([self.default_s, *self.tenants.values()])


@dataclass(frozen=True, slots=True)
class Finished:
    """What the policy needs of a run: whether it is over, when it last changed, whose it is."""

    run_id: str
    over: bool
    ended_at: float
    tenant: str | None


def due(policy: RetentionPolicy, run: Finished, *, now: float) -> bool:
    """Whether the run leaves Redis now: over, and ended at least its tenant's age ago."""
    return run.over and now - run.ended_at >= policy.age_for(run.tenant)


def due_runs(policy: RetentionPolicy, runs: list[Finished], *, now: float) -> list[str]:
    """The ids of the runs due now, in the order given."""
    return [run.run_id for run in runs if due(policy, run, now=now)]

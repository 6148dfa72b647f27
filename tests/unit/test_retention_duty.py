"""The sweepers' retention duty: a pass over the shards a sweeper owns once every
AGENTLEDGER_ARCHIVE_INTERVAL_S, none in between, none with no shards; and the
settings it reads are checked, a bad one named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger.services.adapters.archive.archive import Archive, open_cold_store
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.request_keys import MemoryRequestKeys
from agentledger.services.errors import ConfigError
from agentledger.services.loops.retention import RetentionDuty
from agentledger.services.settings import Settings, from_env
from tests.contracts.envelopes import T0, finished

DAY = 86400.0


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at


def _duty(tmp_path: Path, clock: Clock) -> tuple[RetentionDuty, MemoryEventStore]:
    store = MemoryEventStore(shard_of=lambda run_id: int(run_id[-1]))
    for run_id in ("old-0", "old-1"):
        store.append(run_id, finished(run_id), expected_seq=0, live=False)
    archive = Archive(open_cold_store(str(tmp_path / "a")), "al")
    settings = Settings(retention_s=7 * DAY, archive_interval_s=60.0)
    return RetentionDuty(store, archive, MemoryRequestKeys(), settings, clock), store


def test_a_pass_archives_the_owned_shards_runs_past_their_age_then_waits_an_interval(
    tmp_path: Path,
) -> None:
    clock = Clock(T0 + 8 * DAY)
    duty, store = _duty(tmp_path, clock)

    report = duty.maybe_run([0])

    assert report is not None and report.archived == ["old-0"]
    assert store.read("old-0") == [] and store.read("old-1") != []  # shard 1 is not owned
    clock.at += 59
    assert duty.maybe_run([1]) is None  # not yet
    clock.at += 1
    second = duty.maybe_run([1])
    assert second is not None and second.archived == ["old-1"]


def test_no_pass_for_a_sweeper_that_owns_no_shard(tmp_path: Path) -> None:
    duty, store = _duty(tmp_path, Clock(T0 + 8 * DAY))
    assert duty.maybe_run([]) is None
    assert store.read("old-0") != []


def test_nothing_is_archived_before_its_age(tmp_path: Path) -> None:
    duty, store = _duty(tmp_path, Clock(T0 + 6 * DAY))
    report = duty.maybe_run([0, 1])
    assert report is not None and report.due == []


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("AGENTLEDGER_RETENTION_S", "-1", "must not be negative"),
        ("AGENTLEDGER_RETENTION_S", "a week", "expected a number"),
        ("AGENTLEDGER_ARCHIVE_INTERVAL_S", "0", "must be more than 0"),
        ("AGENTLEDGER_RETENTION_TENANTS", "acme=forever", "is not a duration"),
    ],
)
def test_a_bad_retention_setting_is_refused_naming_its_variable(
    variable: str, value: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({variable: value})
    assert caught.value.name == variable and words in str(caught.value)


def test_the_retention_settings_read_as_a_policy() -> None:
    settings = from_env(
        {"AGENTLEDGER_RETENTION_S": "3600", "AGENTLEDGER_RETENTION_TENANTS": "a=1d"}
    )
    assert settings.retention.age_for("a") == DAY
    assert settings.retention.age_for("b") == 3600
    assert from_env({}).retention.age_for("b") == 7 * DAY
    assert from_env({"AGENTLEDGER_ARCHIVE_URL": "off"}).archive_url == "off"

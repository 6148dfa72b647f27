"""Which finished runs leave Redis: over, and ended at least their tenant's age ago."""

from __future__ import annotations

import pytest

from agentledger.events.retention import (
    Finished,
    RetentionPolicy,
    due,
    due_runs,
    parse_duration,
    parse_tenant_ages,
)

NOW = 1_000_000.0
POLICY = RetentionPolicy(7 * 86400.0, {"acme": 3600.0, "keep": 30 * 86400.0})


def test_a_finished_run_is_due_once_its_age_has_passed_and_not_before() -> None:
    assert due(POLICY, Finished("r", True, NOW - 7 * 86400, "other"), now=NOW)
    assert not due(POLICY, Finished("r", True, NOW - 7 * 86400 + 1, "other"), now=NOW)


def test_a_run_not_over_is_never_due_however_old() -> None:
    assert not due(POLICY, Finished("r", False, 0.0, "other"), now=NOW)


def test_a_tenant_with_its_own_age_keeps_its_runs_that_long() -> None:
    assert due(POLICY, Finished("r", True, NOW - 3600, "acme"), now=NOW)
    assert not due(POLICY, Finished("r", True, NOW - 8 * 86400, "keep"), now=NOW)
    assert due(POLICY, Finished("r", True, NOW - 8 * 86400, None), now=NOW)


def test_the_due_runs_keep_their_order() -> None:
    runs = [
        Finished("a", True, NOW - 9 * 86400, "x"),
        Finished("b", False, 0.0, "x"),
        Finished("c", True, NOW - 2 * 3600, "acme"),
    ]
    assert due_runs(POLICY, runs, now=NOW) == ["a", "c"]


def test_a_pass_looks_at_runs_created_before_the_youngest_age() -> None:
    assert POLICY.scan_before(NOW) == NOW - 3600
    assert RetentionPolicy(0.0).scan_before(NOW) == NOW


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("45", 45.0), ("30m", 1800.0), ("12h", 43200.0),
                          ("7d", 604800.0), ("2w", 1209600.0), ("1.5h", 5400.0)],
)  # fmt: skip
def test_durations_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-1", "7 days", "1e400", "d", "nan"])
def test_a_duration_that_is_not_one_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_tenant_ages_read_in_order_and_a_bad_entry_is_named() -> None:
    assert parse_tenant_ages("acme=1d, beta=30") == (("acme", 86400.0), ("beta", 30.0))
    with pytest.raises(ValueError, match="'acme' is not tenant=age"):
        parse_tenant_ages("acme")
    with pytest.raises(ValueError, match="named twice"):
        parse_tenant_ages("a=1,a=2")
    with pytest.raises(ValueError, match="not tenant=age"):
        parse_tenant_ages("../x=1d")

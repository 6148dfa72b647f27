"""The summary `status`, `runs` and the web view show of a run: a live run's
duration runs to now, not to its last event (a run waiting 5 s on a tool said
"0.0s so far"); an ended run's is to its end, whenever it is asked."""

from __future__ import annotations

from journeys import LATE_IDS, in_flight
from runlog import T0, Log, do_request

from agentledger.events.types import RunCancelled, RunCancelRequested
from agentledger.services.entrypoints.summary import run_summary


def test_a_live_runs_duration_runs_to_now() -> None:
    log = Log.created()
    log.now = T0 + 2
    do_request(log)
    assert log.s.status.live and log.s.updated_at == T0 + 2
    assert run_summary(log.s, now=T0 + 7.5)["duration_s"] == 7.5
    assert run_summary(log.s, now=T0 + 7.5)["ended_at"] is None


def test_a_live_run_never_runs_backwards_on_a_clock_behind_its_events() -> None:
    log = Log.created()
    log.now = T0 + 2
    do_request(log)
    assert run_summary(log.s, now=T0 + 1)["duration_s"] == 2.0  # to its last event at least


def test_an_ended_runs_duration_is_to_its_end() -> None:
    log = Log.created()
    log.append(RunCancelRequested(by="carol", source="cli"))
    log.now = T0 + 3
    log.append(RunCancelled(requested_at=log.now, by="carol", side_effects=(), detail="by hand"))
    assert log.s.status.terminal
    summary = run_summary(log.s, now=T0 + 100)
    assert summary["duration_s"] == 3.0 and summary["ended_at"] is not None


def test_a_run_is_over_once_ended_with_nothing_running() -> None:
    log = Log.created()
    do_request(log)
    assert not log.s.over  # live
    log.append(RunCancelRequested(by="carol", source="cli"))
    log.append(RunCancelled(requested_at=log.now, by="carol", side_effects=(), detail="by hand"))
    assert log.s.over


def test_an_ended_run_with_a_call_still_running_is_not_over() -> None:
    log = Log.created()
    in_flight(log, *LATE_IDS)  # started calls whose late outcomes may still come
    log.append(RunCancelRequested(by="carol", source="cli"))
    log.append(RunCancelled(requested_at=log.now, by="carol", side_effects=(), detail="by hand"))
    assert log.s.status.terminal and log.s.in_flight
    assert not log.s.over

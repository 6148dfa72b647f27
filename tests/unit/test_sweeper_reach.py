"""What the sweeper remembers of Redis being out of reach: each window runs from
its last good pass to its first good pass after (the most Redis can have been
down), an open window is reported up to now, and only the last few are kept."""

from __future__ import annotations

from agentledger.services.loops.sweeper import Reach


def test_a_window_runs_from_the_last_good_pass_to_the_first_good_one_after() -> None:
    reach = Reach()
    assert reach.windows(100.0) == []
    reach.reached(100.0)
    assert reach.lost(100.5) is True, "the first failed pass of an outage"
    assert reach.lost(101.0) is False, "the same outage"
    assert reach.windows(102.0) == [(100.0, 102.0)], "still out of reach: open up to now"
    reach.reached(103.5)
    assert reach.windows(110.0) == [(100.0, 103.5)]
    reach.reached(104.0)
    assert reach.windows(110.0) == [(100.0, 103.5)], "good passes add nothing"


def test_an_outage_from_the_start_counts_from_the_first_failed_pass() -> None:
    reach = Reach()
    reach.lost(50.0)
    reach.reached(53.0)
    assert reach.windows(60.0) == [(50.0, 53.0)]


def test_only_the_last_windows_are_kept() -> None:
    reach = Reach(keep=2)
    for t in (10.0, 20.0, 30.0):
        reach.reached(t)
        reach.lost(t + 1)
        reach.reached(t + 2)
    assert reach.windows(40.0) == [(20.0, 22.0), (30.0, 32.0)]

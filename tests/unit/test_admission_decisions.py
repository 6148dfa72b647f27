"""The intake's pure decisions on a batch of run requests (agentledger.events.admission)."""

from __future__ import annotations

from agentledger.events.admission import Claimed, claim_value, own_run, request_claim, turns


def test_a_free_request_id_names_the_new_run() -> None:
    assert request_claim(None, run_id="r-1", digest="d1", request_id="q") == Claimed("r-1")


def test_the_same_request_again_names_the_run_it_named_before() -> None:
    kept = claim_value("r-0", "d1")
    assert request_claim(kept, run_id="r-1", digest="d1", request_id="q") == Claimed("r-0")


def test_another_request_under_the_id_is_refused_as_replayed() -> None:
    kept = claim_value("r-0", "d2")
    claimed = request_claim(kept, run_id="r-1", digest="d1", request_id="q")
    assert claimed.run_id is None
    assert claimed.reason == (
        "replayed: request_id 'q' names run 'r-0' already, for another request"
    )


def test_a_value_this_code_never_wrote_is_another_request() -> None:
    for kept in ("", "r-0", "r-0 d1 extra", "garbage"):
        claimed = request_claim(kept, run_id="r-1", digest="d1", request_id="q")
        assert claimed.run_id is None and claimed.reason is not None, kept


def test_a_run_found_is_the_requests_own_only_for_its_publisher_and_request_id() -> None:
    assert own_run(("q", "alice"), request_id="q", publisher="alice")
    assert not own_run(("q", "bob"), request_id="q", publisher="alice")
    assert not own_run(("other", "alice"), request_id="q", publisher="alice")
    assert not own_run(None, request_id="q", publisher="alice")
    assert not own_run((None, "alice"), request_id=None, publisher="alice")  # no id: no claim


def test_requests_go_together_and_each_control_alone_in_order() -> None:
    assert turns([]) == []
    assert turns([False, False, False]) == [(0, 3)]
    assert turns([True]) == [(0, 1)]
    assert turns([False, True, False, False, True, True]) == [
        (0, 1), (1, 2), (2, 4), (4, 5), (5, 6),
    ]  # fmt: skip
    spans = turns([True, False, True, False])
    assert [i for a, b in spans for i in range(a, b)] == [0, 1, 2, 3]  # every entry, once

"""The intake's pure decisions on a batch of run requests (agentledger.events.admission)."""

from __future__ import annotations

from agentledger.events.admission import (
    Claimed,
    by_tenant,
    chunk_spans,
    claim_value,
    own_run,
    request_claim,
    turns,
    window_order,
)


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


def test_a_tenants_request_behind_anothers_backlog_comes_second() -> None:
    order = window_order([(False, "a")] * 50 + [(False, "b")])

    assert order[:3] == [0, 50, 1], "B's one request second"
    assert sorted(order) == list(range(51)), "each once"


def test_each_tenants_requests_keep_their_order_and_tenants_take_turns() -> None:
    assert by_tenant(["a", "a", "b", "c", "b", "a"]) == [0, 2, 3, 1, 4, 5]
    assert by_tenant([]) == []


def test_a_control_stays_where_it_stands_and_requests_take_turns_between_controls() -> None:
    entries = [(False, "a"), (False, "a"), (False, "b"), (True, ""), (False, "a"), (False, "b")]

    assert window_order(entries) == [0, 2, 1, 3, 4, 5]


def test_the_first_chunk_is_each_senders_first_request_then_chunks_of_the_size() -> None:
    assert chunk_spans(501, first=2, size=32)[:3] == [(0, 2), (2, 34), (34, 66)]
    assert chunk_spans(501, first=2, size=32)[-1] == (482, 501)
    assert chunk_spans(10, first=100, size=4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_spans(0, first=0, size=32) == []
    assert chunk_spans(20, first=2, size=32) == [(0, 20)], "a window of one chunk at once"

"""The event store contract: one suite that every adapter of the port passes —
the in-memory one in the unit tier, the Redis one (on a real redis-server) in
the integration tier: appends at an expected seq, reads, the run indexes, and
tails read after a folded state or a snapshot, checked against the log.

A tier subclasses `EventStoreContract` and gives three fixtures: `store` (a new,
empty adapter), `queued` (the messages an append queued on a stream, read where
that adapter keeps them) and `stream` (a task-queue stream name of its keys)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agentledger.events.types import CODEC, ToolCallSucceeded
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.store.overflow import DEFAULT_MAX_BYTES
from agentledger.services.adapters.store.port import EventStore, Head, Outgoing, Removed, Snapshot
from agentledger.services.errors import ConcurrencyConflict
from tests.contracts.envelopes import T0, batch, envelope, finished


def new_run(store: EventStore, n: int = 1, *, at: float = T0, live: bool = True) -> str:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    store.append(run_id, batch(run_id, 1, n, at=at), expected_seq=0, live=live)
    return run_id


V1 = "v1"


def _succeeded(output: Any) -> ToolCallSucceeded:
    return ToolCallSucceeded(call_id="c1", output=output, started_at=T0, finished_at=T0)


def snap(seq: int, event_id: str, *, version: str = V1, state: bytes = b"state") -> Snapshot:
    return Snapshot(seq, event_id, version, state + str(seq).encode())


class EventStoreContract:
    def test_appended_envelopes_are_read_back_equal_and_in_order(self, store: EventStore) -> None:
        first, second = batch("run-a", 1, 3), batch("run-a", 4, 2)

        assert store.append("run-a", first, expected_seq=0, live=True) == 3
        assert store.append("run-a", second, expected_seq=3, live=True) == 5

        assert store.read("run-a") == first + second

    def test_reading_after_a_seq_returns_only_the_later_events(self, store: EventStore) -> None:
        events = batch("run-a", 1, 5)
        store.append("run-a", events, expected_seq=0, live=True)

        assert store.read("run-a", after_seq=2) == events[2:]
        assert store.read("run-a", after_seq=5) == []

    def test_an_unknown_run_reads_as_an_empty_log(self, store: EventStore) -> None:
        assert store.read("no-such-run") == []

    def test_an_empty_batch_is_refused(self, store: EventStore) -> None:
        with pytest.raises(ValueError):
            store.append("run-a", [], expected_seq=0, live=True)

    def test_appending_at_a_stale_seq_raises_a_conflict_carrying_both_seqs(
        self, store: EventStore
    ) -> None:
        store.append("run-a", batch("run-a", 1, 3), expected_seq=0, live=True)

        with pytest.raises(ConcurrencyConflict) as caught:
            store.append("run-a", batch("run-a", 2, 1), expected_seq=1, live=True)

        assert (caught.value.run_id, caught.value.expected_seq, caught.value.actual_seq) == (
            "run-a",
            1,
            3,
        )
        assert [e.seq for e in store.read("run-a")] == [1, 2, 3]

    def test_appending_ahead_of_the_log_is_a_conflict_too(self, store: EventStore) -> None:
        store.append("run-a", batch("run-a", 1, 1), expected_seq=0, live=True)

        with pytest.raises(ConcurrencyConflict) as caught:
            store.append("run-a", batch("run-a", 5, 1), expected_seq=4, live=True)

        assert (caught.value.expected_seq, caught.value.actual_seq) == (4, 1)

    def test_resending_a_batch_that_landed_returns_its_seq_and_writes_nothing_twice(
        self,
        store: EventStore,
    ) -> None:
        """redis-py may resend a script whose reply was lost: same event ids, same seq."""
        store.append("run-a", batch("run-a", 1, 2), expected_seq=0, live=True)
        sent = batch("run-a", 3, 3)
        assert store.append("run-a", sent, expected_seq=2, live=True) == 5

        assert store.append("run-a", sent, expected_seq=2, live=True) == 5

        assert store.read("run-a")[2:] == sent
        assert len(store.read("run-a")) == 5

    def test_a_different_batch_at_a_stale_seq_is_a_conflict_not_a_resend(
        self, store: EventStore
    ) -> None:
        store.append("run-a", batch("run-a", 1, 2), expected_seq=0, live=True)
        store.append("run-a", batch("run-a", 3, 1), expected_seq=2, live=True)

        with pytest.raises(ConcurrencyConflict):
            store.append("run-a", batch("run-a", 3, 1), expected_seq=2, live=True)

    def test_an_append_onto_a_log_of_the_right_length_but_another_end_is_a_conflict(
        self,
        store: EventStore,
    ) -> None:
        """A writer that folded from an append that lost its race holds a state whose
        length another log may have: naming the event it folded last tells them apart."""
        first = batch("run-a", 1, 2)
        store.append("run-a", first, expected_seq=0, live=True)
        forked = batch("run-a", 2, 1)  # what the writer believed seq 2 was
        with pytest.raises(ConcurrencyConflict):
            store.append(
                "run-a", batch("run-a", 3, 1), expected_seq=2, expected_id=forked[0].id, live=True
            )
        seq = store.append(
            "run-a", batch("run-a", 3, 1), expected_seq=2, expected_id=first[1].id, live=True
        )
        assert seq == 3 and len(store.read("run-a")) == 3

    def test_an_append_queues_its_messages_only_when_it_lands(
        self, store: EventStore, queued: Callable[[str], list[bytes]], stream: str
    ) -> None:
        store.append("run-a", batch("run-a", 1, 1), expected_seq=0, live=True,
                     messages=[Outgoing(stream, b"m1")])  # fmt: skip
        with pytest.raises(ConcurrencyConflict):
            store.append("run-a", batch("run-a", 2, 1), expected_seq=0, live=True,
                         messages=[Outgoing(stream, b"m2")])  # fmt: skip
        assert queued(stream) == [b"m1"]

    def test_a_tool_output_past_the_event_cap_is_stored_as_a_head_and_overflow_pages(
        self, store: EventStore, queued: Callable[[str], list[bytes]], stream: str
    ) -> None:
        output = {"rows": [f"row {i}" for i in range(200_000)]}  # ~2.6 MB as JSON
        whole = json.dumps(output, sort_keys=True)
        big = envelope("run-a", 2, _succeeded(output))
        store.append("run-a", batch("run-a", 1, 1), expected_seq=0, live=True)

        stored = store.as_stored("run-a", [big])  # what the writer folds
        seq = store.append("run-a", stored, expected_seq=1, live=True,
                           messages=[Outgoing(stream, b"m")])  # fmt: skip

        [read] = store.read("run-a", after_seq=1)
        assert seq == 2 and read == stored[0] and queued(stream) == [b"m"]
        assert len(CODEC.encode(read)) <= DEFAULT_MAX_BYTES
        over = read.data.overflow
        assert over is not None and over.ref == read.id and over.chars == len(whole)
        pages = store.overflow_pages("run-a", over.ref, 0, over.pages)
        assert read.data.output + "".join(pages) == whole
        assert store.overflow_pages("run-a", over.ref, 1, 2) == pages[1:3]

    def test_an_uncut_append_of_a_big_output_cuts_it_and_a_conflict_writes_no_pages(
        self, store: EventStore
    ) -> None:
        store.append("run-o", batch("run-o", 1, 1), expected_seq=0, live=True)
        lost = envelope("run-o", 2, _succeeded("x" * 1_000_000))
        with pytest.raises(ConcurrencyConflict):
            store.append("run-o", [lost], expected_seq=0, live=True)
        with pytest.raises(InvalidEvent):
            store.overflow_pages("run-o", lost.id, 0, 1)

        store.append("run-o", [lost], expected_seq=1, live=True)  # never through as_stored

        [read] = store.read("run-o", after_seq=1)
        assert read.data.overflow is not None
        pages = store.overflow_pages("run-o", lost.id, 0, read.data.overflow.pages)
        assert read.data.output + "".join(pages) == "x" * 1_000_000

    def test_runs_are_listed_newest_first(self, store: EventStore) -> None:
        created = [new_run(store, at=T0 + i) for i in range(4)]

        assert [e.run_id for e in store.runs()] == created[::-1]
        assert [e.run_id for e in store.runs(limit=2)] == created[:1:-1]
        assert store.runs()[0].created_at == pytest.approx(T0 + 3, abs=0.01)

    def test_live_runs_idle_since_a_time_are_found_until_touched(self, store: EventStore) -> None:
        old, recent = new_run(store, at=T0), new_run(store, at=T0 + 100)

        assert store.idle_live_runs(idle_since=T0 + 50) == [old]
        assert set(store.idle_live_runs(idle_since=T0 + 150)) == {old, recent}

        store.touch(old, at=T0 + 200)

        assert store.idle_live_runs(idle_since=T0 + 150) == [recent]

    def test_a_run_touched_at_a_later_time_is_idle_only_a_lease_after_it(
        self, store: EventStore
    ) -> None:
        run_id = new_run(store, at=T0)

        store.touch(run_id, at=T0 + 3_600, seq=1)  # parked until its deadline

        assert store.idle_live_runs(idle_since=T0 + 3_599) == []
        assert store.idle_live_runs(idle_since=T0 + 3_600) == [run_id]

    def test_a_touch_at_a_seq_the_run_moved_past_is_not_written(self, store: EventStore) -> None:
        run_id = new_run(store, at=T0)
        store.append(run_id, batch(run_id, 2, 1, at=T0 + 10), expected_seq=1, live=True)

        store.touch(run_id, at=T0 + 3_600, seq=1)  # folded before the append: the append wins

        assert store.idle_live_runs(idle_since=T0 + 11) == [run_id]
        store.touch(run_id, at=T0 + 3_600, seq=2)
        assert store.idle_live_runs(idle_since=T0 + 11) == []

    def test_an_append_scores_a_run_touched_far_ahead_afresh(self, store: EventStore) -> None:
        run_id = new_run(store, at=T0)
        store.touch(run_id, at=T0 + 3_600, seq=1)

        store.append(run_id, batch(run_id, 2, 1, at=T0 + 10), expected_seq=1, live=True)

        assert store.idle_live_runs(idle_since=T0 + 11) == [run_id]

    def test_a_touch_with_a_seq_never_brings_an_ended_run_back(self, store: EventStore) -> None:
        run_id = new_run(store, at=T0)
        store.append(run_id, batch(run_id, 2, 1, at=T0), expected_seq=1, live=False)

        store.touch(run_id, at=T0 + 1, seq=2)

        assert store.idle_live_runs(idle_since=T0 + 1_000) == []

    def test_progress_on_a_run_counts_as_activity(self, store: EventStore) -> None:
        run_id = new_run(store, at=T0)

        store.append(run_id, batch(run_id, 2, 1, at=T0 + 100), expected_seq=1, live=True)

        assert store.idle_live_runs(idle_since=T0 + 50) == []

    def test_appending_with_live_false_takes_the_run_out_of_the_live_index(
        self, store: EventStore
    ) -> None:
        run_id = new_run(store, at=T0)

        store.append(run_id, batch(run_id, 2, 1, at=T0), expected_seq=1, live=False)
        store.touch(run_id, at=T0 + 1)  # touching an ended run must not bring it back

        assert store.idle_live_runs(idle_since=T0 + 1_000) == []
        assert [e.run_id for e in store.runs()] == [run_id]

    def test_a_run_created_not_live_never_enters_the_live_index(self, store: EventStore) -> None:
        new_run(store, at=T0, live=False)

        assert store.idle_live_runs(idle_since=T0 + 1_000) == []

    def test_a_head_at_nothing_reads_the_whole_log_from_nothing(self, store: EventStore) -> None:
        events = batch("run-a", 1, 4)
        store.append("run-a", events, expected_seq=0, live=True)

        [tail] = store.read_tails([Head("run-a")], snapshot_version=V1)

        assert (tail.base, tail.events, tail.snapshot, tail.snapshot_seq) == (0, events, None, 0)

    def test_a_head_the_log_still_holds_reads_only_the_events_after_it(
        self, store: EventStore
    ) -> None:
        events = batch("run-a", 1, 5)
        store.append("run-a", events, expected_seq=0, live=True)

        [tail] = store.read_tails([Head("run-a", 3, events[2].id)], snapshot_version=V1)
        [current] = store.read_tails([Head("run-a", 5, events[4].id)], snapshot_version=V1)

        assert (tail.base, tail.events, tail.snapshot) == (3, events[3:], None)
        assert (current.base, current.events) == (5, [])

    def test_a_head_whose_event_is_not_in_the_log_reads_the_whole_log(
        self, store: EventStore
    ) -> None:
        """A stream deleted and made again holds other events at the same seqs."""
        events = batch("run-a", 1, 5)
        store.append("run-a", events, expected_seq=0, live=True)

        [other_id] = store.read_tails([Head("run-a", 3, "not-that-event")], snapshot_version=V1)
        [past_end] = store.read_tails([Head("run-a", 9, "gone")], snapshot_version=V1)

        assert (other_id.base, other_id.events) == (0, events)
        assert (past_end.base, past_end.events) == (0, events)

    def test_a_newer_snapshot_that_matches_the_log_comes_with_the_events_after_it(
        self,
        store: EventStore,
    ) -> None:
        events = batch("run-a", 1, 6)
        store.append("run-a", events, expected_seq=0, live=True)
        store.save_snapshot("run-a", snap(4, events[3].id))

        [cold] = store.read_tails([Head("run-a")], snapshot_version=V1)
        [behind] = store.read_tails([Head("run-a", 2, events[1].id)], snapshot_version=V1)
        [ahead] = store.read_tails([Head("run-a", 5, events[4].id)], snapshot_version=V1)

        assert (cold.base, cold.events, cold.snapshot) == (4, events[4:], snap(4, events[3].id))
        assert (behind.base, behind.snapshot) == (4, snap(4, events[3].id))
        assert (ahead.base, ahead.events, ahead.snapshot, ahead.snapshot_seq) == (
            5,
            events[5:],
            None,
            4,
        )

    def test_a_snapshot_the_log_no_longer_holds_is_ignored(self, store: EventStore) -> None:
        events = batch("run-a", 1, 6)
        store.append("run-a", events, expected_seq=0, live=True)
        store.save_snapshot("run-a", snap(4, "an-event-of-a-deleted-log"))

        [cold] = store.read_tails([Head("run-a")], snapshot_version=V1)
        [held] = store.read_tails([Head("run-a", 2, events[1].id)], snapshot_version=V1)

        assert (cold.base, cold.events, cold.snapshot) == (0, events, None)
        assert (held.base, held.events, held.snapshot) == (2, events[2:], None)

    def test_when_the_head_is_gone_a_matching_snapshot_is_the_fallback(
        self, store: EventStore
    ) -> None:
        events = batch("run-a", 1, 6)
        store.append("run-a", events, expected_seq=0, live=True)
        store.save_snapshot("run-a", snap(2, events[1].id))

        [tail] = store.read_tails([Head("run-a", 5, "not-that-event")], snapshot_version=V1)

        assert (tail.base, tail.events, tail.snapshot) == (2, events[2:], snap(2, events[1].id))

    def test_a_snapshot_of_another_version_is_invisible(self, store: EventStore) -> None:
        events = batch("run-a", 1, 6)
        store.append("run-a", events, expected_seq=0, live=True)
        store.save_snapshot("run-a", snap(4, events[3].id, version="old-code"))

        [tail] = store.read_tails([Head("run-a")], snapshot_version=V1)

        assert (tail.base, tail.snapshot, tail.snapshot_seq) == (0, None, 0)

    def test_an_older_snapshot_never_replaces_a_newer_one_of_the_same_version(
        self,
        store: EventStore,
    ) -> None:
        events = batch("run-a", 1, 6)
        store.append("run-a", events, expected_seq=0, live=True)
        store.save_snapshot("run-a", snap(4, events[3].id))

        store.save_snapshot("run-a", snap(2, events[1].id))
        [kept] = store.read_tails([Head("run-a")], snapshot_version=V1)
        store.save_snapshot("run-a", snap(3, events[2].id, version="new-code"))
        [replaced] = store.read_tails([Head("run-a")], snapshot_version="new-code")

        assert kept.snapshot == snap(4, events[3].id)
        assert replaced.snapshot == snap(3, events[2].id, version="new-code")

    def test_a_snapshot_appended_with_its_events_is_kept_only_when_they_land(
        self, store: EventStore, queued: Callable[[str], list[bytes]], stream: str
    ) -> None:
        first, second = batch("run-a", 1, 4), batch("run-a", 5, 2)
        at_4 = Snapshot(4, first[3].id, V1, b"header", b"spec", {0: b"page 0"})
        store.append("run-a", first, expected_seq=0, live=True, snapshot=at_4,
                     messages=[Outgoing(stream, b"m1")])  # fmt: skip
        with pytest.raises(ConcurrencyConflict):  # a stale writer's batch and snapshot
            store.append("run-a", batch("run-a", 3, 2), expected_seq=2, live=True,
                         snapshot=snap(4, "a-lost-event"), messages=[Outgoing(stream, b"m2")])  # fmt: skip
        store.append("run-a", second, expected_seq=4, live=True)

        [cold] = store.read_tails([Head("run-a")], snapshot_version=V1)

        assert (cold.base, cold.events, cold.snapshot_seq) == (4, second, 4)
        assert cold.snapshot is not None and (cold.snapshot.state, cold.snapshot.spec) == (
            b"header", b"spec",
        )  # fmt: skip
        assert store.snapshot_pages("run-a", 1) == [b"page 0"]
        assert queued(stream) == [b"m1"], "the messages go with the batch as before"

    def test_many_heads_are_answered_in_order_each_on_its_own_run(self, store: EventStore) -> None:
        a, b = batch("run-a", 1, 3), batch("run-b", 1, 2)
        store.append("run-a", a, expected_seq=0, live=True)
        store.append("run-b", b, expected_seq=0, live=True)

        tails = store.read_tails(
            [Head("run-b", 1, b[0].id), Head("no-such-run"), Head("run-a", 3, "x")],
            snapshot_version=V1,
        )

        assert [(t.base, t.events) for t in tails] == [(1, b[1:]), (0, []), (0, a)]

    # retention: a finished run taken out whole
    def test_an_export_holds_each_event_as_stored_in_order_and_its_overflow_pages(
        self, store: EventStore
    ) -> None:
        events = finished("run-x")
        store.append("run-x", events, expected_seq=0, live=False)

        exported = store.export("run-x")

        assert exported is not None and exported.run_id == "run-x"
        assert [CODEC.decode(b) for b in exported.entries] == events
        assert exported.overflow == {}
        assert store.export("no-such-run") is None

    def test_removing_a_finished_run_takes_its_log_snapshot_and_index_entry(
        self, store: EventStore
    ) -> None:
        events = finished("run-x")
        store.append("run-x", events, expected_seq=0, live=False)
        store.save_snapshot("run-x", snap(len(events), events[-1].id))

        removed = store.remove("run-x", count=len(events), last_id=events[-1].id)

        assert removed is Removed.REMOVED
        assert store.read("run-x") == []
        assert store.export("run-x") is None
        assert "run-x" not in [e.run_id for e in store.runs()]
        tail = store.read_tails([Head("run-x")], snapshot_version=V1)[0]
        assert (tail.base, tail.events, tail.snapshot) == (0, [], None)
        again = store.remove("run-x", count=len(events), last_id=events[-1].id)
        assert again is Removed.GONE

    def test_a_run_whose_log_moved_or_that_is_live_is_not_removed(self, store: EventStore) -> None:
        events = finished("run-x")
        store.append("run-x", events, expected_seq=0, live=False)
        live = new_run(store, 2, live=True)
        live_log = store.read(live)

        assert store.remove("run-x", count=len(events) - 1, last_id=events[-2].id) is (
            Removed.CHANGED
        )
        assert store.remove("run-x", count=len(events), last_id="another") is Removed.CHANGED
        assert store.remove(live, count=2, last_id=live_log[-1].id) is Removed.CHANGED
        assert store.read("run-x") == events
        assert store.read(live) == live_log

    def test_runs_created_before_a_time_are_listed_oldest_first_from_a_time(
        self, store: EventStore
    ) -> None:
        old = new_run(store, at=T0)
        older = new_run(store, at=T0 - 10)
        new_run(store, at=T0 + 10)

        found = [e.run_id for e in store.created_before(T0 + 5)]
        assert found == [older, old]
        assert [e.run_id for e in store.created_before(T0 + 5, offset=1)] == [old]
        assert [e.run_id for e in store.created_before(T0 + 5, limit=1)] == [older]

    def test_runs_created_at_the_same_time_are_paged_in_id_order(self, store: EventStore) -> None:
        ids = sorted(new_run(store, at=T0) for _ in range(5))

        pages = [store.created_before(T0 + 5, offset=n, limit=2) for n in (0, 2, 4, 6)]

        assert [[e.run_id for e in page] for page in pages] == [ids[:2], ids[2:4], ids[4:], []]

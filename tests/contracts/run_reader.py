"""The run reader contract (`agentledger.services.adapters.reading`): one suite the memory
reader passes in the unit tier and the Redis reader on a real redis-server in
the integration tier — a run's events and raw entries, the wait for its next
append, the feeds from their ends and their starts, and `follow` under each
stop rule.

A tier subclasses `RunReaderContract` and gives two fixtures: `store` (a new,
empty event store) and `reader` (the reader over that store's logs)."""

from __future__ import annotations

import math
import threading
import uuid
from typing import Any

from agentledger.events.following import Until
from agentledger.events.status import RunStatus
from agentledger.events.types import RunAborted, RunEscalated
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.reading.follow import follow
from agentledger.services.adapters.reading.port import RunReader
from agentledger.services.adapters.store.port import EventStore
from tests.contracts.envelopes import T0, batch, envelope

LONG_S = 30.0  # a wait that ends by an append long before this


def new_run(store: EventStore, n: int = 1) -> tuple[str, list[Envelope[Any]]]:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    events = batch(run_id, 1, n)
    store.append(run_id, events, expected_seq=0, live=True)
    return run_id, events


def escalated(run_id: str, seq: int) -> Envelope[Any]:
    return envelope(run_id, seq, RunEscalated(reason="refusal", detail="asked"), at=T0 + seq)


def aborted(run_id: str, seq: int) -> Envelope[Any]:
    return envelope(run_id, seq, RunAborted(by="ops"), at=T0 + seq)


class RunReaderContract:
    def test_a_run_reads_back_after_a_seq_and_an_unknown_one_is_empty(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, events = new_run(store, 3)

        assert reader.read(run_id) == events
        assert reader.read(run_id, after_seq=2) == events[2:]
        assert (reader.exists(run_id), reader.exists("no-such-run")) == (True, False)
        assert reader.read("no-such-run") == []

    def test_raw_entries_carry_the_stream_ids_and_the_decoded_envelopes(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, events = new_run(store, 2)

        raw = reader.raw(run_id)

        assert [(r.entry_id, r.envelope, r.broken) for r in raw] == [
            ("0-1", events[0], None),
            ("0-2", events[1], None),
        ]

    def test_a_wait_returns_at_once_when_the_log_is_past_the_seq_and_false_when_nothing_came(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, _ = new_run(store, 2)

        assert reader.wait(run_id, after_seq=1, timeout_s=LONG_S) is True
        assert reader.wait(run_id, after_seq=2, timeout_s=0.01) is False

    def test_a_wait_ends_with_the_append_it_waited_for(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, _ = new_run(store, 1)
        waited: list[bool] = []
        waiter = threading.Thread(
            target=lambda: waited.append(reader.wait(run_id, after_seq=1, timeout_s=LONG_S))
        )
        waiter.start()
        store.append(run_id, batch(run_id, 2, 1), expected_seq=1, live=True)
        waiter.join()

        assert waited == [True]

    def test_the_feeds_from_their_ends_give_only_what_is_appended_next(
        self, store: EventStore, reader: RunReader
    ) -> None:
        new_run(store, 2)
        cursors = reader.feed_ends()
        run_id, events = new_run(store, 3)
        more = batch(run_id, 4, 1)
        store.append(run_id, more, expected_seq=3, live=True)

        assert reader.feed_next(cursors, timeout_s=LONG_S) == events + more
        assert reader.feed_next(cursors, timeout_s=0.01) == []

    def test_the_feed_history_holds_every_run_in_seq_order_and_its_cursors_are_at_the_end(
        self, store: EventStore, reader: RunReader
    ) -> None:
        first, a = new_run(store, 2)
        second, b = new_run(store, 2)
        store.append(first, batch(first, 3, 1), expected_seq=2, live=True)

        history, cursors = reader.feed_history()

        assert [e.seq for e in history if e.run_id == first] == [1, 2, 3]
        assert [e for e in history if e.run_id == second] == b
        assert reader.feeds_moved(cursors, timeout_s=0.01) is False
        new_run(store, 1)
        assert reader.feeds_moved(cursors, timeout_s=LONG_S) is True
        assert reader.feeds_moved(cursors, timeout_s=0.01) is False

    def test_the_runs_index_pages_newest_first_before_a_cursor_and_above_a_floor(
        self, store: EventStore, reader: RunReader
    ) -> None:
        made = []
        for n in range(3):
            run_id = f"run-{uuid.uuid4().hex[:8]}"
            store.append(run_id, batch(run_id, 1, 1, at=T0 + n), expected_seq=0, live=True)
            made.append((float(int((T0 + n + 0.001) * 1000)), run_id))
        newest, middle, oldest = reversed(made)

        assert reader.runs_before((math.inf, ""), -math.inf, 2) == ([newest, middle], False)
        assert reader.runs_before(middle, -math.inf, 5) == ([oldest], True)
        assert reader.runs_before((math.inf, ""), middle[0], 5) == ([newest, middle], True)

    def test_following_until_over_hands_out_every_event_once_and_stops_at_the_end(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, events = new_run(store, 1)
        store.append(run_id, [escalated(run_id, 2)], expected_seq=1, live=True)
        steps = follow(reader, run_id, until=Until.OVER, wait_s=LONG_S)

        first = next(steps)
        store.append(run_id, [aborted(run_id, 3)], expected_seq=2, live=False)
        rest = list(steps)

        seen = [e.seq for step in [first, *rest] for e in step.events]
        assert seen == [1, 2, 3]
        assert (first.state is not None and first.state.status, first.last) == (
            RunStatus.AWAITING_HUMAN,
            False,
        )
        assert (
            rest[-1].last
            and rest[-1].state is not None
            and rest[-1].state.status is RunStatus.FAILED
        )

    def test_following_until_settled_stops_at_an_escalation(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, _ = new_run(store, 1)
        store.append(run_id, [escalated(run_id, 2)], expected_seq=1, live=True)

        steps = list(follow(reader, run_id, until=Until.SETTLED, wait_s=LONG_S))

        assert len(steps) == 1 and steps[0].last
        assert steps[0].state is not None and steps[0].state.status is RunStatus.AWAITING_HUMAN

    def test_following_after_a_folded_state_reads_only_what_came_after_it(
        self, store: EventStore, reader: RunReader
    ) -> None:
        run_id, _ = new_run(store, 2)
        (at_two,) = list(follow(reader, run_id, until=Until.NEVER, stop=_set()))
        store.append(run_id, [escalated(run_id, 3)], expected_seq=2, live=True)

        steps = list(follow(reader, run_id, after=at_two.state, until=Until.ASKS_A_PERSON))

        assert [e.seq for s in steps for e in s.events] == [3]

    def test_a_follow_of_no_run_yet_ends_when_its_stop_is_set(
        self, store: EventStore, reader: RunReader
    ) -> None:
        stop = threading.Event()
        steps = follow(reader, "no-such-run", until=Until.NEVER, stop=stop, wait_s=0.01)

        first = next(steps)
        stop.set()
        rest = list(steps)

        assert (first.state, first.last) == (None, False)
        assert [(s.state, s.last) for s in rest] == [(None, True)]


def _set() -> threading.Event:
    stop = threading.Event()
    stop.set()
    return stop

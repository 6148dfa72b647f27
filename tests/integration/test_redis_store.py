"""What only the Redis adapter promises: the run stream, one feed entry per
append, the shard's indexes and the commands the append queues are written by
one script (all or nothing); every key of a run carries its shard as a hash
tag; and a real run's log folds from Redis exactly as it folds in memory."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
import redis
from itkit import (
    MirroredStore,
    call,
    create_run,
    drive,
    executions,
    scripted_spec,
    with_store,
)
from redis.crc import key_slot

from agentledger.events.fold import fold
from agentledger.events.status import RunStatus
from agentledger.events.types import CODEC
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.store.port import Head, Outgoing
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from tests.contracts.envelopes import batch


def feed_rows(client: redis.Redis, keys: Keys, run_id: str) -> list[tuple[str, int, int, str]]:
    """(run, first seq, last seq, last type) of each feed entry of the run."""
    rows = client.xrange(keys.feed(keys.shard(run_id)))
    return [
        (f[b"run"].decode(), int(f[b"first"]), int(f[b"seq"]), f[b"type"].decode())
        for _, f in rows
        if f[b"run"].decode() == run_id
    ]


def appends(
    logged: list[tuple[str, int, str]], sizes: list[int]
) -> list[tuple[str, int, int, str]]:
    """The feed entries appends of these sizes make of the logged events."""
    rows, start = [], 0
    for n in sizes:
        first, last = logged[start], logged[start + n - 1]
        rows.append((first[0], first[1], last[1], last[2]))
        start += n
    return rows


def test_every_append_gets_one_feed_entry_naming_the_run_its_seqs_and_last_type(
    client: redis.Redis, keys: Keys
) -> None:
    store = RedisEventStore(client, keys)
    store.append("run-a", batch("run-a", 1, 3), expected_seq=0, live=True)
    store.append("run-a", batch("run-a", 4, 2), expected_seq=3, live=True)

    logged = [(e.run_id, e.seq, e.type) for e in store.read("run-a")]
    assert feed_rows(client, keys, "run-a") == appends(logged, [3, 2])
    assert len(logged) == 5


def test_an_append_queues_its_commands_with_it_and_a_refused_one_queues_nothing(
    client: redis.Redis, keys: Keys
) -> None:
    store = RedisEventStore(client, keys)
    stream = keys.queue(keys.shard("run-a"), "default", "fp", "model")
    first = batch("run-a", 1, 1)
    store.append("run-a", first, expected_seq=0, live=True,
                 messages=[Outgoing(stream, b"first")])  # fmt: skip
    with pytest.raises(ConcurrencyConflict):
        store.append("run-a", batch("run-a", 2, 1), expected_seq=0, live=True,
                     messages=[Outgoing(stream, b"lost race")])  # fmt: skip
    store.append(
        "run-a", first, expected_seq=0, live=True, messages=[Outgoing(stream, b"resent")]
    )  # its reply was lost: a no-op
    assert [f[b"m"] for _, f in client.xrange(stream)] == [b"first"]
    assert key_slot(stream.encode()) == key_slot(keys.run("run-a").encode())


def test_a_refused_or_resent_append_writes_neither_the_run_nor_the_feed(
    client: redis.Redis, keys: Keys
) -> None:
    store = RedisEventStore(client, keys)
    sent = batch("run-a", 1, 2)
    store.append("run-a", sent, expected_seq=0, live=True)

    store.append("run-a", sent, expected_seq=0, live=True)  # the lost-reply resend
    with pytest.raises(ConcurrencyConflict):
        store.append("run-a", batch("run-a", 2, 1), expected_seq=1, live=True)

    assert client.xlen(keys.run("run-a")) == 2
    assert len(feed_rows(client, keys, "run-a")) == 1


def test_racing_appenders_leave_the_feed_in_exactly_the_logs_order(
    client: redis.Redis, keys: Keys
) -> None:
    store = RedisEventStore(client, keys)
    store.append("run-a", batch("run-a", 1, 1), expected_seq=0, live=True)
    appended = [0]
    lock = threading.Lock()

    def appender() -> None:
        while True:
            with lock:
                if appended[0] >= 60:
                    return
            seq = len(store.read("run-a"))
            try:
                store.append("run-a", batch("run-a", seq + 1, 1), expected_seq=seq, live=True)
            except ConcurrencyConflict:
                continue
            with lock:
                appended[0] += 1

    threads = [threading.Thread(target=appender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    logged = [(e.run_id, e.seq, e.type) for e in store.read("run-a")]
    assert [seq for _, seq, _ in logged] == list(range(1, len(logged) + 1))
    assert feed_rows(client, keys, "run-a") == appends(logged, [1] * len(logged))


def test_every_key_of_a_run_carries_its_shard_as_a_hash_tag(
    client: redis.Redis, keys: Keys
) -> None:
    run_ids = [f"run-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    store = RedisEventStore(client, keys)
    for run_id in run_ids:
        store.append(run_id, batch(run_id, 1, 2), expected_seq=0, live=True)

    for run_id in run_ids:
        shard = keys.shard(run_id)
        run_keys = [keys.run(run_id), keys.feed(shard), keys.runs(shard), keys.live(shard)]
        assert all(k.startswith(f"{keys.prefix}:{{{shard}}}:") for k in run_keys)
        assert all(client.exists(k) for k in run_keys)
        assert len({key_slot(k.encode()) for k in run_keys}) == 1  # one script may touch them
    written = {k.decode() for k in client.scan_iter(match=f"{keys.prefix}:*")}
    assert all(k.split(":")[1].startswith("{") for k in written)
    assert len({keys.shard(r) for r in run_ids}) > 1  # the runs did spread over shards


def test_a_real_runs_log_folds_from_redis_exactly_as_in_memory(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    mirrored = MirroredStore(app.store)
    app = with_store(app, mirrored)
    spec = scripted_spec(
        [
            {
                "tool_use": [
                    call("c1", "it_read", key="a"),
                    call("c2", "it_write", key="b", value="1"),
                ]
            },
            {"tool_use": [call("c3", "it_write", key="c", value="2")]},
            {"end_turn": "all written"},
        ],
        tools_dir=tools_dir,
        acceptance=[{"command": "test -s executions.log"}],
    )
    run_id = create_run(app, client, "run-fold", spec, workspace)

    final = drive(app, run_id)

    from_redis = app.store.read(run_id)
    in_memory = mirrored.memory.read(run_id)
    assert final.status is RunStatus.COMPLETED
    assert len(from_redis) == final.seq > 15
    assert from_redis == in_memory
    assert fold(from_redis) == fold(in_memory) == final
    assert executions(workspace) == {"c1": 1, "c2": 1, "c3": 1}


def test_a_tail_reads_the_e_field_of_entries_written_another_way_and_refuses_one_without(
    client: redis.Redis, keys: Keys
) -> None:
    """tail.lua hands back each entry's `e` field, whatever else the entry holds."""
    store = RedisEventStore(client, keys)
    events = batch("run-t", 1, 3)
    store.append("run-t", events[:1], expected_seq=0, live=False)
    raw = [CODEC.encode(e) for e in events]
    client.xadd(keys.run("run-t"), {"e": raw[1]}, id="0-2")  # e alone
    client.xadd(keys.run("run-t"), {"x": b"1", "e": raw[2], "y": b"2"}, id="0-3")
    (tail,) = store.read_tails([Head("run-t")], snapshot_version="none")
    assert tail.events == events == store.read("run-t")
    client.xadd(keys.run("run-t"), {"id": b"e4", "type": b"T", "f": b"?"}, id="0-4")
    with pytest.raises(InvalidEvent, match="no 'e' field"):
        store.read_tails([Head("run-t")], snapshot_version="none")

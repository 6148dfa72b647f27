"""The lag an autoscaler reads counts steps, not re-drives: on a real Redis, the
sweeper re-drives a run idle past its lease only when no message for the same
command still waits in its queue stream to be taken (queued, or delayed for a
retry), so runs waiting for a free worker show a lag of one each however many
passes go by; a message delivered to a worker that has not acked it gets one
copy (for any free worker), not one a pass; a message that is gone (acked
without the step done, or lost) is sent again. Run time moves with an offset
clock."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from itkit import OffsetClock, create_run, load, scripted_spec

from agentledger.events.commands import Pool, RequestModel
from agentledger.services.adapters.broker.outbox import Resend, command_key, encoded
from agentledger.services.adapters.broker.streams_queue import GROUP
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.handlers.app import App
from agentledger.services.handlers.runs import Runs
from agentledger.services.keys import Keys
from agentledger.services.loops.sweeper import sweep_once
from tests.contracts.commands import decoded

WAITING = 13


def later(app: App, offset_s: float) -> App:
    """The app `offset_s` in the future (its re-drives through `Resend`, as built)."""
    clock = OffsetClock(offset_s)
    runs = Runs(app.store, clock, app.outbox, app.locks, app.send)
    return replace(app, runs=runs, clock=clock)


def waiting_runs(app: App, client: redis.Redis, tools_dir: Path, workspace: Path) -> list[str]:
    """Runs whose first model request waits in the model stream, nobody reading it."""
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    runs = [create_run(app, client, f"run-w{i}", spec, workspace) for i in range(WAITING)]
    for stream in streams(app, runs):
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    return runs


def streams(app: App, runs: list[str]) -> set[str]:
    return {app.outbox.stream(load(app, r), Pool.MODEL) for r in runs}


def lag(client: redis.Redis, stream_set: set[str]) -> tuple[int, int, int]:
    """(entries, lag, pending) summed over the streams, as the scalers read them."""
    entries = lag_n = pending = 0
    for stream in stream_set:
        entries += client.xlen(stream)
        [group] = [g for g in client.xinfo_groups(stream) if g["name"] in (GROUP, GROUP.encode())]
        lag_n += int(group["lag"] or 0)
        pending += int(group["pending"])
    return entries, lag_n, pending


def passes(app: App, n: int, start_s: float = 60.0) -> int:
    shards = list(range(app.settings.shards))
    return sum(sweep_once(later(app, start_s * (i + 1)), shards) for i in range(n))


def test_runs_waiting_for_a_worker_show_a_lag_of_one_each_however_often_re_driven(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    runs = waiting_runs(app, client, tools_dir, workspace)
    queues = streams(app, runs)
    assert lag(client, queues) == (WAITING, WAITING, 0)

    passes(app, 4)

    assert lag(client, queues) == (WAITING, WAITING, 0), "no second message for a waiting step"


def test_a_delivered_message_not_yet_acked_gets_one_copy_for_a_free_worker(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    runs = waiting_runs(app, client, tools_dir, workspace)
    queues = streams(app, runs)
    for stream in queues:  # held by a worker busy past them (or stuck)
        client.xreadgroup(GROUP, "busy-worker", {stream: ">"}, count=100)

    passes(app, 3)

    assert lag(client, queues) == (2 * WAITING, WAITING, WAITING), "one copy each, not three"


def test_a_message_gone_from_its_stream_is_sent_again_once(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    runs = waiting_runs(app, client, tools_dir, workspace)
    queues = streams(app, runs)
    lost = runs[0]
    for stream in queues:  # acked and deleted with the step not done, or lost by Redis
        for entry_id, fields in client.xrange(stream):
            if decoded([Outgoing(stream, fields[b"m"])]) == [RequestModel(lost)]:
                client.xdel(stream, entry_id)
    assert lag(client, queues)[0] == WAITING - 1

    assert passes(app, 3) >= 1

    assert lag(client, queues) == (WAITING, WAITING, 0)


def test_a_message_delayed_for_a_retry_is_not_sent_again(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path
) -> None:
    runs = waiting_runs(app, client, tools_dir, workspace)
    [stream] = streams(app, runs[:1])
    entries: Any = client.xrange(stream)
    [(entry_id, fields)] = [
        (e, f)
        for e, f in entries
        if decoded([Outgoing(stream, f[b"m"])]) == [RequestModel(runs[0])]
    ]
    client.xdel(stream, entry_id)
    client.zadd(keys.queue_delayed(stream), {fields[b"m"]: 10**13})  # due much later

    passes(app, 2)

    assert lag(client, streams(app, runs))[0] == WAITING - 1


def test_a_backlog_past_the_scan_bound_waits_and_foreign_messages_are_not_commands(
    client: redis.Redis, keys: Keys
) -> None:
    stream = keys.queue(0, "q", "t", "model")
    first, second = (encoded("model.q.t", RequestModel(r)) for r in ("run-x", "run-y"))
    client.xadd(stream, {"m": b"not json"})
    assert command_key(b"not json") is None
    resend = Resend(client, keys, scan_max=3)

    resend([Outgoing(stream, first)])
    resend([Outgoing(stream, first), Outgoing(stream, first)])
    assert client.xlen(stream) == 2, "the foreign entry, and the command once"

    client.xadd(stream, {"m": b"x"})
    client.xadd(stream, {"m": b"y"})
    resend([Outgoing(stream, second)])
    assert client.xlen(stream) == 4, "over 3 waiting: nothing sent this time"

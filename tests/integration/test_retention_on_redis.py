"""Retention on a real Redis: a finished run is archived and every key of it leaves
Redis (log, snapshot, overflow pages, index entry, request key); an archiver
SIGKILLed after any step leaves the run whole in Redis or archived, and the next
pass finishes it, the run reading back the same; the same request again is
answered with the archived run (never a second run), another request under its id
is refused, and another publisher's same request id is its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import file_publisher, scripted_spec
from test_intake_on_redis import pending, poll_until, rejected, request

from agentledger.events.retention import RetentionPolicy
from agentledger.events.types import RunCancelled, RunCancelRequested
from agentledger.services.adapters.archive.archive import Archive, open_archive
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.reading.archived import ArchivedReader, ArchivedStore
from agentledger.services.adapters.reading.redis_reader import RedisRunReader
from agentledger.services.adapters.store.port import Snapshot
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.entrypoints.run_index import page_of_runs
from agentledger.services.handlers.app import App
from agentledger.services.handlers.archiver import STEPS, Outcome, archive_run, retention_pass
from agentledger.services.handlers.state_cache import StateCache
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import Intake
from agentledger.services.loops.retention import RetentionDuty
from agentledger.services.loops.sweeper import run_sweeper
from agentledger.services.settings import Settings
from tests.contracts.envelopes import T0, envelope, finished

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import os, signal, sys
import redis
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.handlers.archiver import archive_run
from agentledger.services.keys import Keys
from agentledger.services.loops.retention import RetentionDuty
from agentledger.services.loops.sweeper import run_sweeper
from agentledger.services.adapters.broker.membership import Membership

url, prefix, state, run_id, stop_at = sys.argv[1:]
client, keys = redis.Redis.from_url(url), Keys(prefix, 16)

def fault(step, _run):
    if step == stop_at:
        os.kill(os.getpid(), signal.SIGKILL)

archive_run(RedisEventStore(client, keys), open_archive(None, state, prefix),
            RedisRequestKeys(client, keys), run_id, now=2e9, fault=fault)
"""


def _finished_with_request(
    store: RedisEventStore, requests: Any, client: redis.Redis, keys: Keys, run_id: str
) -> None:
    events = finished(run_id, turns=3)
    data = events[0].data.model_copy(update={"publisher": "pub", "request_id": "req-1"})
    events[0] = events[0].model_copy(update={"data": data})
    store.append(run_id, events, expected_seq=0, live=False)
    client.set(requests.name("pub", "req-1"), f"{run_id} digest")


def _reads(client: redis.Redis, keys: Keys, archive: Archive, run_id: str) -> tuple[Any, ...]:
    reader = ArchivedReader(RedisRunReader(client, keys), archive)
    view = ArchivedStore(RedisEventStore(client, keys), archive)
    state = StateCache(view).load(run_id)  # type: ignore[arg-type]
    return (
        reader.exists(run_id), reader.read(run_id), [(r.entry_id, r.envelope) for r in reader.raw(run_id)],
        view.read(run_id, after_seq=1), state.status if state else None, state.seq if state else None,
    )  # fmt: skip


def _run_keys(client: redis.Redis, prefix: str, run_id: str) -> list[bytes]:
    return sorted(k for k in client.scan_iter(f"{prefix}:*") if run_id.encode() in k)


def test_an_archived_run_leaves_no_key_in_redis_and_reads_back_the_same(
    client: redis.Redis, keys: Keys, settings: Settings, prefix: str
) -> None:
    store, requests = RedisEventStore(client, keys), RedisRequestKeys(client, keys)
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    _finished_with_request(store, requests, client, keys, "r-1.s3")
    last = store.read("r-1.s3")[-1]
    store.save_snapshot("r-1.s3", Snapshot(last.seq, last.id, "v", b"state", spec=b"spec"))
    before = _reads(client, keys, archive, "r-1.s3")
    assert len(_run_keys(client, prefix, "r-1.s3")) == 2  # the log and its snapshot

    report = retention_pass(store, archive, requests, RetentionPolicy(0.0), now=T0 + 10)

    assert report.archived == ["r-1.s3"]
    assert _run_keys(client, prefix, "r-1.s3") == []
    assert client.get(requests.name("pub", "req-1")) is None
    assert client.zscore(keys.runs(3), "r-1.s3") is None
    assert _reads(client, keys, archive, "r-1.s3") == before
    assert before[0] is True and before[4] is not None


@pytest.mark.parametrize("step", STEPS)
def test_an_archiver_killed_after_any_step_leaves_the_run_whole_and_the_next_pass_finishes(
    client: redis.Redis, keys: Keys, settings: Settings, prefix: str, step: str
) -> None:
    store, requests = RedisEventStore(client, keys), RedisRequestKeys(client, keys)
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    _finished_with_request(store, requests, client, keys, "r-2.s5")
    before = _reads(client, keys, archive, "r-2.s5")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / '.pkg'}:{ROOT}"}

    child = subprocess.run(
        [sys.executable, "-c", CHILD, settings.redis_url or "", prefix, settings.state_dir, "r-2.s5", step],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip

    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    in_redis = store.export("r-2.s5")
    archived = archive.read("r-2.s5")
    assert in_redis is not None or archived is not None  # never half
    if in_redis is not None:  # whole in Redis: every event and the index entry
        assert len(in_redis.entries) == len(before[1])
        assert client.zscore(keys.runs(5), "r-2.s5") is not None
    assert _reads(client, keys, archive, "r-2.s5") == before
    outcome = archive_run(store, archive, requests, "r-2.s5", now=T0)
    assert outcome is (Outcome.ALREADY if step == "removed" else Outcome.ARCHIVED)
    assert _run_keys(client, prefix, "r-2.s5") == []
    assert client.get(requests.name("pub", "req-1")) is None
    assert _reads(client, keys, archive, "r-2.s5") == before


def _end(app: App, run_id: str) -> None:
    """Cancel the run by its log alone: it is over."""
    seq = len(app.store.read(run_id))
    at = T0 + 1
    app.store.append(
        run_id,
        [
            envelope(run_id, seq + 1, RunCancelRequested(by="ops", source="cli"), at=at),
            envelope(
                run_id,
                seq + 2,
                RunCancelled(requested_at=at, by="ops", side_effects=(), detail="x"),
                at=at,
            ),
        ],
        expected_seq=seq,
        live=False,
    )


def test_the_same_request_after_its_run_was_archived_is_answered_with_that_run(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, tools_dir: Path,
    workspace: Path, signer: Signer, settings: Settings, prefix: str,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    first = request(app, "run-1", spec, workspace)
    publish(client, keys, first, signer=signer)
    poll_until(intake, 1)
    _end(app, "run-1")
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    requests = RedisRequestKeys(client, keys)
    assert archive_run(app.store, archive, requests, "run-1", now=T0 + 10) is Outcome.ARCHIVED

    publish(client, keys, first, signer=signer)  # the same request, stamped anew
    other = spec.model_copy(update={"task": "something else"})
    publish(
        client, keys, first.model_copy(update={"spec": other, "run_id": "run-2"}), signer=signer
    )
    poll_until(intake, 2)

    assert app.store.read("run-1") == []  # answered from the archive, not made again
    assert app.runs.load("run-2") is None
    [moved] = rejected(client, keys)
    assert moved[b"reason"].decode().startswith("replayed: request_id 'run-1' names run 'run-1'")
    assert client.get(keys.request(signer.name, "run-1")) is None  # no key held for it again
    assert pending(client, keys) == 0


def test_redis_memory_after_a_thousand_finished_runs_and_a_pass_is_within_5_percent_of_before(
    tmp_path: Path,
) -> None:
    from tests.bench import retention

    log = finished("template", turns=3)

    measured = retention.measure(Settings(), tmp_path, log, 1000)

    assert (measured["archived"], measured["failed"]) == (1000, 0)
    assert measured["keys_after"] <= measured["keys_before"] + 16  # the shards' empty feeds
    assert measured["after_over_before_pct"] < 5.0, measured
    assert measured["bytes_per_run_before"] > 100 * measured["bytes_per_run_after"], measured


@pytest.fixture
def other(settings: Settings) -> Signer:
    """A second publisher, filed before the intake starts."""
    file_publisher(Path(settings.publishers_path), "other")
    return publishers_file.signer(settings.publishers_path, "other")


def test_another_publisher_can_neither_take_an_archived_runs_id_nor_its_request_id(
    other: Signer, app: App, client: redis.Redis, keys: Keys, intake: Intake, tools_dir: Path,
    workspace: Path, signer: Signer, settings: Settings, prefix: str,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    first = request(app, "run-1", spec, workspace)
    publish(client, keys, first, signer=signer)
    poll_until(intake, 1)
    _end(app, "run-1")
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    archived_log = app.store.read("run-1")
    assert archive_run(
        app.store, archive, RedisRequestKeys(client, keys), "run-1", now=T0 + 10
    ) is (Outcome.ARCHIVED)

    # the same request id and run id from another publisher: its request id is its own,
    # the run id is taken (archived): refused, the archived run untouched
    publish(client, keys, first, signer=other)
    # its own request id, and the archived run's id chosen again: refused too
    publish(client, keys, first.model_copy(update={"request_id": "mine"}), signer=other)
    poll_until(intake, 2)

    reasons = sorted(m[b"reason"].decode() for m in rejected(client, keys))
    assert reasons == ["run 'run-1' exists already (archived)"] * 2
    assert app.store.read("run-1") == []
    found = archive.events("run-1")
    assert found is not None and found[1] == archived_log


def test_a_sweeper_archives_a_finished_run_past_its_age_by_itself(
    app: App, client: redis.Redis, keys: Keys, settings: Settings, prefix: str
) -> None:
    store, requests = RedisEventStore(client, keys), RedisRequestKeys(client, keys)
    _finished_with_request(store, requests, client, keys, "r-3.s2")  # ended in 2023
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    duty = RetentionDuty(app.store, archive, requests, settings, app.clock)
    sweeps = Membership(client, keys.members("sweep"), "host:1:sweeper", ttl_s=5.0)
    stop = threading.Event()
    sweeper = threading.Thread(
        target=run_sweeper, args=(app, sweeps, range(settings.shards), stop, duty), daemon=True
    )
    sweeper.start()
    try:
        deadline = time.monotonic() + 60
        while store.export("r-3.s2") is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        sweeper.join(timeout=30)

    assert store.export("r-3.s2") is None, "the sweeper did not archive the run"
    found = archive.events("r-3.s2")
    assert found is not None and len(found[1]) == len(finished("x", turns=3))


def test_the_runs_list_pages_over_redis_and_the_archive_as_one_index(
    client: redis.Redis, keys: Keys, settings: Settings, prefix: str
) -> None:
    store, requests = RedisEventStore(client, keys), RedisRequestKeys(client, keys)
    archive = open_archive(None, settings.state_dir, prefix)
    assert archive is not None
    ids = [f"r-{n}.s{n % 4}" for n in range(6)]
    for n, run_id in enumerate(ids):  # created one a second, r-0 oldest
        events = [e.model_copy(update={"at": e.at + n}) for e in finished(run_id)]
        store.append(run_id, events, expected_seq=0, live=False)
    for run_id in ids[1:5:2]:  # r-1 and r-3 leave Redis for the archive
        assert archive_run(store, archive, requests, run_id, now=T0 + 100) is Outcome.ARCHIVED
    assert client.zscore(keys.runs(1), "r-1.s1") is None
    reader = ArchivedReader(RedisRunReader(client, keys), archive)
    load = StateCache(ArchivedStore(store, archive)).load_many  # type: ignore[arg-type]

    shown, token = [], None
    while True:
        page = page_of_runs(reader, load, statuses=frozenset(), since=None, until=None,
                            limit=2, token=token)  # fmt: skip
        shown += [s.run_id for s in page.states]
        if (token := page.next_token) is None:
            break
    assert shown == ids[::-1]  # newest first, archived ones in their place, each once

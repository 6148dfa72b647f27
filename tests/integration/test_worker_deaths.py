"""Dead workers, proven against a real Redis and this host's /proc: a worker is
dead only when it is silent in its tool pool's membership past the member ttl
and its process is gone (exited, or a zombie). A worker that keeps beating is
alive however long it holds its call, a SIGSTOPped one is alive, one on another
host is not judged; and the sweeper settles a dead worker's read at its first
look, long before the claim's deadline, while a frozen worker's read waits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from itkit import (
    OffsetClock,
    call,
    capturing,
    claim_without_running,
    create_run,
    drive,
    event_types,
    load,
    proposed,
    queued,
    scripted_spec,
)

from agentledger.events.commands import Pool
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.redis.directory import group
from agentledger.services.adapters.redis.worker_deaths import WorkerDeaths
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops.sweeper import sweep_once

TTL_S = 0.4  # silence past it is waited for: a busy machine only waits longer
PATIENT_S = 60.0  # a beat just sent is within it, however slow the machine
BEATING_TTL_S = 1.5  # a worker beating every 0.1 s is heard within it
HOST = socket.gethostname()


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A process to stand for a worker: killed, stopped or left alone by the test."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait()


def name_of(pid: int) -> str:
    return f"{HOST}:{pid}:abc123"


def claimed(app: App, client: redis.Redis, tools_dir: Path, workspace: Path, worker: str) -> str:
    """A run whose read is claimed by `worker`, which has not run it."""
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_read", key="a")]}, {"end_turn": "done"}], tools_dir=tools_dir
    )
    run_id = create_run(app, client, "run-d", spec, workspace)
    drive(app, run_id, until=proposed)
    state = claim_without_running(app, run_id, "c1", worker=worker)
    assert state.call("c1").claimed_by == worker  # type: ignore[union-attr]
    queued(app, client, run_id)
    return run_id


def membership(client: redis.Redis, keys: Keys, s: RunState, worker: str) -> Membership:
    key = keys.members(group(s.queue, s.toolset, Pool.TOOLS))
    return Membership(client, key, worker, ttl_s=TTL_S)


def test_a_killed_silent_worker_is_dead_and_a_zombie_too(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path,
    child: subprocess.Popen[bytes],
) -> None:  # fmt: skip
    worker = name_of(child.pid)
    s = load(app, claimed(app, client, tools_dir, workspace, worker))
    deaths = WorkerDeaths(client, keys, member_ttl_s=TTL_S)
    patient = WorkerDeaths(client, keys, member_ttl_s=PATIENT_S)  # "within the ttl", however slow
    membership(client, keys, s, worker).beat()
    assert patient(s) == frozenset(), "alive and heard from"
    os.kill(child.pid, signal.SIGKILL)
    time.sleep(0.1)  # not reaped: a zombie
    assert deaths.process_gone(worker)
    assert patient(s) == frozenset(), "gone, but heard from within the ttl: not yet"
    time.sleep(TTL_S + 0.1)
    assert deaths(s) == frozenset({worker})
    child.wait()
    assert deaths(s) == frozenset({worker}), "reaped: no such pid"


def test_a_worker_that_keeps_beating_is_alive_past_the_ttl_even_when_its_pid_is_not_here(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path,
    child: subprocess.Popen[bytes],
) -> None:  # fmt: skip
    """Slow (its call outlasts many ttls) but beating: never dead. Its pid gone from
    our /proc (a worker of another pid namespace under our host name) does not
    make it dead while Redis hears from it."""
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    worker = name_of(child.pid)
    s = load(app, claimed(app, client, tools_dir, workspace, worker))
    deaths = WorkerDeaths(client, keys, member_ttl_s=BEATING_TTL_S)
    beats = membership(client, keys, s, worker)
    until = time.monotonic() + 2 * BEATING_TTL_S
    while time.monotonic() < until:  # a beat, then the question at once: a stall of a
        beats.beat()  # whole ttl between the two on a busy machine is not a lapse we test
        assert deaths(s) == frozenset()
        time.sleep(0.1)
    time.sleep(BEATING_TTL_S + 0.1)
    assert deaths(s) == frozenset({worker}), "silent now, and gone"


def test_a_stopped_worker_is_alive_and_another_hosts_is_not_judged(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path,
    child: subprocess.Popen[bytes],
) -> None:  # fmt: skip
    worker = name_of(child.pid)
    s = load(app, claimed(app, client, tools_dir, workspace, worker))
    deaths = WorkerDeaths(client, keys, member_ttl_s=TTL_S)
    os.kill(child.pid, signal.SIGSTOP)
    time.sleep(TTL_S + 0.1)  # silent: it never beat
    assert not deaths.process_gone(worker)
    assert deaths(s) == frozenset()
    elsewhere = WorkerDeaths(client, keys, member_ttl_s=TTL_S, host="another-host")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert elsewhere(s) == frozenset(), "not this host's to judge"
    assert deaths(s) == frozenset({worker})
    no_proc = WorkerDeaths(client, keys, member_ttl_s=TTL_S, proc=workspace / "no-proc")
    assert no_proc(s) == frozenset(), "no /proc to judge by"


def test_the_sweeper_settles_a_dead_workers_read_at_once_and_a_frozen_ones_at_its_deadline(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path,
    child: subprocess.Popen[bytes],
) -> None:  # fmt: skip
    worker = name_of(child.pid)
    run_id = claimed(app, client, tools_dir, workspace, worker)
    app = replace(app, dead_workers=WorkerDeaths(client, keys, member_ttl_s=TTL_S))
    s = load(app, run_id)
    deadline = s.call("c1").claim_deadline  # type: ignore[union-attr]
    assert deadline is not None
    first_look = app.settings.lease_s + 0.1 - (time.time() - s.updated_at)
    assert time.time() + first_look < deadline, "the look comes before the deadline"
    shards = list(range(app.settings.shards))

    os.kill(child.pid, signal.SIGSTOP)
    time.sleep(TTL_S + 0.1)
    frozen, _ = capturing(app, OffsetClock(first_look))
    sweep_once(frozen, shards)
    assert load(app, run_id).call("c1").status is CallStatus.STARTED, "frozen: it waits"  # type: ignore[union-attr]

    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    later, _ = capturing(app, OffsetClock(first_look + app.settings.lease_s))
    assert time.time() + first_look + app.settings.lease_s < deadline
    sweep_once(later, shards)
    assert event_types(app.store, run_id)[-1] == "ToolCallOutcomeUnknown"
    after = load(app, run_id).call("c1")
    assert after is not None and after.status is CallStatus.OUTCOME_UNKNOWN

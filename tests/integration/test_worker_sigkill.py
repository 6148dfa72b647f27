"""A worker process killed with SIGKILL while a model call is in flight: a fresh
worker process picks the run up from the event log alone (the sweeper, once
the dead worker's claim runs out), the run completes, and every tool ran
exactly once, as counted by the tools themselves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from itkit import QUEUE, TOOL_MODULE, call, executions, scripted_spec

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import ModelRequested
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys
from agentledger.services.settings import Settings

RECOVERY_LIMIT_S = 15.0
MODEL_DELAY_S = 1.5


class Workers:
    """`agentledger workers` processes started by this test, each logging to a file."""

    def __init__(self, env: dict[str, str], logs: Path, tools_dir: Path):
        self._env = env
        self._logs = logs
        self._tools = ["--tools", TOOL_MODULE, "--tool-path", str(tools_dir), "--queue", QUEUE]
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *command: str) -> subprocess.Popen[bytes]:
        """`agentledger workers` serving the test tools, or `command` (`intake`)."""
        log = open(self._logs / f"workers-{len(self.procs) + 1}.log", "wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentledger.services.entrypoints.cli.main",
                *(command or ["workers", *self._tools]),
            ],
            env=self._env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}:\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self._logs.glob("workers-*.log"))
        )


@pytest.fixture
def workers(
    redis_url: str, prefix: str, tmp_path: Path, tools_dir: Path, settings: Settings
) -> Iterator[Workers]:
    env = {
        "AGENTLEDGER_PUBLISHERS": settings.publishers_path,
        **os.environ,
        "REDIS_URL": redis_url,
        "AGENTLEDGER_PREFIX": prefix,
        "AGENTLEDGER_LEASE_S": "1",
        "AGENTLEDGER_SWEEP_INTERVAL_S": "0.2",
        "AGENTLEDGER_MEMBER_TTL_S": "1",
        "AGENTLEDGER_STATE_DIR": str(tmp_path / "state"),
        "PYTHONUNBUFFERED": "1",
    }
    pool = Workers(env, tmp_path, tools_dir)
    try:
        pool.start("intake")  # the workers run none: the run is created by this one
        yield pool
    finally:
        pool.stop_all()  # before the prefix's keys are deleted


def wait_for(
    what: str, check: Callable[[], RunState | None], *, timeout: float, workers: Workers
) -> RunState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = check()
        if state is not None:
            return state
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{workers.output()}")


@pytest.mark.slow
def test_a_run_survives_its_worker_killed_mid_model_call_and_no_tool_runs_twice(
    client: redis.Redis,
    keys: Keys,
    workers: Workers,
    tools_dir: Path,
    toolset: ToolSet,
    workspace: Path,
    signer: Signer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = RedisEventStore(client, keys)
    spec = scripted_spec(
        [
            {
                "tool_use": [
                    call("c1", "it_read", key="a"),
                    call("c2", "it_write", key="b", value="1"),
                ]
            },
            {
                "tool_use": [
                    call("c3", "it_write", key="c", value="2"),
                    call("c4", "it_read", key="d"),
                ],
                "delay_s": MODEL_DELAY_S,
            },
            {"end_turn": "done"},
        ],
        tools_dir=tools_dir,
    )
    first = workers.start()
    publish(client, keys, RunRequested(
        run_id="run-kill", request_id="run-kill", spec=spec, base_dir=str(workspace.parent),
        workspace=str(workspace), queue=QUEUE, toolset=toolset.fingerprint,
    ), signer=signer)  # fmt: skip

    def second_model_call_in_flight() -> RunState | None:
        s = cache_for(store).load("run-kill")
        in_flight = s is not None and s.turns_used == 1 and s.model_claim_deadline is not None
        return s if in_flight else None

    claimed = wait_for(
        "turn 2's model call", second_model_call_in_flight, timeout=20, workers=workers
    )
    os.kill(first.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    first.wait(timeout=10)
    assert (
        cache_for(store).load("run-kill").seq == claimed.seq
    )  # it died before the reply was recorded
    copy = Path(claimed.workspace or "")  # the intake's copy of `workspace`: where the run works
    assert copy != workspace and copy.name == "run-kill"
    assert executions(copy) == {"c1": 1, "c2": 1}

    workers.start()
    moved = wait_for(
        "the run to move on",
        lambda: (s := cache_for(store).load("run-kill")) and (s if s.seq > claimed.seq else None),
        timeout=RECOVERY_LIMIT_S + 5,
        workers=workers,
    )
    recovery_s = time.monotonic() - killed_at
    final = wait_for(
        "the run to end",
        lambda: (s := cache_for(store).load("run-kill")) and (None if s.status.live else s),
        timeout=20,
        workers=workers,
    )
    with capsys.disabled():
        print(f"\n[sigkill] recovery after SIGKILL: {recovery_s:.2f}s (kill -> seq {moved.seq})")

    assert final.status is RunStatus.COMPLETED, f"{final.detail}\n{workers.output()}"
    assert executions(copy) == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}
    requested = [
        (e.data.turn, e.data.attempt)
        for e in store.read("run-kill")
        if isinstance(e.data, ModelRequested)
    ]
    assert requested == [(1, 1), (2, 1), (2, 2), (3, 1)]  # turn 2 was claimed again, once
    assert recovery_s < RECOVERY_LIMIT_S

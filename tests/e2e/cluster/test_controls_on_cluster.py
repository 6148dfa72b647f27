"""The controls and the remaining commands on the cluster: cancel, approve, deny,
reply, resume and abort go through the inbox (its partitions in several slots)
to runs served by `workers` there; `trace`, `dead-letters`, `toolset` and `acl`
read it. (The same controls on one Redis: tests/e2e/test_cli_steering.py.)"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, copy_example, stop_workers, types
from test_cli_on_cluster import start_workers_n, submit


@pytest.fixture
def steering(ccli: Cli, tmp_path: Path) -> Iterator[Path]:
    example = copy_example("steering", tmp_path)
    workers = start_workers_n(ccli, example, processes=1, tools=("steer_tools",))
    yield example
    stop_workers(workers)


def test_every_control_reaches_its_run_on_the_cluster(ccli: Cli, steering: Path) -> None:
    me = ccli.publisher()

    def control(*args: str) -> None:
        done = ccli(*args[:1], "--as", me, *args[1:])
        assert done.returncode == 0, (args, done.stderr)

    def steered(spec: str, until: str, *args: str) -> str:
        """A run submitted, then steered once it reached `until` (one at a time:
        the cooperative tool, 30 s long, is cancelled while it runs)."""
        run_id = submit(ccli, steering / f"{spec}.yaml")
        wait_for(ccli, run_id, until)
        name, *rest = args
        control(name, run_id, *rest)
        return run_id

    cancelled = steered("cancel_cooperative", "ToolCallStarted", "cancel", "enough")
    approved = steered("approval", "ApprovalRequested", "approve", "p1", "ok")
    denied = steered("approval", "ApprovalRequested", "deny", "p1", "not today")
    replied = steered("repeat", "RunEscalated", "reply", "the file is called README.txt")
    resumed = steered("refusal", "RunEscalated", "resume", "go on")
    aborted = steered("refusal", "RunEscalated", "abort", "no point")

    wait_for(ccli, approved, "RunCompleted")
    assert "ToolCallStarted" not in types(wait_for(ccli, denied, "ApprovalDenied"))
    wait_for(ccli, cancelled, "RunCancelled")
    wait_for(ccli, replied, "HumanReplied")
    wait_for(ccli, resumed, "RunResumed")
    assert status_of(ccli, aborted) == "failed"

    for args in (["trace", approved], ["dead-letters"], ["acl"],
                 ["toolset", "--tools", "steer_tools", "--tool-path", str(steering)]):  # fmt: skip
        done = ccli(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)


def wait_for(cli: Cli, run_id: str, event_type: str, timeout_s: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = cli.events(run_id)
        if event_type in types(events):
            return events
        time.sleep(0.2)
    raise AssertionError(f"no {event_type} in {types(cli.events(run_id))}")


def status_of(cli: Cli, run_id: str) -> str:
    return str(json.loads(cli("status", run_id, "--json").stdout)["status"])

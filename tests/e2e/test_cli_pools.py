"""`agentledger workers --list` and `agentledger dead-letters`, as an operator
uses them: the live workers with their queue, tool set and pools; a message
the pools gave up on, listed with its reason and re-driven back to its queue."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from e2ekit import AGENTLEDGER, Cli, copy_example, start_workers, stop_workers


def _listed(cli: Cli, *command: str) -> list[dict[str, Any]]:
    """The list a listing command prints with --json: one object, whose one list is it."""
    done = cli(*command, "--json")
    assert done.returncode == 0, done.stderr
    (printed,) = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    (items,) = [v for v in printed.values() if isinstance(v, list)]
    return list(items)


def _redis(cli: Cli) -> redis.Redis:
    shown = cli("local", "status", "--json")
    url = (
        cli.env.get("REDIS_URL")
        or json.loads(shown.stdout).get("url")
        or "redis://127.0.0.1:6379/0"
    )
    return redis.Redis.from_url(url)


@pytest.fixture
def workers(cli: Cli) -> Iterator[subprocess.Popen[str]]:
    example = copy_example("inventory", cli.cwd)
    proc = start_workers(cli, tools=["inventory_tools"], tool_path=example)
    yield proc
    stop_workers([proc])


def _wait(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_workers_list_shows_the_live_worker_with_its_queue_tool_set_and_pools(
    cli: Cli, workers: subprocess.Popen[str]
) -> None:
    toolset = cli("toolset", "--tools", "inventory_tools", "--tool-path", cli.cwd / "inventory")
    fingerprint = toolset.stdout.strip()
    listed = _wait(lambda: _listed(cli, "workers", "--list"))
    assert len(listed) == 1, listed
    (worker,) = listed
    assert worker["queue"] == "default" and worker["toolset"] == fingerprint
    assert worker["modules"] == ["inventory_tools"]
    assert sorted(worker["pools"]) == ["accept", "model", "tools"]
    assert worker["in_flight"] == 0
    text = cli("workers", "--list")
    assert text.returncode == 0 and worker["worker"] in text.stdout, text.stdout

    stop_workers([workers])  # gone once its heartbeat is older than the membership ttl
    assert _wait(lambda: cli("workers", "--list").stdout.strip() == "no live workers")


def test_an_undecodable_message_is_a_dead_letter_that_can_be_re_driven(
    cli: Cli, workers: subprocess.Popen[str]
) -> None:
    worker = _wait(lambda: _listed(cli, "workers", "--list"))[0]
    client = _redis(cli)
    prefix = cli.env["AGENTLEDGER_PREFIX"]
    stream = f"{prefix}:{{0}}:q:default:{worker['toolset']}:tools"
    client.xadd(stream, {"m": b"\xff not a dramatiq message"})

    letters = _wait(lambda: _listed(cli, "dead-letters"))
    (letter,) = letters
    assert letter["reason"] == "undecodable" and letter["pool"] == "tools"
    assert letter["queue"] == "default" and letter["shard"] == 0 and letter["actor"] == "?"
    assert "re-drive one" in cli("dead-letters").stdout
    assert _listed(cli, "dead-letters", "--queue", "other") == []

    stop_workers([workers])  # nothing takes it again while we look
    moved = cli("dead-letters", "--redrive", letter["handle"], "--json")
    assert moved.returncode == 0, moved.stderr
    assert _listed(cli, "dead-letters") == []
    entries = client.xrange(stream)
    assert [fields[b"m"] for _, fields in entries] == [b"\xff not a dramatiq message"]

    again = cli("dead-letters", "--redrive", letter["handle"])
    assert again.returncode == 2 and "no dead letter" in again.stderr
    bad = cli("dead-letters", "--redrive", "nonsense")
    assert bad.returncode == 2 and "QUEUE:TOOLSET:POOL:SHARD:ENTRY" in bad.stderr
    assert "Traceback" not in again.stderr + bad.stderr


def test_workers_list_with_no_workers_says_so(cli: Cli, tmp_path: Path) -> None:
    done = cli("workers", "--list")
    assert done.returncode == 0 and done.stdout.strip() == "no live workers"
    assert _listed(cli, "workers", "--list") == []


def test_workers_json_says_up_as_one_object(cli: Cli) -> None:
    example = copy_example("inventory", cli.cwd)
    args = ["workers", "--json", "--tools", "inventory_tools", "--tool-path", str(example),
            "--threads", "3", "--log-level", "info"]  # both after the command  # fmt: skip
    proc = subprocess.Popen([*AGENTLEDGER, *args], cwd=cli.cwd, env=cli.env, text=True,
                            stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None
        up = json.loads(proc.stdout.readline())
        assert up["workers"] == "up" and up["queue"] == "default"
        assert up["spare_threads"] == 1, "the model pool's spare slot (the default)"
        assert up["threads"] == 3 + up["spare_threads"]
        assert up["modules"] == ["inventory_tools"] and up["pid"] == proc.pid
    finally:
        stop_workers([proc])

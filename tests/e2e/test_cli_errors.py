"""Every error a user can cause is a message naming what is wrong and an exit
code, never a traceback: bad settings and options (2), an unknown run (2), no
Redis (10), a control no live intake will take (11, said at once, nothing
left queued)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from e2ekit import AGENTLEDGER, Cli, copy_example

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server
from agentledger.services.keys import Keys


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = start_server(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("REDIS_URL", "garbage", "is not a Redis URL"),
        ("REDIS_URL", "http://127.0.0.1:6379/0", "is not a Redis URL"),
        ("REDIS_URL", "redis://127.0.0.1:sixty/0", "the port is not a number"),
        ("REDIS_URL", "redis://127.0.0.1:6379/zero", "the database 'zero' is not a number"),
        ("AGENTLEDGER_SHARDS", "eight", "expected a whole number"),
        ("AGENTLEDGER_LEASE_S", "-2", "must be more than 0"),
    ],
)
def test_a_bad_setting_exits_2_naming_the_variable(
    cli: Cli, variable: str, value: str, says: str
) -> None:
    cli.env[variable] = value
    done = cli("runs")
    assert done.returncode == 2, done.stderr
    assert f"bad configuration: {variable}: " in done.stderr and says in done.stderr
    no_traceback(done)


def test_a_state_folder_the_local_service_cannot_be_made_in_exits_2_naming_it(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    cli.env.pop("REDIS_URL", None)
    cli.env["AGENTLEDGER_PROBE_URL"] = "off"  # the local service, which `runs` may start
    own = cli.env["AGENTLEDGER_STATE_DIR"]
    cli.env["AGENTLEDGER_STATE_DIR"] = str(tmp_path / "a-file" / "state")
    try:
        done = cli("runs", "--json")
    finally:
        cli.env["AGENTLEDGER_STATE_DIR"] = own  # the fixture stops the service of its own
    assert done.returncode == 2, done.stderr
    assert "bad configuration: AGENTLEDGER_STATE_DIR: " in done.stderr, done.stderr
    assert "cannot hold the local Redis service" in done.stderr
    assert json.loads(done.stdout)["variable"] == "AGENTLEDGER_STATE_DIR"
    no_traceback(done)


def test_a_bad_setting_stops_every_kind_of_command_before_it_starts(cli: Cli) -> None:
    cli.env["REDIS_URL"] = "garbage"
    for command in (["status", "r-1", "--json"], ["workers"], ["cancel", "r-1"]):
        done = cli(*command)
        assert done.returncode == 2 and "REDIS_URL" in done.stderr, done.stderr
        no_traceback(done)


def test_a_database_the_server_does_not_have_exits_2(cli: Cli, private_redis: PrivateRedis) -> None:
    cli.env["REDIS_URL"] = private_redis.url.rsplit("/", 1)[0] + "/99"
    done = cli("runs", "--json")
    assert done.returncode == 2
    assert "REDIS_URL" in done.stderr and "refused" in done.stderr
    assert json.loads(done.stdout)["variable"] == "REDIS_URL"
    no_traceback(done)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["runs", "--status", "finished"], "--status: no status 'finished'"),
        (["runs", "--since", "last tuesday"], "cannot read 'last tuesday' as a time"),
        (["runs", "--page", "next"], "--page: 'next' is not a page token"),
        (["tail", "--type", "ToolCallHappened"], "--type: no event type 'ToolCallHappened'"),
        (["runs", "--limit", "many"], "expected a whole number"),
        (["runs", "--limit", "0"], "--limit: must be at least 1, got 0"),
        (["workers", "--threads", "0"], "--threads: must be at least 1, got 0"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_a_bad_option_exits_2_naming_it(cli: Cli, args: list[str], says: str) -> None:
    done = cli(*args)
    assert done.returncode == 2
    assert says in done.stderr
    no_traceback(done)


@pytest.mark.parametrize(
    "command",
    [("status",), ("replay",), ("tail", "--run"), ("context", "--turn", "1", "--json"), ("raw",)],
)
def test_a_read_of_an_unknown_run_says_no_run(cli: Cli, command: tuple[str, ...]) -> None:
    args = [*command[:1], "r-nope", *command[1:]] if command[0] != "tail" else [*command, "r-nope"]
    done = cli(*args)
    assert done.returncode == 2
    assert "no run 'r-nope'" in done.stderr
    no_traceback(done)


def inbox_length(cli: Cli) -> int:
    """Entries waiting in every inbox stream (every partition, every publisher) of the
    CLI's prefix."""
    client = redis.Redis.from_url(cli.env.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    prefix = cli.env["AGENTLEDGER_PREFIX"]
    try:
        streams = list(client.scan_iter(match=f"{prefix}:{{in*}}:inbox:*", count=1000))
        return sum(int(client.xlen(stream)) for stream in streams)
    finally:
        client.close()


@pytest.fixture
def on_private(cli: Cli, private_redis: PrivateRedis) -> Cli:
    cli.env["REDIS_URL"] = private_redis.url
    return cli


def test_a_control_for_an_unknown_run_says_no_run_at_once_and_sends_nothing(
    on_private: Cli,
) -> None:
    done = on_private("cancel", "r-nope")
    # refused before publishing (not after the old 10 s wait for a verdict)
    assert done.returncode == 2 and "no run 'r-nope'; nothing was sent" in done.stderr
    assert inbox_length(on_private) == 0
    no_traceback(done)


def test_a_control_with_no_workers_ever_says_so_at_once_and_sends_nothing(
    on_private: Cli, tmp_path: Path
) -> None:
    example = copy_example("steering", tmp_path)
    submitted = on_private(
        "submit", "--as", on_private.publisher(), "--unserved", example / "approval.yaml"
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "no intake reads the inbox" in submitted.stderr  # submit says so, and queues
    run_id = submitted.stdout.strip()
    # the run is not created yet: the control must name that
    refused = on_private("cancel", "--as", on_private.publisher(), run_id)
    assert refused.returncode == 2 and "no run" in refused.stderr
    assert inbox_length(on_private) == 1


def created(cli: Cli, run_id: str) -> bool:
    """The intake created the run (`status` says no run, or that its request waits in the inbox, before)."""
    done = cli("status", run_id, "--json")
    return done.returncode != 2 and json.loads(done.stdout).get("status") != "awaiting_intake"


def awaits_approval(cli: Cli, run_id: str) -> bool:
    done = cli("status", run_id, "--json")
    return done.returncode != 2 and json.loads(done.stdout).get("status") == "awaiting_approval"


def test_a_control_when_the_workers_have_stopped_says_so_at_once_and_sends_nothing(
    on_private: Cli, tmp_path: Path
) -> None:
    example = copy_example("steering", tmp_path)
    run_id = on_private(
        "submit", "--as", on_private.publisher(), "--unserved", example / "approval.yaml"
    ).stdout.strip()
    tools = ["--tools", "steer_tools", "--tool-path", str(example)]
    started = [
        subprocess.Popen([*AGENTLEDGER, *command], cwd=on_private.cwd, env=on_private.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for command in (["workers", *tools], ["intake"])
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not awaits_approval(on_private, run_id):  # p1 is proposed: approving it is in order
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        for proc in started:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    before = inbox_length(on_private)
    time.sleep(2.5)  # the intakes' heartbeats are older than the membership ttl (2 s)

    publisher = on_private.publisher()
    done = on_private("approve", "--as", publisher, run_id, "p1", "--json")

    # refused before publishing: no wait for an intake that will never come
    assert done.returncode == 11, done.stderr
    assert "no intake reads the inbox" in done.stderr and "nothing was sent" in done.stderr
    assert json.loads(done.stdout)["error"] == "no workers"
    assert inbox_length(on_private) == before, "the message was left queued"
    no_traceback(done)


def test_version_prints_the_version(cli: Cli) -> None:
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("agentledger ")


def test_workers_asking_for_another_lock_partition_count_than_recorded_exit_2(cli: Cli) -> None:
    """The lock table's partition count is fixed per deployment (recorded in Redis at
    the first start): a process asking for another one refuses to start."""
    inventory = copy_example("inventory", cli.cwd)
    client = cli.redis()
    client.hset(Keys(cli.env["AGENTLEDGER_PREFIX"], 16).meta, "lock_partitions", 3)
    client.close()
    cli.env["AGENTLEDGER_LOCK_PARTITIONS"] = "8"
    done = cli("workers", "--tools", "inventory_tools", "--tool-path", inventory)
    assert done.returncode == 2, done.stderr
    assert "bad configuration: AGENTLEDGER_LOCK_PARTITIONS: " in done.stderr
    assert "has 3 partitions" in done.stderr and "asks for 8" in done.stderr
    no_traceback(done)

"""Where the CLI finds its Redis: the local Redis service of the user's state
folder when nothing answers on the probe address — started on first need by
`run` or a read-only command, outliving every command, found from any folder,
stopped only by `agentledger local stop` — and a clear refusal when REDIS_URL
points at nothing or a command may not start a Redis."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest
import redis
from e2ekit import AGENTLEDGER, Cli, copy_example

from agentledger.services.adapters.redis.local_server import (
    DEFAULT_URL,
    answers,
    redis_server_binary,
)


def unused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


@pytest.fixture
def local(cli: Cli) -> Cli:
    """A CLI that finds no Redis but its local service (nothing on the probe address)."""
    cli.env.pop("REDIS_URL", None)
    cli.env["AGENTLEDGER_PROBE_URL"] = unused_url()
    return cli


def local_status(cli: Cli) -> dict:
    done = cli("local", "status", "--json")
    return json.loads(done.stdout)


def test_the_local_service_outlives_run_and_every_folder_finds_the_run(
    local: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)

    done = local("run", "--json", example / "spec.yaml")

    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    assert "using the local Redis service" in done.stderr and "started it" in done.stderr
    status = local_status(local)
    assert status["running"] and status["state_dir"] == str(local.state_dir)
    data = local.state_dir / "redis"
    assert any(p.name.startswith("appendonly") for p in data.iterdir())  # AOF on
    # from any other folder, the same service and the same runs
    elsewhere = Cli(cwd=example / "ws", env=local.env)
    listed = elsewhere("runs")
    assert listed.stdout.split()[0] == run_id, listed.stderr
    assert "(running;" in listed.stderr
    if answers(DEFAULT_URL):  # and the shared server got none of its keys
        shared = redis.Redis.from_url(DEFAULT_URL)
        assert not list(shared.scan_iter(match=f"{local.env['AGENTLEDGER_PREFIX']}:*"))
        shared.close()


def test_a_run_with_neither_redis_url_nor_a_probe_uses_the_local_service_never_the_redis_on_6379(
    cli: Cli, tmp_path: Path
) -> None:
    """`make run` on a machine where some Redis answers on the default port: the
    newcomer's run goes into their own local service, not into that server."""
    cli.env.pop("REDIS_URL", None)
    cli.env.pop("AGENTLEDGER_PROBE_URL", None)
    example = copy_example("inventory", tmp_path)

    done = cli("run", "--json", example / "spec.yaml")

    assert done.returncode == 0, done.stderr
    assert "using the local Redis service" in done.stderr, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    if answers(DEFAULT_URL):  # something answers there (the machine's shared server here)
        shared = redis.Redis.from_url(DEFAULT_URL)
        assert not list(shared.scan_iter(match=f"{cli.env['AGENTLEDGER_PREFIX']}:*"))
        shared.close()


@pytest.mark.skipif(not answers(DEFAULT_URL), reason="no Redis answers at the default address")
def test_a_probe_asked_for_is_used_when_it_answers_and_the_command_says_so(cli: Cli) -> None:
    cli.env.pop("REDIS_URL", None)
    cli.env["AGENTLEDGER_PROBE_URL"] = DEFAULT_URL

    done = cli("runs")

    assert done.returncode == 0, done.stderr
    assert (
        f"using the Redis at {DEFAULT_URL} (AGENTLEDGER_PROBE_URL: it answers there" in done.stderr
    )
    assert not (cli.state_dir / "redis").exists()  # no local service was started


def test_after_local_stop_a_read_command_starts_it_again_from_its_aof(
    local: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)
    run_id = json.loads(local("run", "--json", example / "spec.yaml").stdout)["run_id"]

    stopped = local("local", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    assert not local_status(local)["running"]
    assert local("replay", run_id).returncode == 0  # started again, the log intact
    assert local_status(local)["running"]


def test_submit_workers_and_controls_never_start_a_redis(local: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    for args in (["submit", example / "spec.yaml"], ["workers"], ["cancel", "r-1"]):
        done = local(*args)

        assert done.returncode == 10, done.stdout + done.stderr
        assert "never starts one" in done.stderr and "agentledger local start" in done.stderr
        assert "Traceback" not in done.stderr
    assert not local_status(local)["running"]


def test_commands_started_together_share_one_server(local: Cli) -> None:
    procs = [
        subprocess.Popen([*AGENTLEDGER, "runs"], cwd=local.cwd, env=local.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]  # fmt: skip
    outcomes = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outcomes
    urls = {err.split("at ", 1)[1].split()[0] for _, err in outcomes}
    assert len(urls) == 1
    assert sum("started it" in err for _, err in outcomes) == 1


def test_local_stop_refuses_while_a_tail_follows_and_force_ends_the_tail_cleanly(
    local: Cli,
) -> None:
    assert local("local", "start").returncode == 0
    tail = subprocess.Popen([*AGENTLEDGER, "tail", "--follow"], cwd=local.cwd, env=local.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while local_status(local)["other_clients"] < 1:
            assert time.monotonic() < deadline, "the tail never connected"
            time.sleep(0.1)
        refused = local("local", "stop")
        assert refused.returncode == 2 and "in use" in refused.stderr
        assert local_status(local)["running"]

        assert local("local", "stop", "--force").returncode == 0
        _, err = tail.communicate(timeout=20)
    finally:
        tail.kill()
    assert tail.returncode == 10, err
    assert "lost the connection" in err and "Traceback" not in err


def test_a_redis_url_where_nothing_answers_exits_10_without_a_traceback(cli: Cli) -> None:
    cli.env["REDIS_URL"] = unused_url()
    done = cli("runs")
    assert done.returncode == 10
    assert "no Redis" in done.stderr and "REDIS_URL" in done.stderr
    assert "Traceback" not in done.stderr


def pid_in(pid_file: Path) -> int:
    """The pid a daemon wrote, once it has (it writes the file just after forking)."""
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(OSError, ValueError):
            return int(pid_file.read_text())
        assert time.monotonic() < deadline, f"no pid in {pid_file}"
        time.sleep(0.05)


def lines_until(stream: IO[str], wanted: str, timeout_s: float) -> list[str]:
    """Lines read from `stream` up to the first holding `wanted` (fails at the deadline)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while not any(wanted in line for line in seen):
        left = deadline - time.monotonic()
        assert left > 0, f"no line with {wanted!r} within {timeout_s} s: {seen}"
        if select.select([stream], [], [], left)[0]:
            line = stream.readline()
            assert line, f"the stream ended before {wanted!r}: {seen}"
            seen.append(line)
    return seen


def test_a_command_waits_while_the_local_service_loads_its_aof_and_says_so(local: Cli) -> None:
    assert local("local", "start").returncode == 0
    url = local_status(local)["url"]
    filler = redis.Redis.from_url(url)
    pipe = filler.pipeline(transaction=False)
    for i in range(100_000):
        pipe.set(f"filler:{i}", "x" * 40)
    pipe.execute()
    filler.close()
    assert local("local", "stop").returncode == 0
    # The same service started again by hand, so that it loads slowly: 300 µs a key (30 s
    # in all), answering INFO every 1,024 keys as a server loading a large AOF does.
    data = local.state_dir / "redis"
    port = url.rsplit(":", 1)[1].split("/")[0]
    subprocess.run(
        [redis_server_binary(), "--port", port, "--bind", "127.0.0.1", "--dir", str(data),
         "--appendonly", "yes", "--save", "", "--daemonize", "yes",
         "--pidfile", str(data / "redis.pid"), "--logfile", str(data / "redis.log"),
         "--key-load-delay", "300"],
        check=True, timeout=30,
    )  # fmt: skip
    (data / "url").write_text(url + "\n")
    loading_pid = pid_in(data / "redis.pid")

    status = local_status(local)
    assert status["running"] and status["loading"] and status["keys"] is None
    assert 0 <= status["loading_perc"] < 100
    assert "still loading its AOF" in local("local", "status").stdout

    runs = subprocess.Popen([*AGENTLEDGER, "runs", "--json"], cwd=local.cwd, env=local.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert runs.stderr is not None
        said = lines_until(runs.stderr, "is loading its AOF", timeout_s=60)
        assert f"the local Redis service at {url} is loading its AOF" in said[-1]
        assert runs.poll() is None, "it waits for the load"
        # the server dies mid-load: the command starts the service again, which loads in full
        os.kill(loading_pid, signal.SIGKILL)
        out, err = runs.communicate(timeout=60)
    finally:
        runs.kill()
    assert runs.returncode == 0, err
    assert json.loads(out)["runs"] == [] and "Traceback" not in err
    assert "started it" in err
    told = [line for line in "".join(said + [err]).splitlines() if "is loading its AOF" in line]
    assert len(told) == len({line.split(" is loading")[0] for line in told})  # once a server
    status = local_status(local)
    assert not status["loading"] and status["keys"] == 100_000

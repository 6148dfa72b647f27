"""Where the CLI finds its Redis: a private server when nothing answers on the
probe address, and a clear refusal when REDIS_URL points at nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import redis
from e2ekit import Cli, copy_example

from services.adapters.redis.local_server import DEFAULT_URL, answers


def unused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


def test_with_nothing_on_the_probe_address_a_private_server_keeps_the_log(
    cli: Cli, tmp_path: Path
) -> None:
    cli.env.pop("REDIS_URL", None)
    cli.env["AGENTLEDGER_PROBE_URL"] = unused_url()
    example = copy_example("inventory", tmp_path)

    code, summary = cli.run_json(example / "spec.yaml")

    assert code == 0, summary
    data = tmp_path / ".agentledger" / "redis"
    assert any(p.name.startswith("appendonly") for p in data.iterdir())  # AOF on
    assert not (data / "url").exists()  # the server was stopped with the command
    # a later command starts it again from its AOF and finds the run
    assert cli.runs() == [summary["run_id"]]
    assert cli("replay", summary["run_id"]).returncode == 0
    if answers(DEFAULT_URL):  # and the shared server got none of its keys
        shared = redis.Redis.from_url(DEFAULT_URL)
        assert not list(shared.scan_iter(match=f"{cli.env['AGENTLEDGER_PREFIX']}:*"))
        shared.close()


def test_a_redis_url_where_nothing_answers_exits_10_without_a_traceback(cli: Cli) -> None:
    cli.env["REDIS_URL"] = unused_url()
    done = cli("runs")
    assert done.returncode == 10
    assert "no Redis" in done.stderr
    assert "Traceback" not in done.stderr

"""The pools and a publisher under the Redis ACL users `agentledger acl --apply`
sets, on a private redis-server (7 or later) with ACLs: a run published by the
publisher user is created, driven and completed by workers connected as the
workers user and read by ops connected as the ops user — and each of them is
refused outside its rights: the publisher can only XADD to the inbox, the
workers touch no key outside the prefix and run no admin command, ops write
nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import QUEUE, TOOL_MODULE, call, executions, scripted_spec

from events.status import RunStatus
from schemas.inbox import RunRequested
from services.adapters.publishers.publishers_file import Signer
from services.adapters.redis.local_server import answers, free_port
from services.adapters.store.redis_store import RedisEventStore
from services.keys import Keys
from services.loops.intake import publish
from services.settings import Settings

CLI = [sys.executable, "-m", "services.entrypoints.cli.main"]


def _redis7() -> str | None:
    """A redis-server of version 7 or later (subcommand ACL rules), if the machine has one."""
    for candidate in ("/usr/bin/redis-server", shutil.which("redis-server")):
        if not candidate or not os.path.exists(candidate):
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"v=(\d+)\.", out)
        if found and int(found.group(1)) >= 7:
            return candidate
    return None


@pytest.fixture
def admin_url(tmp_path: Path) -> Iterator[str]:
    binary = _redis7()
    if binary is None:
        pytest.skip("needs a redis-server 7 or later (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", tempfile.mkdtemp(dir=tmp_path)],
        stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while not answers(url, timeout=0.2):
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    return {
        **base, "AGENTLEDGER_PREFIX": settings.prefix, "AGENTLEDGER_STATE_DIR": str(tmp_path / "state"),
        "AGENTLEDGER_PUBLISHERS": settings.publishers_path, "AGENTLEDGER_MEMBER_TTL_S": "1",
        "AGENTLEDGER_PROBE_URL": "off", "PYTHONUNBUFFERED": "1",
    }  # fmt: skip


@pytest.fixture
def users(admin_url: str, env: dict[str, str]) -> dict[str, str]:
    """role -> the URL it connects with, as `agentledger acl --apply` printed it."""
    done = subprocess.run([*CLI, "acl", "--apply", "--json"], env={**env, "REDIS_URL": admin_url},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {role: row["url"] for role, row in json.loads(done.stdout)["users"].items()}


@pytest.fixture
def workers(
    users: dict[str, str], env: dict[str, str], tools_dir: Path, tmp_path: Path
) -> Iterator[Callable[[], str]]:
    log = tmp_path / "workers.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CLI, "workers", "--tools", TOOL_MODULE, "--tool-path", str(tools_dir), "--queue", QUEUE],
            env={**env, "REDIS_URL": users["workers"]}, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "workers up" not in log.read_text():
            assert proc.poll() is None, f"the workers stopped:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the workers did not start:\n{log.read_text()}"
            time.sleep(0.1)
        yield log.read_text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def refused(client: redis.Redis, *command: Any) -> bool:
    try:
        client.execute_command(*command)
    except redis.exceptions.NoPermissionError:
        return True
    except redis.ResponseError as exc:  # a command inside a script: refused as the caller's
        return "can't run this command" in str(exc)
    return False


@pytest.mark.slow
def test_pools_and_a_publisher_work_under_their_acl_users_and_each_is_refused_outside_its_rights(
    users: dict[str, str], workers: Callable[[], str], env: dict[str, str], signer: Signer,
    settings: Settings, tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    keys = Keys(settings.prefix, settings.shards)
    publisher = redis.Redis.from_url(users["publisher"])
    ops = redis.Redis.from_url(users["ops"])
    as_workers = redis.Redis.from_url(users["workers"])
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_write", key="a", value="1")]}, {"end_turn": "done"}],
        tools_dir=tools_dir,
    )
    request = RunRequested(run_id="run-acl", request_id="run-acl", spec=spec, queue=QUEUE,
                           base_dir=str(workspace.parent), workspace=str(workspace))  # fmt: skip
    publish(publisher, keys, request, signer=signer)

    store = RedisEventStore(ops, keys)  # ops reads the log (its tail script included)
    deadline = time.monotonic() + 30
    while not any(e.type == "RunCompleted" for e in store.read("run-acl")):
        assert time.monotonic() < deadline, f"no completion: {[e.type for e in store.read('run-acl')]}\n{workers()}"
        time.sleep(0.1)
    copy = Path(store.read("run-acl")[0].data.workspace)  # the intake's copy: where the run worked
    assert executions(copy) == {"c1": 1}  # the tool ran once
    status = subprocess.run([*CLI, "status", "run-acl", "--json"], env={**env, "REDIS_URL": users["ops"]},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == RunStatus.COMPLETED
    assert "NOPERM" not in workers() and "no permissions" not in workers()

    run_key, inbox, meta = keys.run("run-acl"), keys.inbox(0), keys.meta
    checks = {
        "publisher reads the inbox": refused(publisher, "XRANGE", inbox, "-", "+"),
        "publisher reads its group": refused(publisher, "XREADGROUP", "GROUP", "intake", "x", "STREAMS", inbox, ">"),
        "publisher appends to a run": refused(publisher, "XADD", run_key, "*", "f", "v"),
        "publisher adds to the rejected stream": refused(publisher, "XADD", keys.rejected(0), "*", "f", "v"),
        "publisher reads a key": refused(publisher, "GET", meta),
        "publisher deletes the inbox": refused(publisher, "DEL", inbox),
        "publisher flushes": refused(publisher, "FLUSHALL"),
        "workers write outside the prefix": refused(as_workers, "SET", "elsewhere:key", "1"),
        "workers read outside the prefix": refused(as_workers, "GET", "elsewhere:key"),
        "workers flush": refused(as_workers, "FLUSHALL"),
        "workers configure": refused(as_workers, "CONFIG", "SET", "appendonly", "no"),
        "workers list every key": refused(as_workers, "KEYS", "*"),
        "workers change ACLs": refused(as_workers, "ACL", "SETUSER", "x", "on"),
        "workers flush the scripts": refused(as_workers, "SCRIPT", "FLUSH"),
        "workers shut the server down": refused(as_workers, "SHUTDOWN", "NOSAVE"),
        "ops append to a run": refused(ops, "XADD", run_key, "*", "f", "v"),
        "ops publish": refused(ops, "XADD", inbox, "*", "message", "{}"),
        "ops delete a run": refused(ops, "DEL", run_key),
        "ops write in a script": refused(ops, "EVAL", "return redis.call('DEL', KEYS[1])", 1, run_key),
        "ops flush": refused(ops, "FLUSHALL"),
        "ops read outside the prefix": refused(ops, "GET", "elsewhere:key"),
    }  # fmt: skip
    assert [what for what, ok in checks.items() if not ok] == []
    assert ops.exists(run_key) and ops.xlen(run_key) > 3, "nothing ops tried happened"

    cancel = subprocess.run([*CLI, "cancel", "run-acl", "--as", "it-publisher"],
                            env={**env, "REDIS_URL": users["ops"]}, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert cancel.returncode == 2 and "not permitted" in cancel.stderr, cancel.stderr
    assert "Traceback" not in cancel.stderr

"""The roles under the Redis ACL users `agentledger acl --apply` sets, on a private
redis-server (7 or later) with ACLs: a run published by its publisher's user is
created by an intake connected as the intake user, driven and completed by
workers connected as the workers user, and read by ops connected as the ops
user, which runs no script. Each is refused outside its rights: a publisher can
only XADD to its own inbox streams (not another's), so its MAXLEN 0, its
maximal explicit id and its flood of 1 MiB fields hurt only itself while
another publisher's requests still create runs; the workers reach no inbox;
ops writes nothing and cannot EVAL. Loaded as an ACL file (deploy/redis-acl's
form), the rules turn Redis's `default` user off."""

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
from itkit import QUEUE, TOOL_MODULE, call, executions, file_publisher, scripted_spec

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.acl import DEFAULT_OFF, rules
from agentledger.services.adapters.redis.local_server import answers, free_port
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.handlers.archiver import Outcome, archive_run
from agentledger.services.keys import Keys
from agentledger.services.settings import Settings

CLI = [sys.executable, "-m", "agentledger.services.entrypoints.cli.main"]
MAX_ID = "18446744073709551615-18446744073709551615"


def redis7() -> str | None:
    """A redis-server of version 7 or later (selectors, subcommand rules), if the machine has one."""
    for candidate in ("/usr/bin/redis-server", shutil.which("redis-server")):
        if not candidate or not os.path.exists(candidate):
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"v=(\d+)\.", out)
        if found and int(found.group(1)) >= 7:
            return candidate
    return None


def start_redis7(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = redis7()
    if binary is None:
        pytest.skip("needs a redis-server 7 or later (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", tempfile.mkdtemp(dir=tmp_path), *extra],
        stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, port


@pytest.fixture
def admin_url(tmp_path: Path) -> Iterator[str]:
    proc, port = start_redis7(tmp_path)
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
def other(settings: Settings) -> Signer:
    """A second publisher, filed before the users are made: it gets a user of its own."""
    file_publisher(Path(settings.publishers_path), "wrecker")
    return publishers_file.signer(settings.publishers_path, "wrecker")


@pytest.fixture
def users(admin_url: str, env: dict[str, str], other: Signer) -> dict[str, str]:
    """user name -> the URL it connects with, as `agentledger acl --apply` printed it."""
    done = subprocess.run([*CLI, "acl", "--apply", "--json"], env={**env, "REDIS_URL": admin_url},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert "default" in printed["default_user"]  # it says the default user stays on
    return {name: row["url"] for name, row in printed["users"].items()}


def start(
    command: list[str], url: str, env: dict[str, str], log: Path, up: str
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen([*CLI, *command], env={**env, "REDIS_URL": url}, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 30
    while up not in log.read_text():
        assert proc.poll() is None, f"{command[0]} stopped:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"{command[0]} did not start:\n{log.read_text()}"
        time.sleep(0.1)
    return proc


@pytest.fixture
def roles(
    users: dict[str, str], env: dict[str, str], tools_dir: Path, tmp_path: Path, settings: Settings
) -> Iterator[Callable[[], str]]:
    """Workers as the workers user and an intake as the intake user; their output."""
    head = settings.prefix
    workers_log, intake_log = tmp_path / "workers.log", tmp_path / "intake.log"
    tools = ["workers", "--tools", TOOL_MODULE, "--tool-path", str(tools_dir), "--queue", QUEUE]
    procs = [start(tools, users[f"{head}-workers"], env, workers_log, "workers up")]
    try:
        procs.append(start(["intake"], users[f"{head}-intake"], env, intake_log, "intake up"))
        yield lambda: workers_log.read_text() + intake_log.read_text()
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)


def refused(client: redis.Redis, *command: Any) -> bool:
    try:
        client.execute_command(*command)
    except redis.exceptions.NoPermissionError:
        return True
    except redis.ResponseError as exc:  # a command inside a script: refused as the caller's
        return any(
            words in str(exc)
            for words in ("can't run this command", "can't access", "no permissions")
        )
    return False


def until(
    what: str, check: Callable[[], bool], output: Callable[[], str], timeout_s: float = 30
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}\n{output()}"
        time.sleep(0.1)


@pytest.mark.slow
def test_each_role_works_under_its_acl_user_and_is_refused_outside_its_rights(
    users: dict[str, str], roles: Callable[[], str], env: dict[str, str], signer: Signer,
    other: Signer, settings: Settings, tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    keys, head = Keys(settings.prefix, settings.shards), settings.prefix
    publisher = redis.Redis.from_url(users[f"{head}-pub-{signer.name}"])
    ops = redis.Redis.from_url(users[f"{head}-ops"])
    as_workers = redis.Redis.from_url(users[f"{head}-workers"])
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_write", key="a", value="1")]}, {"end_turn": "done"}],
        tools_dir=tools_dir,
    )
    request = RunRequested(run_id="run-acl", request_id="run-acl", spec=spec, queue=QUEUE,
                           base_dir=str(workspace.parent), workspace=str(workspace))  # fmt: skip
    publish(publisher, keys, request, signer=signer)

    store = RedisEventStore(ops, keys)  # ops reads the log: plain reads, no script
    until(
        "the run completed",
        lambda: any(e.type == "RunCompleted" for e in store.read("run-acl")),
        roles,
    )
    copy = Path(store.read("run-acl")[0].data.workspace)  # the intake's copy: where the run worked
    assert executions(copy) == {"c1": 1}  # the tool ran once
    status = subprocess.run([*CLI, "status", "run-acl", "--json"], env={**env, "REDIS_URL": users[f"{head}-ops"]},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == RunStatus.COMPLETED
    for read in (
        ["runs", "--json"],
        ["tail", "--run", "run-acl", "--json"],
        ["workers", "--list", "--json"],
    ):
        done = subprocess.run([*CLI, *read], env={**env, "REDIS_URL": users[f"{head}-ops"]},
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, (read, done.stderr)
    assert "NOPERM" not in roles() and "no permissions" not in roles()

    run_key, meta = keys.run("run-acl"), keys.meta
    own, theirs = keys.inbox(0, signer.name), keys.inbox(0, other.name)
    checks = {
        "publisher writes another publisher's stream": refused(publisher, "XADD", theirs, "*", "f", "v"),
        "publisher writes the old shared inbox": refused(publisher, "XADD", f"{head}:{{in0}}:inbox", "*", "f", "v"),
        "publisher reads its stream": refused(publisher, "XRANGE", own, "-", "+"),
        "publisher reads its group": refused(publisher, "XREADGROUP", "GROUP", "intake", "x", "STREAMS", own, ">"),
        "publisher appends to a run": refused(publisher, "XADD", run_key, "*", "f", "v"),
        "publisher adds to the rejected stream": refused(publisher, "XADD", keys.rejected(0), "*", "f", "v"),
        "publisher reads a key": refused(publisher, "GET", meta),
        "publisher deletes its stream": refused(publisher, "DEL", own),
        "publisher flushes": refused(publisher, "FLUSHALL"),
        "workers write an inbox stream": refused(as_workers, "XADD", own, "*", "f", "v"),
        "workers write a request id": refused(as_workers, "SET", keys.request("publisher-acl", "run-acl"), "x"),
        "workers write a request id by script": refused(
            as_workers, "EVAL", "return redis.call('SET', KEYS[1], 'x')", 1, keys.request("publisher-acl", "run-acl")),
        "workers read a request id": not refused(as_workers, "GET", keys.request("publisher-acl", "run-acl")),
        "workers pose as an intake": refused(as_workers, "ZADD", keys.intake_members(), "1", "w"),
        "workers write outside the prefix": refused(as_workers, "SET", "elsewhere:key", "1"),
        "workers flush": refused(as_workers, "FLUSHALL"),
        "workers configure": refused(as_workers, "CONFIG", "SET", "appendonly", "no"),
        "workers list every key": refused(as_workers, "KEYS", "*"),
        "workers change ACLs": refused(as_workers, "ACL", "SETUSER", "x", "on"),
        "workers flush the scripts": refused(as_workers, "SCRIPT", "FLUSH"),
        "workers shut the server down": refused(as_workers, "SHUTDOWN", "NOSAVE"),
        "ops append to a run": refused(ops, "XADD", run_key, "*", "f", "v"),
        "ops publish": refused(ops, "XADD", own, "*", "message", "{}"),
        "ops delete a run": refused(ops, "DEL", run_key),
        "ops eval a loop": refused(ops, "EVAL", "while true do end", 0),
        "ops eval read-only": refused(ops, "EVAL_RO", "return 1", 0),
        "ops load a script": refused(ops, "SCRIPT", "LOAD", "return 1"),
        "ops call a function": refused(ops, "FCALL", "f", 0),
        "ops flush": refused(ops, "FLUSHALL"),
        "ops read outside the prefix": refused(ops, "GET", "elsewhere:key"),
    }  # fmt: skip
    assert [what for what, ok in checks.items() if not ok] == []
    assert ops.exists(run_key) and ops.xlen(run_key) > 3, "nothing ops tried happened"

    cancel = subprocess.run([*CLI, "cancel", "run-acl", "--as", signer.name],
                            env={**env, "REDIS_URL": users[f"{head}-ops"]}, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    # the CLI reads the run first: a control of an ended run is refused before anything is
    # published (that ops may not publish at all is "ops publish" above)
    assert cancel.returncode == 2 and "already ended completed" in cancel.stderr, cancel.stderr
    assert "Traceback" not in cancel.stderr

    # retention as the workers' sweeper does it, under the workers' user: the run and its
    # request key leave Redis
    archive = open_archive(None, settings.state_dir, settings.prefix)
    assert archive is not None
    archived = archive_run(RedisEventStore(as_workers, keys), archive,
                           RedisRequestKeys(as_workers, keys), "run-acl", now=time.time())  # fmt: skip
    assert archived is Outcome.ARCHIVED
    assert not ops.exists(run_key) and not ops.exists(keys.request(signer.name, "run-acl"))


@pytest.mark.slow
def test_what_a_publisher_does_to_its_own_streams_hurts_only_itself(
    users: dict[str, str], roles: Callable[[], str], signer: Signer, other: Signer,
    settings: Settings, tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    keys, head = Keys(settings.prefix, settings.shards), settings.prefix
    publisher = redis.Redis.from_url(users[f"{head}-pub-{signer.name}"])
    wrecker = redis.Redis.from_url(users[f"{head}-pub-{other.name}"])
    admin = redis.Redis.from_url(users[f"{head}-ops"])
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    flood = {f"f{i}": b"x" * (1 << 20) for i in range(10)} | {"message": b"y" * (1 << 20)}
    runs = [f"run-{i}" for i in range(12)]
    for i, run_id in enumerate(runs):
        publish(publisher, keys, RunRequested(run_id=run_id, request_id=run_id, spec=spec, queue=QUEUE,
                base_dir=str(workspace.parent), workspace=str(workspace)), signer=signer)  # fmt: skip
        for part in range(keys.inbox_partitions):  # what dropped others' requests before
            wrecker.xadd(keys.inbox(part, other.name), {"m": "x"}, maxlen=0)  # type: ignore[arg-type]
        if i < 3:  # 10 x 1 MiB fields a time, into its own stream
            wrecker.xadd(keys.inbox(i % keys.inbox_partitions, other.name), flood)  # type: ignore[arg-type]
    for part in range(keys.inbox_partitions):  # what made every later XADD fail for good
        wrecker.xadd(keys.inbox(part, other.name), {"m": "x"}, id=MAX_ID)  # type: ignore[arg-type]
    publish(publisher, keys, RunRequested(run_id="run-after", request_id="run-after", spec=spec,
            queue=QUEUE, base_dir=str(workspace.parent), workspace=str(workspace)), signer=signer)  # fmt: skip

    store = RedisEventStore(admin, keys)
    for run_id in [*runs, "run-after"]:
        until(f"{run_id} created", lambda r=run_id: bool(store.read(r)), roles)  # type: ignore[misc]
    with pytest.raises(redis.ResponseError):  # the wrecker's own streams take no more
        wrecker.xadd(keys.inbox(0, other.name), {"message": "z"})  # type: ignore[arg-type]
    rejected = sum(admin.xlen(keys.rejected(p)) for p in range(keys.inbox_partitions))
    kept = sum(admin.memory_usage(keys.rejected(p)) or 0 for p in range(keys.inbox_partitions))
    assert rejected >= 3 and kept < 256 << 10, (rejected, kept)  # 33 MiB sent, < 256 kB kept


def test_the_acl_file_form_turns_the_default_user_off(tmp_path: Path) -> None:
    acl = tmp_path / "users.acl"
    lines = [DEFAULT_OFF, "user admin on >admin-pw ~* &* +@all"]
    lines += [u.file_line(f">pw-{u.role}") for u in rules("al", ["billing-svc"])]
    acl.write_text("\n".join(lines) + "\n")
    proc, port = start_redis7(tmp_path, "--aclfile", str(acl))
    try:
        admin = f"redis://admin:admin-pw@127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not answers(admin, timeout=0.2):
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        with pytest.raises(redis.AuthenticationError):  # no user: the default one, which is off
            redis.Redis(port=port).ping()
        listed = redis.Redis.from_url(admin).acl_list()
        assert any(line.startswith("user default off") for line in listed), listed
        ops = redis.Redis(port=port, username="al-ops", password="pw-ops")
        assert refused(ops, "EVAL", "while true do end", 0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_scaler_user_runs_what_kedas_redis_streams_scaler_runs_and_nothing_else(
    tmp_path: Path,
) -> None:
    """deploy/redis-acl/users.acl's scaler line, loaded as the ACL file: KEDA's scaler
    connects (HELLO or AUTH, PING), reads the version (INFO) and each pool stream's
    lag (XINFO GROUPS) and pending entries (XPENDING); it reads no entry, writes
    nothing, and reaches no other key (a run's log, the inbox)."""
    line = next(u for u in rules("al", ["billing-svc"]) if u.role == "scaler").file_line(">pw-sc")
    shipped = (
        Path(__file__).resolve().parents[2] / "deploy" / "redis-acl" / "users.acl"
    ).read_text()
    assert line.replace(">pw-sc", ">change-me-al-scaler") in shipped.splitlines()
    acl = tmp_path / "users.acl"
    acl.write_text("\n".join([DEFAULT_OFF, "user admin on >admin-pw ~* &* +@all", line]) + "\n")
    proc, port = start_redis7(tmp_path, "--aclfile", str(acl))
    try:
        admin_url = f"redis://admin:admin-pw@127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not answers(admin_url, timeout=0.2):
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        admin = redis.Redis.from_url(admin_url)
        stream, run_log = "al:{2}:q:default:0123456789abcdef:tools", "al:{2}:run:r-1"
        admin.xgroup_create(stream, "workers", id="0", mkstream=True)
        admin.xadd(stream, {"m": "1"})
        admin.xadd(run_log, {"e": "1"})
        admin.xgroup_create(run_log, "g", id="0")
        scaler = redis.Redis(port=port, username="al-scaler", password="pw-sc", protocol=3)
        assert scaler.ping()
        assert scaler.info("server")["redis_version"]
        (group,) = scaler.xinfo_groups(stream)
        assert (group["name"], group["lag"]) == (b"workers", 1)
        assert scaler.xpending(stream, "workers")["pending"] == 0
        for command in (
            ("XRANGE", stream, "-", "+"), ("XADD", stream, "*", "m", "2"), ("XLEN", stream),
            ("XREADGROUP", "GROUP", "workers", "c", "STREAMS", stream, ">"),
            ("XINFO", "STREAM", stream), ("XINFO", "GROUPS", run_log), ("XPENDING", run_log, "g"),
            ("GET", "al:meta"), ("KEYS", "*"), ("CONFIG", "GET", "*"), ("ACL", "LIST"),
            ("XGROUP", "DESTROY", stream, "workers"), ("DEL", stream),
        ):  # fmt: skip
            assert refused(scaler, *command), command
    finally:
        proc.terminate()
        proc.wait(timeout=10)

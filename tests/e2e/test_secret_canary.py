"""A secret canary through the whole system: a run whose tools read a secret
(declared in the spec's `secrets`), print it, log it, run a command that
prints it, pass it as a write's argument (its idempotency key) and return it;
its acceptance check prints it too. On a private redis-server with
`appendonly yes`, the canary must appear nowhere but `raw`: not in anything
the CLI prints, not in the worker's output or logs, not in any Redis key name,
not in the AOF."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from e2ekit import AGENTLEDGER, SETTLING, Cli, start_intake, stop_workers, types

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server
from tests.standin.messages_api import MessagesStandin, Streamed, Text, ToolUse

CANARY_VAR = "AL_CANARY_TOKEN"
TOOLS = '''"""Tools that try every way to leak the token they read."""

import logging
import sys
from pathlib import Path

from agentledger import ToolContext, tool

log = logging.getLogger("canary_tools")


@tool(read_only=True, reads=lambda a: ["canary:token"])
def read_token(ctx: ToolContext) -> dict:
    """Read the token and shout it everywhere."""
    token = Path(ctx.workspace, "token.txt").read_text().strip()
    print("the token is", token)
    print("on stderr:", token, file=sys.stderr)
    log.warning("read the token %s", token)
    done = ctx.run(["sh", "-c", "cat token.txt; cat token.txt >&2"])
    return {"token": token, "command_said": done.stdout}


@tool(writes=lambda a: ["canary:stored"], key_fields=["token"])
def store_token(token: str, ctx: ToolContext) -> dict:
    """Store a token: its idempotency key is built from it."""
    print("storing", token)
    log.warning("storing %s", token)
    return {"stored": token}
'''


SPEC = f"""task: "Read the token and store it."
workspace: ./ws
copy_workspace: true
tools: [canary_tools]
secrets: [{CANARY_VAR}]
principal: {{id: alice, tenant: shop-1}}
budgets: {{max_turns: 4}}
model: {{anthropic: {{model: claude-standin-1, max_tokens: 1024}}}}
acceptance:
  - command: "cat token.txt"
"""


def replies(token: str) -> list[Streamed]:
    """The model repeats the token (as if it had seen it): in a tool call's
    arguments (store_token's idempotency key) and in its last words."""
    return [
        Streamed((ToolUse("toolu_c1", "read_token", {}),), stop_reason="tool_use"),
        Streamed((ToolUse("toolu_c2", "store_token", {"token": token}),), stop_reason="tool_use"),
        Streamed((Text(f"The token {token} is stored."),)),
    ]


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = start_server(tmp_path / "redis", fsync="always")  # appendonly yes, every write on disk
    try:
        yield server
    finally:
        server.stop()


def test_a_secret_canary_appears_nowhere_but_raw(
    cli: Cli, tmp_path: Path, private_redis: PrivateRedis
) -> None:
    token = f"canary-{uuid.uuid4().hex}"
    api_key = f"sk-ant-canary-{uuid.uuid4().hex}"  # a second canary: the provider key
    cli.env.update({"REDIS_URL": private_redis.url, CANARY_VAR: token, "ANTHROPIC_API_KEY": api_key,
                    "NO_PROXY": "127.0.0.1"})  # fmt: skip
    project = cli.cwd / "canary"
    (project / "ws").mkdir(parents=True)
    (project / "ws" / "token.txt").write_text(token + "\n")
    (project / "canary_tools.py").write_text(TOOLS)
    (project / "spec.yaml").write_text(SPEC)
    worker_log = tmp_path / "worker-output.txt"
    printed: list[str] = []

    def said(*args: str) -> subprocess.CompletedProcess[str]:
        done = cli(*args)
        printed.extend([done.stdout, done.stderr])
        return done

    said(
        "publishers",
        "add",
        "canary-svc",
        "--principal",
        "alice@shop-1",
        "--workspaces",
        str(project),
    )
    with MessagesStandin() as api, worker_log.open("w") as out:
        cli.env["ANTHROPIC_BASE_URL"] = api.url
        api.play(*replies(token))
        worker = subprocess.Popen(
            [*AGENTLEDGER, "--log-level", "info", "workers", "--tools", "canary_tools",
             "--tool-path", str(project)],
            cwd=cli.cwd, env=cli.env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        intake = subprocess.Popen(  # its output is checked too
            [*AGENTLEDGER, "--log-level", "info", "intake"],
            cwd=cli.cwd, env=cli.env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            submitted = said("submit", "--as", "canary-svc", "--unserved", project / "spec.yaml")
            assert submitted.returncode == 0, submitted.stderr
            run_id = submitted.stdout.strip()
            status = _until_ended(cli, run_id)
            assert status == "completed", (status, worker_log.read_text()[-2000:])
            for args in (
                ("status", run_id), ("status", run_id, "--json"), ("runs",), ("runs", "--json"),
                ("tail", "--run", run_id), ("tail", "--run", run_id, "--json"),
                ("replay", run_id), ("context", run_id, "--turn", "3"),
            ):  # fmt: skip
                said(*args)
        finally:
            for proc in (worker, intake):
                proc.terminate()
                proc.wait(timeout=15)
    raw = cli("raw", run_id).stdout  # the one unredacted view (redacted here: not kept)

    client = redis.Redis.from_url(private_redis.url)
    names = [k.decode(errors="replace") for k in client.scan_iter(count=1000)]
    client.close()
    aof = b"".join(p.read_bytes() for p in sorted(private_redis.data_dir.rglob("*")) if p.is_file())
    output = worker_log.read_text()
    hits = {
        "CLI output": sum(text.count(c) for text in printed for c in (token, api_key)),
        "worker output and logs": output.count(token) + output.count(api_key),
        "Redis key names": sum(name.count(c) for name in names for c in (token, api_key)),
        "AOF": aof.count(token.encode()) + aof.count(api_key.encode()),
    }
    print(f"\nsecret canary: hits {hits} over {len(names)} keys, {len(aof):,} AOF bytes, "
          f"{len(output):,} bytes of worker output; raw has {raw.count(token)}")  # fmt: skip
    # the tool's result reached the model redacted, as the context view always is
    assert len(api.requests) == 3 and f"[REDACTED:{CANARY_VAR}]" in json.dumps(api.bodies()[1])
    assert hits == dict.fromkeys(hits, 0)
    assert f"[REDACTED:{CANARY_VAR}]" in "".join(printed), "the tools did say it: redacted"
    assert "the token is" not in output and "on stderr:" not in output, "tool prints are captured"
    assert f"storing [REDACTED:{CANARY_VAR}]" in output, "the tool's log line is there, redacted"
    assert len(names) > 10 and len(aof) > 10_000, "there was something to search"


def _until_ended(cli: Cli, run_id: str, timeout_s: float = 60) -> str:
    """The run's status once its log says it ended or waits for a person (one
    `tail --follow` waits: no `status` process every 0.3 s)."""
    with contextlib.suppress(AssertionError):  # the status says what it came to
        cli.wait_events(run_id, lambda events: bool(SETTLING & set(types(events))), timeout_s)
    done = cli("status", run_id, "--json")
    return (
        str(json.loads(done.stdout).get("status"))
        if done.stdout.strip().startswith("{")
        else "unknown"
    )


# --- the process's own secrets, encoded --------------------------------------------

ENCODED_TOOLS = '''"""A tool that finds the worker's own secrets (as /proc/self/environ would
show them) and says each in every common encoding: result, print, log line."""

import base64
import logging
import os
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote, urlsplit

import yaml

from agentledger import ToolContext, tool

log = logging.getLogger("encoded_tools")


def encodings(value: str) -> list[str]:
    raw = value.encode()
    b64 = [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()]
    blob = base64.b64encode(b"HOME=/root\\\\0SECRET=" + raw + b"\\\\0PATH=/bin").decode()
    return [*b64, *(b.rstrip("=") for b in b64), raw.hex(), raw.hex().upper(),
            quote(value, safe=""), quote_plus(value), blob]


def secrets() -> dict[str, str]:
    state = Path(os.environ["AGENTLEDGER_STATE_DIR"])
    filed = yaml.safe_load((state / "publishers.yaml").read_text())["publishers"]
    return {
        "redis_password": unquote(urlsplit(os.environ["REDIS_URL"]).password or ""),
        "inline_key": filed["canary-svc"]["key"],
        "env_key": os.environ["AL_CANARY_PUB_KEY"],
        "declared": os.environ["AL_CANARY_TOKEN"],
    }


@tool(read_only=True, reads=lambda a: ["canary:env"])
def leak_encoded(ctx: ToolContext) -> dict:
    """Say the worker's secrets, encoded."""
    said = {name: encodings(value) for name, value in secrets().items()}
    for name, forms in said.items():
        print(name, *forms)
        log.warning("leaking %s: %s", name, " ".join(forms))
    return said
'''
ENCODED_SPEC = f"""task: "Say the worker's secrets, encoded."
tools: [encoded_tools]
secrets: [{CANARY_VAR}]
principal: {{id: alice, tenant: shop-1}}
budgets: {{max_turns: 3}}
model:
  scripted:
    - tool_use: [{{id: e1, name: leak_encoded, input: {{}}}}]
    - end_turn: "done"
"""


def encodings(value: str) -> list[str]:
    """The forms the tool says `value` in (the test's own copy, not the redactor's)."""
    import base64
    from urllib.parse import quote, quote_plus

    raw = value.encode()
    b64 = [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()]
    blob = base64.b64encode(b"HOME=/root\\0SECRET=" + raw + b"\\0PATH=/bin").decode()
    return [value, *b64, *(b.rstrip("=") for b in b64), raw.hex(), raw.hex().upper(),
            quote(value, safe=""), quote_plus(value), blob]  # fmt: skip


def test_the_redis_password_publisher_keys_and_a_declared_secret_appear_in_no_encoding(
    cli: Cli, tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """A tool says the worker's Redis password, a publisher's inline key, another's
    `key_env` key and a declared secret in base64 (standard, URL-safe, padded or
    not, inside a longer blob), hex (both cases) and URL-encoded: none of it is in
    the log (`raw` included: these are redacted before anything is stored), tail,
    status, runs, trace, replay, the worker's output and log lines, or the AOF."""
    import yaml

    password = f"pw/{uuid.uuid4().hex[:12]}+ {uuid.uuid4().hex[:6]}="  # every encoding differs
    admin = redis.Redis.from_url(private_redis.url)
    admin.config_set("requirepass", password)
    url = private_redis.url.replace("redis://", f"redis://:{quote(password, safe='')}@")
    token, env_key = f"canary-{uuid.uuid4().hex}", uuid.uuid4().hex * 2
    cli.env.update({"REDIS_URL": url, CANARY_VAR: token, "AL_CANARY_PUB_KEY": env_key})
    project = cli.cwd / "encoded"
    project.mkdir()
    (project / "encoded_tools.py").write_text(ENCODED_TOOLS)
    (project / "spec.yaml").write_text(ENCODED_SPEC)
    printed: dict[str, str] = {}

    def said(*args: str | Path) -> subprocess.CompletedProcess[str]:
        done = cli(*args)
        printed[" ".join(map(str, args[:2]))] = done.stdout + done.stderr
        return done

    added = cli(
        "publishers", "add", "canary-svc", "--principal", "alice@shop-1", "--json"
    )  # its key, once
    inline_key = json.loads(added.stdout)["key"]
    path = Path(cli.env["AGENTLEDGER_STATE_DIR"]) / "publishers.yaml"
    filed = yaml.safe_load(path.read_text())
    filed["publishers"]["env-svc"] = {
        "key_env": "AL_CANARY_PUB_KEY",
        "principals": [{"id": "bob", "tenant": "t"}],
    }
    path.write_text(yaml.safe_dump(filed))
    assert cli("publishers", "adopt").returncode == 0  # a hand-edited file is made the deployment's
    secrets = {
        "redis password": password,
        "inline key": inline_key,
        "key_env key": env_key,
        "declared": token,
    }
    worker_log = tmp_path / "worker-output.txt"
    try:
        with worker_log.open("w") as out:
            worker = subprocess.Popen(
                [*AGENTLEDGER, "--log-level", "info", "workers", "--tools", "encoded_tools",
                 "--tool-path", str(project)],
                cwd=cli.cwd, env=cli.env, stdout=out, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            intake = None
            try:
                deadline = time.monotonic() + 60
                while "workers up" not in worker_log.read_text():  # its tool set registered
                    assert worker.poll() is None and time.monotonic() < deadline, (
                        worker_log.read_text()
                    )
                    time.sleep(0.1)
                intake = start_intake(cli)  # the workers run no intake
                submitted = said(
                    "submit", "--as", "canary-svc", "--unserved", project / "spec.yaml"
                )
                assert submitted.returncode == 0, submitted.stderr
                run_id = submitted.stdout.strip()
                status = _until_ended(cli, run_id)
                assert status == "completed", (status, worker_log.read_text()[-2000:])
                for args in (
                    ("status", run_id), ("status", run_id, "--json"), ("runs",), ("runs", "--json"),
                    ("tail", "--run", run_id), ("tail", "--run", run_id, "--json"),
                    ("trace", run_id), ("trace", run_id, "--json"), ("replay", run_id), ("raw", run_id),
                ):  # fmt: skip
                    said(*args)
            finally:
                worker.terminate()
                worker.wait(timeout=15)
                if intake is not None:
                    stop_workers([intake])
        names = [k.decode(errors="replace") for k in admin.scan_iter(count=1000)]
    finally:
        admin.config_set("requirepass", "")
        admin.close()
    aof = b"".join(p.read_bytes() for p in sorted(private_redis.data_dir.rglob("*")) if p.is_file())
    output = worker_log.read_text()
    everything = {**{f"`{args}`": text for args, text in printed.items()}, "worker output and logs": output,
                  "Redis key names": "\n".join(names), "AOF": aof.decode(errors="replace")}  # fmt: skip
    hits = {
        (where, name, form): text.count(form)
        for where, text in everything.items() for name, value in secrets.items()
        for form in encodings(value) if form in text
    }  # fmt: skip
    assert hits == {}, sorted(hits)[:5]
    shown = "".join(printed.values())
    for marker in ("[REDACTED:redis_password]", "[REDACTED:publisher_key:canary-svc]",
                   "[REDACTED:publisher_key:env-svc]", f"[REDACTED:{CANARY_VAR}]"):  # fmt: skip
        assert marker in shown, f"the tool did say it, redacted: {marker} missing"
    assert "leaking redis_password: [REDACTED:redis_password]" in output, (
        "its log line is there, redacted"
    )
    assert len(names) > 10 and len(aof) > 10_000, "there was something to search"

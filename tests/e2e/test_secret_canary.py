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
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from e2ekit import AGENTLEDGER, SETTLING, Cli, types

from services.adapters.redis.local_server import PrivateRedis, start_server
from tests.standin.messages_api import MessagesStandin, Streamed, Text, ToolUse

CANARY_VAR = "AL_CANARY_TOKEN"
TOOLS = '''"""Tools that try every way to leak the token they read."""

import logging
import sys
from pathlib import Path

from services.tools import ToolContext, tool

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

    said("publishers", "add", "canary-svc", "--principal", "alice@shop-1")
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
    return str(json.loads(done.stdout).get("status")) if done.stdout.strip().startswith("{") else "unknown"

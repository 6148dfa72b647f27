"""The intake role in a process of its own (`agentledger.services.intake_role`), on a real
Redis: it creates a run that names a tool module, and afterwards that process
has imported no tool module — not the run's, not the built-in tools, not the MCP
adapter — and runs no dramatiq worker thread: the grant decision never shares a
process with tool code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from itkit import QUEUE, TOOL_MODULE, scripted_spec

from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.settings import Settings

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, threading, time
from pathlib import Path
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.publishers.publishers_file import signer
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.intake_role import build_intake
from agentledger.services.keys import keys_for
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.settings import Settings

args = json.loads(sys.argv[1])
settings = Settings(
    redis_url=args["url"], prefix=args["prefix"], publishers_file=args["publishers"],
    state_dir=args["state_dir"],
)
client = redis_client(settings.redis_url)
keys = keys_for(settings)
Directory(client, keys, member_ttl_s=2.0).register(args["queue"], args["toolset"], args["manifest"])
service = build_intake(settings, client).start()
request = RunRequested.model_validate_json(args["request"])
publish(client, keys, request, signer=signer(settings.publishers_path, args["publisher"]))
store = RedisEventStore(client, keys)
deadline = time.monotonic() + 30
while not store.read(request.run_id) and time.monotonic() < deadline:
    time.sleep(0.05)
created = [e.type for e in store.read(request.run_id)]
service.stop()
print(json.dumps({
    "created": created,
    "modules": sorted(m for m in sys.modules if m == args["module"] or m.startswith((
        "agentledger.services.adapters.tools.builtin", "agentledger.services.adapters.tools.mcp", "anthropic"))),
    "threads": sorted(t.name for t in threading.enumerate()),
}))
"""


def test_the_intake_process_creates_a_run_and_imports_no_tool_module(
    settings: Settings, toolset: ToolSet, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    request = RunRequested(run_id="run-role", request_id="run-role", spec=spec, queue=QUEUE,
                           base_dir=str(workspace.parent), workspace=str(workspace))  # fmt: skip
    args = {
        "url": settings.redis_url, "prefix": settings.prefix, "publishers": settings.publishers_path,
        "state_dir": settings.state_dir,
        "queue": QUEUE, "toolset": toolset.fingerprint, "manifest": toolset.manifest(),
        "request": request.model_dump_json(), "publisher": "it-publisher", "module": TOOL_MODULE,
    }  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / ".pkg"), str(REPO), str(tools_dir)]),
    }
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["created"] == ["RunCreated"], done.stderr[-3000:]
    assert said["modules"] == [], "the intake imported tool code"
    assert not [t for t in said["threads"] if "worker" in t.lower()], said["threads"]

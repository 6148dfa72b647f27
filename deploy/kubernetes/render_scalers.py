"""Render scaledobjects.yaml: one KEDA ScaledObject per worker Deployment, on the
streams its pool really reads. A pool of a task queue for one tool set reads one
stream per shard, `<prefix>:{<shard>}:q:<queue>:<toolset>:<pool>`, with the
consumer group `workers`; the tool set is the fingerprint of the tool modules'
code, so it is computed here from the same modules the Deployment's args name
(its `/app/...` paths are this repository's). Each shard's stream gets two
`redis-streams` triggers — lagCount (not yet delivered) and pendingEntriesCount
(delivered, not yet acked) — and the ScaledObject scales on their sum.

A Deployment whose args name an MCP servers file (`--mcp FILE`) serves a tool set
whose fingerprint also covers the servers' tools: it is computed as a worker computes
it, with the servers started (`agentledger toolset --mcp FILE`), or given, as the
workers print it (`--toolset DEPLOYMENT=FINGERPRINT`) where the servers cannot start
on this machine.

    python deploy/kubernetes/render_scalers.py          # rewrite scaledobjects.yaml
    python deploy/kubernetes/render_scalers.py --check  # exit 1 when it is stale
    python deploy/kubernetes/render_scalers.py --toolset agentledger-mcp=0123456789abcdef
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
IMAGE_ROOT = "/app"  # where the Dockerfile puts the repository
OUT = HERE / "scaledobjects.yaml"
REDIS_ADDRESS = "agentledger-redis.agentledger.svc.cluster.local:6379"
GROUP = "workers"  # services/adapters/broker/streams_queue.py
TARGET_PER_REPLICA = 8  # messages waiting or running per worker process (its threads)

for entry in (ROOT, ROOT / ".pkg"):  # this checkout's agentledger first (.pkg/agentledger)
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))


def settings() -> dict[str, str]:
    for doc in yaml.safe_load_all((HERE / "config.yaml").read_text()):
        if doc["metadata"]["name"] == "agentledger-settings":
            return {str(k): str(v) for k, v in doc["data"].items()}
    raise SystemExit("config.yaml has no ConfigMap agentledger-settings")


def worker_deployments() -> list[tuple[str, list[str]]]:
    """(name, args) of each Deployment that runs `agentledger workers`."""
    found = []
    for doc in yaml.safe_load_all((HERE / "workers.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            found.append((doc["metadata"]["name"], [str(a) for a in container["args"]]))
    return found


def here(path: str) -> str:
    """A path of the image (`/app/...`) as it is in this checkout."""
    return path.replace(IMAGE_ROOT, str(ROOT), 1) if path.startswith(IMAGE_ROOT + "/") else path


def mcp_fingerprint(tools: list[str], paths: list[str], mcp: str) -> str:
    """The fingerprint workers with this servers file serve: the servers started here."""
    command = [sys.executable, "-m", "agentledger.services.entrypoints.cli.main", "toolset",
               "--tools", *tools, *[a for p in paths for a in ("--tool-path", p)], "--mcp", mcp,
               "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(
            f"the MCP servers of {mcp} did not all start here ({done.stderr.strip()}): give the "
            "fingerprint the workers print, --toolset DEPLOYMENT=FINGERPRINT"
        )
    return str(json.loads(done.stdout)["toolset"])


def streams_of(
    args: list[str], prefix: str, shards: int, *, toolset: str | None = None
) -> list[tuple[str, str]]:
    """(pool, stream) for every stream the workers with these args read (`toolset`: their
    fingerprint, when given)."""
    from agentledger.services.adapters.tools.toolset import fingerprint_of
    from agentledger.services.entrypoints.cli.parser import parser

    parsed = parser().parse_args(args)
    paths = [here(p) for p in parsed.tool_path]
    if toolset is None:
        toolset = (
            mcp_fingerprint(parsed.tools, paths, here(parsed.mcp))
            if parsed.mcp
            else fingerprint_of(parsed.tools, paths)
        )
    return [
        (pool, f"{prefix}:{{{shard}}}:q:{parsed.queue}:{toolset}:{pool}")
        for pool in parsed.pools
        for shard in range(shards)
    ]


def scaled_object(name: str, streams: list[tuple[str, str]]) -> dict[str, Any]:
    triggers: list[dict[str, Any]] = []
    for i, (_, stream) in enumerate(streams):
        for kind, threshold in (("lag", "lagCount"), ("pending", "pendingEntriesCount")):
            triggers.append({
                "type": "redis-streams",
                "name": f"s{i}_{kind}",
                "metadata": {
                    "address": REDIS_ADDRESS,
                    "stream": stream,
                    "consumerGroup": GROUP,
                    threshold: str(TARGET_PER_REPLICA),
                },
                "authenticationRef": {"name": "agentledger-redis"},
            })  # fmt: skip
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": name,
            "namespace": "agentledger",
            "labels": {"app.kubernetes.io/part-of": "agentledger"},
        },
        "spec": {
            "scaleTargetRef": {"name": name},
            # never 0: every workers process also runs a sweeper
            "minReplicaCount": 1,
            "maxReplicaCount": 10,
            "pollingInterval": 5,
            "cooldownPeriod": 120,
            "advanced": {
                "scalingModifiers": {
                    "formula": " + ".join(t["name"] for t in triggers),
                    "target": str(TARGET_PER_REPLICA),
                    "metricType": "AverageValue",
                }
            },
            "triggers": triggers,
        },
    }


# the scaler's own Redis user (`agentledger acl`: <prefix>-scaler, which may PING, INFO, XINFO
# GROUPS and XPENDING on the task-queue streams and nothing else), from a Secret of its own
TRIGGER_AUTH = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "TriggerAuthentication",
    "metadata": {"name": "agentledger-redis", "namespace": "agentledger", "labels": {"app.kubernetes.io/part-of": "agentledger"}},
    "spec": {"secretTargetRef": [
        {"parameter": "username", "name": "agentledger-scaler", "key": "REDIS_USERNAME"},
        {"parameter": "password", "name": "agentledger-scaler", "key": "REDIS_PASSWORD"},
    ]},
}  # fmt: skip


def render(toolsets: dict[str, str] | None = None) -> str:
    """scaledobjects.yaml; `toolsets`: Deployment name -> the fingerprint its workers serve."""
    env = settings()
    prefix, shards = env.get("AGENTLEDGER_PREFIX", "al"), int(env["AGENTLEDGER_SHARDS"])
    docs = [TRIGGER_AUTH]
    for name, args in worker_deployments():
        given = (toolsets or {}).get(name)
        docs.append(scaled_object(name, streams_of(args, prefix, shards, toolset=given)))
    head = "# Rendered by deploy/kubernetes/render_scalers.py from workers.yaml and config.yaml: do not edit.\n"
    return head + str(yaml.safe_dump_all(docs, sort_keys=False, width=120))


def given_toolsets(argv: list[str]) -> dict[str, str]:
    """`--toolset DEPLOYMENT=FINGERPRINT` (repeatable)."""
    found = {}
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--toolset":
            name, sep, fingerprint = value.partition("=")
            if not sep or not fingerprint:
                raise SystemExit(f"--toolset {value!r}: DEPLOYMENT=FINGERPRINT")
            found[name] = fingerprint
    return found


def main(argv: list[str]) -> int:
    text = render(given_toolsets(argv))
    if "--check" in argv:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python {Path(__file__).relative_to(ROOT)}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

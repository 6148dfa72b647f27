"""deploy/ checked offline: the Kubernetes manifests against the official schemas
(kubernetes-validate's bundled OpenAPI, strict: unknown fields refused), the KEDA
objects against KEDA's own CRD schemas and its redis-streams scaler's metadata
names, the compose file against the compose specification's schema (all
vendored: tests/integration/deploy_schemas/SOURCES.md), every command they run
against our CLI's parser — and, on a private redis-server, every stream and
consumer group a scaler names exists once the pools the Deployments describe
have started, with a lag Redis can tell (what lagCount reads; Redis 7+, which
the test uses when the machine has one)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import redis
import yaml

from agentledger.schemas.publishers import PublishersFile
from agentledger.services.adapters.broker.streams_queue import GROUP, StreamQueue
from agentledger.services.adapters.publishers.publishers_file import key_of
from agentledger.services.adapters.redis.local_server import answers, free_port, start_server
from agentledger.services.entrypoints.cli.parser import parser
from agentledger.services.errors import ConfigError
from agentledger.services.settings import from_env

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
SCHEMAS = Path(__file__).with_name("deploy_schemas")
K8S_VERSION = "1.37.0"
# the oldest Kubernetes the manifests need (docs/guide/deployment.md, deploy/README.md):
# every version from it to K8S_VERSION validates them
K8S_OLDEST = "1.30.0"
KEDA_KINDS = {
    "ScaledObject": "keda.sh_scaledobjects.v1alpha1.json",
    "TriggerAuthentication": "keda.sh_triggerauthentications.v1alpha1.json",
}
# redisStreamsMetadata + redisConnectionInfo (trigger metadata), KEDA at the vendored commit
REDIS_STREAMS_METADATA = {
    "pendingEntriesCount", "streamLength", "lagCount", "stream", "consumerGroup", "databaseIndex",
    "activationLagCount", "enableTLS", "address", "addresses", "username", "password",
    "sentinelUsername", "sentinelPassword", "sentinelMaster", "host", "hosts", "port", "ports",
    "unsafeSsl", "addressFromEnv", "hostFromEnv", "portFromEnv", "usernameFromEnv", "passwordFromEnv",
}  # fmt: skip


def documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_scalers", K8S / "render_scalers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def strict(schema: Any) -> Any:
    """A CRD schema as `kubectl --validate=strict` applies it: unknown fields refused."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            if not out.get("x-kubernetes-preserve-unknown-fields"):
                out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def keda_validator(kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(strict(json.loads((SCHEMAS / KEDA_KINDS[kind]).read_text())))


def scaled_objects() -> list[dict[str, Any]]:
    return [doc for _, doc in documents() if doc["kind"] == "ScaledObject"]


def test_every_kubernetes_manifest_validates_against_the_official_schema() -> None:
    kinds = set()
    for name, doc in documents():
        kinds.add(doc["kind"])
        if doc["kind"] in KEDA_KINDS:
            errors = list(keda_validator(doc["kind"]).iter_errors(doc))
            assert not errors, (
                f"{name}: {doc['kind']}: {errors[0].message} at {list(errors[0].path)}"
            )
        else:
            for minor in range(30, 38):  # K8S_OLDEST .. K8S_VERSION
                kubernetes_validate.validate(doc, f"1.{minor}.0", strict=True)
    assert {"Namespace", "ConfigMap", "Secret", "StatefulSet", "Service", "Deployment",
            "PersistentVolumeClaim", "ScaledObject", "TriggerAuthentication"} <= kinds  # fmt: skip


def test_the_validators_refuse_what_is_wrong() -> None:
    """The checks above can fail: an unknown field, a wrong type, a bad KEDA field."""
    (_, deployment), *_ = [(n, d) for n, d in documents() if d["kind"] == "Deployment"]
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    bad = copy.deepcopy(deployment)
    bad["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    scaled = copy.deepcopy(scaled_objects()[0])
    scaled["spec"]["minReplicas"] = 1
    assert list(keda_validator("ScaledObject").iter_errors(scaled))


def test_the_intake_has_a_deployment_of_its_own_with_no_tool_code() -> None:
    deployments = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Deployment"}
    pod = deployments["agentledger-intake"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = parser().parse_args(container["args"])
    assert (args.command, args.metrics_port) == ("intake", 9100)
    assert not any(a.startswith("--tool") or a == "--mcp" for a in container["args"])
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secrets = {ref["secretRef"]["name"] for ref in container["envFrom"] if "secretRef" in ref}
    assert secrets == {"agentledger-intake"}, "its own Redis user and the keys: not the workers'"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "publishers"]
    assert volume["secret"]["secretName"] == "agentledger-publishers"
    for name, deployment in deployments.items():  # no other pod runs an intake
        (other,) = deployment["spec"]["template"]["spec"]["containers"]
        parsed = parser().parse_args(other["args"])
        assert name == "agentledger-intake" or (
            parsed.command != "intake" and "intake" not in getattr(parsed, "pools", [])
        )


def test_each_worker_pool_has_a_deployment_with_probes_and_a_scaled_object() -> None:
    deployments = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Deployment"}
    scalers = {s["spec"]["scaleTargetRef"]["name"]: s for s in scaled_objects()}
    for pool in ("model", "tools", "accept"):
        name = f"agentledger-{pool}"
        (container,) = deployments[name]["spec"]["template"]["spec"]["containers"]
        args = parser().parse_args(container["args"])
        assert (args.command, args.pools, args.metrics_port) == ("workers", [pool], 9100)
        assert (
            args.metrics_host == "0.0.0.0"
        )  # the kubelet's probes and Prometheus come from outside the pod
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert name in scalers, f"no ScaledObject for {name}"
    assert "agentledger-ui" in deployments
    (ui,) = deployments["agentledger-ui"]["spec"]["template"]["spec"]["containers"]
    args = parser().parse_args(ui["args"])
    assert (args.command, args.host, args.port) == ("ui", "0.0.0.0", 8080)
    (token,) = [e for e in ui["env"] if e["name"] == "AGENTLEDGER_UI_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["name"] == "agentledger-ui"
    for probe in ("readinessProbe", "livenessProbe"):
        assert ui[probe]["httpGet"]["httpHeaders"] == [{"name": "Host", "value": "localhost"}]


def test_the_required_kubernetes_version_is_written_down_where_an_operator_looks() -> None:
    oldest = K8S_OLDEST.rsplit(".", 1)[0]
    for doc in (DEPLOY / "README.md", ROOT / "docs" / "guide" / "deployment.md"):
        assert f"Kubernetes {oldest} or later" in doc.read_text(), doc


def test_a_pod_that_reads_a_secret_file_may_read_it() -> None:
    """A Secret mounted with a mode only its group may read (0440) is readable by a
    pod running as a non-root user only through fsGroup: the intake's and the UI's
    publishers file."""
    mounting = 0
    for _, doc in documents():
        if doc["kind"] != "Deployment":
            continue
        pod = doc["spec"]["template"]["spec"]
        for volume in pod.get("volumes", []):
            mode = volume.get("secret", {}).get("defaultMode", 0o644)
            if "secret" in volume and not mode & 0o004:
                mounting += 1
                context = pod["securityContext"]
                assert mode & 0o040 and context.get("fsGroup") == context["runAsGroup"], doc[
                    "metadata"
                ]["name"]
    assert mounting >= 2


def test_the_scalers_authenticate_as_their_own_redis_user() -> None:
    (auth,) = [d for _, d in documents() if d["kind"] == "TriggerAuthentication"]
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    secrets = {
        d["metadata"]["name"]: d["stringData"] for _, d in documents() if d["kind"] == "Secret"
    }
    assert set(refs) == {"username", "password"}
    assert {secrets[name][key] for name, key in refs.values()} >= {"al-scaler"}


def test_the_ui_token_is_a_secret_of_its_own_and_a_placeholder_is_refused() -> None:
    secrets = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Secret"}
    placeholder = secrets["agentledger-ui"]["stringData"]["AGENTLEDGER_UI_TOKEN"]
    assert (
        "AGENTLEDGER_UI_TOKEN" not in secrets["agentledger-secrets"]["stringData"]
    )  # no worker sees it
    with pytest.raises(ConfigError) as refused:
        from_env({"AGENTLEDGER_UI_TOKEN": placeholder})
    assert refused.value.name == "AGENTLEDGER_UI_TOKEN"


def test_every_scaler_is_a_redis_streams_trigger_keda_understands() -> None:
    for scaled in scaled_objects():
        triggers = scaled["spec"]["triggers"]
        names = [t["name"] for t in triggers]
        formula = scaled["spec"]["advanced"]["scalingModifiers"]["formula"]
        assert sorted(formula.split(" + ")) == sorted(names) and len(set(names)) == len(names)
        for t in triggers:
            meta = t["metadata"]
            assert t["type"] == "redis-streams"
            assert set(meta) <= REDIS_STREAMS_METADATA, set(meta) - REDIS_STREAMS_METADATA
            assert meta["consumerGroup"] == "workers"
            assert len({"lagCount", "pendingEntriesCount"} & set(meta)) == 1
            assert int(meta.get("lagCount") or meta["pendingEntriesCount"]) > 0


def test_the_publishers_file_is_valid_and_its_keys_come_from_the_intakes_secret() -> None:
    """The Secret's publishers file as the intake reads it; every key_env in the
    intake's own Secret, as a placeholder the intake refuses (not hex): no known key
    ever runs. Only the intake (and the web view) mount it; no pool sees a key."""
    secrets = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Secret"}
    text = secrets["agentledger-publishers"]["stringData"]["publishers.yaml"]
    publishers = PublishersFile.model_validate(yaml.safe_load(text)).publishers
    intake_env = secrets["agentledger-intake"]["stringData"]
    assert publishers
    for publisher in publishers.values():
        assert publisher.key is None and publisher.key_env in intake_env
        assert publisher.key_env not in secrets["agentledger-secrets"]["stringData"]
        with pytest.MonkeyPatch.context() as env:
            env.setenv(publisher.key_env, intake_env[publisher.key_env])
            assert key_of(publisher) is None
    assert intake_env["REDIS_URL"].startswith("redis://al-intake:")  # its own Redis user
    config = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "ConfigMap"}
    mounted = config["agentledger-settings"]["data"]["AGENTLEDGER_PUBLISHERS"]
    readers = set()
    for _, doc in documents():
        if doc["kind"] == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
            if "publishers" in mounts:
                assert str(Path(mounts["publishers"], "publishers.yaml")) == mounted
                readers.add(doc["metadata"]["name"])
    assert readers == {"agentledger-intake", "agentledger-ui"}


def test_the_rendered_scalers_are_up_to_date() -> None:
    render = render_module()
    assert (K8S / "scaledobjects.yaml").read_text() == render.render(), (
        "deploy/kubernetes/scaledobjects.yaml is stale: make deploy-scalers"
    )


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[no-any-return]


def compose_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / "compose-spec.json").read_text()))


def test_the_compose_file_validates_against_the_compose_specification() -> None:
    errors = list(compose_validator().iter_errors(compose()))
    assert not errors, f"{errors[0].message} at {list(errors[0].path)}"
    bad = compose()
    bad["services"]["redis"]["restartt"] = "always"
    assert list(compose_validator().iter_errors(bad))


def test_compose_passes_the_model_providers_keys_through_to_every_service() -> None:
    for name, service in compose()["services"].items():
        if name == "redis":
            continue
        env = service["environment"]
        assert env["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}", name
        assert env["OPENAI_API_KEY"] == "${OPENAI_API_KEY:-}", name


def test_compose_runs_redis_with_aof_the_intake_each_pool_and_the_web_view() -> None:
    services = compose()["services"]
    assert "--appendonly" in services["redis"]["command"]
    assert (
        services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1]
        == "yes"
    )
    for pool in ("model", "tools", "accept"):
        args = parser().parse_args(services[pool]["command"])
        assert (args.command, args.pools) == ("workers", [pool])
        assert (
            args.metrics_port == 9100
            and args.log_format == "json"
            and args.metrics_host == "0.0.0.0"
        )
    args = parser().parse_args(services["intake"]["command"])
    assert (args.command, args.metrics_port, args.metrics_host) == ("intake", 9100, "0.0.0.0")
    args = parser().parse_args(services["ui"]["command"])
    assert (args.command, args.host, args.port) == ("ui", "0.0.0.0", 8080)


def test_the_dockerfile_copies_what_exists() -> None:
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), source


def redis7() -> str | None:
    """A redis-server of version 7 or later (consumer-group lag, what lagCount reads)."""
    for candidate in (
        shutil.which("redis-server"),
        "/usr/bin/redis-server",
        "/usr/local/bin/redis-server",
    ):
        if candidate and Path(candidate).exists():
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            found = re.search(r"v=(\d+)\.", out)
            if found and int(found.group(1)) >= 7:
                return candidate
    return None


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, bool]]:
    """A private redis-server (7+ when the machine has one): its URL, and whether it
    reports consumer-group lag."""
    binary = redis7()
    if binary is None:
        server = start_server(tmp_path_factory.mktemp("redis"))
        yield server.url, False
        server.stop()
        return
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path_factory.mktemp("redis7"))],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while not answers(url, timeout=0.2):
        assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.05)
    yield url, True
    proc.terminate()
    proc.wait(timeout=10)


def test_every_stream_and_group_a_scaler_names_exists_once_the_pools_start(
    private_redis: tuple[str, bool], tmp_path: Path
) -> None:
    url, has_lag = private_redis
    render = render_module()
    settings = render.settings()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env |= {
        "REDIS_URL": url, "AGENTLEDGER_SHARDS": settings["AGENTLEDGER_SHARDS"],
        "AGENTLEDGER_PREFIX": settings["AGENTLEDGER_PREFIX"], "AGENTLEDGER_SANDBOX": "off",
        "AGENTLEDGER_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)]),
    }  # fmt: skip
    procs = []
    try:
        for _, args in render.worker_deployments():  # as each Deployment runs them
            args = [a.replace("/app/", f"{ROOT}/", 1) if a.startswith("/app/") else a for a in args]
            args = ["0" if a == "9100" else a for a in args]  # any free metrics port
            proc = subprocess.Popen(
                [sys.executable, "-m", "agentledger.services.entrypoints.cli.main", *args],
                env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE,
            )  # fmt: skip
            procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "workers up" in line, f"{args}: {line!r} (exit {proc.poll()})"
        client = redis.Redis.from_url(url, decode_responses=True)
        wanted = [
            (t["metadata"]["stream"], t["metadata"]["consumerGroup"])
            for scaled in scaled_objects()
            for t in scaled["spec"]["triggers"]
        ]
        assert len(wanted) == 3 * 2 * int(settings["AGENTLEDGER_SHARDS"])

        def missing() -> list[tuple[str, str]]:
            gone = []
            for stream, group in wanted:
                try:
                    groups = {g["name"]: g for g in client.xinfo_groups(stream)}
                except redis.ResponseError:  # no such key
                    groups = {}
                if group not in groups or (has_lag and groups[group].get("lag") is None):
                    gone.append((stream, group))
            return gone

        deadline = time.monotonic() + 30
        while (gone := missing()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not gone, f"streams or groups the scalers watch that no worker reads: {gone}"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_redis_can_tell_the_lag_after_our_acks_delete_entries(
    private_redis: tuple[str, bool],
) -> None:
    """What lagCount reads stays known: an ack deletes only delivered entries."""
    url, has_lag = private_redis
    if not has_lag:
        pytest.skip("needs redis-server 7+ (consumer-group lag); none on this machine")
    client = redis.Redis.from_url(url)
    queue = StreamQueue(client, "lagcheck:{0}:q", claim_idle_ms=3000, max_deliveries=3)
    queue.ensure_group()
    for i in range(3):
        queue.push(b"m%d" % i)
    delivered = client.xreadgroup(GROUP, "c1", {queue.stream: ">"}, count=2)
    with client.pipeline(transaction=False) as pipe:
        for entry_id, _ in delivered[0][1]:
            for command in queue.ack_commands(entry_id.decode()):
                pipe.execute_command(*command)
        pipe.execute()
    (group,) = client.xinfo_groups(queue.stream)
    assert (group["lag"], group["pending"]) == (1, 0)
    client.delete(queue.stream)


def test_the_pools_that_run_commands_get_what_the_sandbox_needs_and_no_more() -> None:
    """tools and accept: a non-root worker (bwrap's unprivileged flow) with no capability,
    /proc unmasked (in a user namespace of the pod's own), seccomp and AppArmor
    unconfined for bwrap's namespaces and mounts; the model pool gets none of it."""
    deployments = {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Deployment"}
    for pool in ("tools", "accept"):
        pod = deployments[f"agentledger-{pool}"]["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        ctx = container["securityContext"]
        assert pod["hostUsers"] is False and pod["securityContext"]["runAsNonRoot"] is True
        assert ctx["procMount"] == "Unmasked" and ctx["capabilities"]["drop"] == ["ALL"]
        assert ctx["allowPrivilegeEscalation"] is False and "add" not in ctx["capabilities"]
        assert ctx["seccompProfile"]["type"] == ctx["appArmorProfile"]["type"] == "Unconfined"
        assert not ctx.get("privileged")
    model = deployments["agentledger-model"]["spec"]["template"]["spec"]
    assert "procMount" not in model["containers"][0]["securityContext"]
    services = compose()["services"]
    for pool in ("tools", "accept"):
        assert set(services[pool]["security_opt"]) == {
            "no-new-privileges:true", "seccomp=unconfined", "apparmor=unconfined",
            "systempaths=unconfined",
        }  # fmt: skip
        assert services[pool]["cap_drop"] == ["ALL"] and "cap_add" not in services[pool]
        assert "privileged" not in services[pool]
    assert "security_opt" not in services["model"]


def test_an_mcp_tool_set_is_rendered_into_its_scaler_as_its_workers_serve_it(
    private_redis: tuple[str, bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Deployment started with `--mcp FILE` serves a fingerprint that covers its
    servers' tools: the renderer computes it as the workers do (the servers started),
    and the streams it names are the ones the workers read; a fingerprint given with
    --toolset is used as given."""
    from tests.mcp_servers.kit import ledger_stdio

    url, _ = private_redis
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": {"ledger": ledger_stdio()}}))
    monkeypatch.setenv("AGENTLEDGER_SANDBOX", "off")
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path / "state"))
    render = render_module()
    args = ["workers", "--pools", "tools", "--tools", "inventory_tools", "--tool-path",
            "/app/examples/inventory", "--mcp", str(servers)]  # fmt: skip
    streams = render.streams_of(args, "al", 2)
    plain = render.streams_of(args[:-2], "al", 2)
    (rendered,) = {stream.split(":")[4] for _, stream in streams}
    assert rendered != plain[0][1].split(":")[4] and len(streams) == 2
    env = {**os.environ, "REDIS_URL": url, "AGENTLEDGER_PREFIX": f"mcp{os.getpid()}",
           "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)])}  # fmt: skip
    here = [a.replace("/app/", f"{ROOT}/", 1) if a.startswith("/app/") else a for a in args]
    proc = subprocess.Popen([sys.executable, "-m", "agentledger.services.entrypoints.cli.main",
                             *here, "--json"], env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None
        up = json.loads(proc.stdout.readline())
        assert up["toolset"] == rendered, up
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    given = render.streams_of(args, "al", 1, toolset="0123456789abcdef")
    assert given == [("tools", "al:{0}:q:default:0123456789abcdef:tools")]

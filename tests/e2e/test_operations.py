"""Operations as an operator sees them: `agentledger workers --processes 2
--metrics-port 0` on a private redis-server, scraped over HTTP while runs move
(every metric family, with values the runs explain), its probes, and its JSON
log lines (run, call, pool and worker on every record; secrets redacted)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from e2ekit import AGENTLEDGER, Cli, clean_environ
from prometheus_client.parser import text_string_to_metric_families

from agentledger.events.spans import tool_span_id, trace_id_of
from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server

TOOLS = Path(__file__).with_name("ops_tools")
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "agentledger.json"
SECRET = "hunter2-" + uuid.uuid4().hex[:10]
RUNS = 3
QUEUE_GAUGES = [
    f'agentledger_{name}{{pool="{pool}",queue="default"}}'
    for pool in ("model", "tools", "accept")
    for name in ("queue_lag", "queue_pending", "queue_delayed", "dead_letters")
]
SPEC = """
task: "read slowly, then write the same key"
tools: [ops_tools]
secrets: [OPS_SECRET]
principal: {id: ops, tenant: t}
budgets: {max_turns: 4, prices: {scripted: {input: 3.0, output: 15.0}}}
model:
  scripted:
    - tool_use:
        - {id: c1, name: ops_slow_read, input: {key: k, delay_s: 1.0}}
        - {id: c2, name: ops_logged_write, input: {key: k}}
      delay_s: 0.8
    - end_turn: "done"
      delay_s: 1.5      # each run is live for over 3 s: longer than a scrape's 2 s cache
"""


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = start_server(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def dashboard_names() -> set[str]:
    """The series the Grafana dashboard's queries name."""
    text = json.dumps([p.get("targets", []) for p in json.loads(DASHBOARD.read_text())["panels"]])
    return set(re.findall(r"\bagentledger_[a-z_]+\b", text))


def until(what: str, check: Callable[[], Any], timeout_s: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value, labels as printed (sorted by prometheus_client); the
    text must parse as Prometheus' exposition format (prometheus_client's parser)."""
    assert list(text_string_to_metric_families(text)) or not text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def total(found: dict[str, float], name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include these."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(
        v for k, v in found.items()
        if (k == name or k.startswith(name + "{")) and all(w in k for w in want)
    )  # fmt: skip


@pytest.fixture(scope="module")
def operated(
    private_redis: PrivateRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Workers with metrics and an intake with metrics, RUNS runs submitted and one
    garbage inbox entry; what was scraped while they ran and after, and the
    workers' and the intake's stderr once stopped."""
    folder = tmp_path_factory.mktemp("ops")
    prefix = f"ops{uuid.uuid4().hex[:8]}"
    env = clean_environ(prefix, folder / "state")
    env |= {"REDIS_URL": private_redis.url, "AGENTLEDGER_SANDBOX": "off", "OPS_SECRET": SECRET}
    (folder / "spec.yaml").write_text(SPEC)
    (folder / "ops_tools.py").write_text((TOOLS / "ops_tools.py").read_text())
    publisher = Cli(folder, env).publisher()
    workers = subprocess.Popen(
        [*AGENTLEDGER, "--log-format", "json", "--log-level", "info", "workers", "--processes", "2",
         "--tools", "ops_tools", "--tool-path", str(folder), "--metrics-port", "0"],
        cwd=folder, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    intake = subprocess.Popen(
        [*AGENTLEDGER, "--log-format", "json", "--log-level", "info", "intake", "--metrics-port", "0"],
        cwd=folder, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert workers.stdout is not None and intake.stdout is not None
        intake_up = re.search(r"metrics on port (\d+)", intake.stdout.readline())
        assert intake_up, "the intake did not start"
        intake_port = int(intake_up.group(1))
        until("the intake ready", lambda: get(intake_port, "/readyz")[0] == 200)
        first = workers.stdout.readline()
        said = re.search(r"metrics on port (\d+)", first)
        if not said:
            workers.kill()
            raise AssertionError(
                f"the workers did not start: {first!r}: {workers.communicate()[1]}"
            )
        port = int(said.group(1))
        until("ready", lambda: get(port, "/readyz")[0] == 200)
        client = redis.Redis.from_url(private_redis.url)
        client.xadd(f"{prefix}:{{in0}}:inbox:{publisher}", {"message": b"not json"})
        for _ in range(RUNS):
            done = subprocess.run(
                [*AGENTLEDGER, "submit", "--as", publisher, "spec.yaml", "--json"], cwd=folder, env=env,
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr

        def live_seen() -> dict[str, float] | None:
            found = samples(get(port, "/metrics")[1])
            live = total(found, "agentledger_runs") - total(
                found, "agentledger_runs", status="ended"
            )
            return found if live > 0 else None

        during = until("a scrape with a live run", live_seen)
        # a run's end is appended before its last message is acked: the scrape that
        # counts all the runs ended may still see that message pending, so the one
        # kept is the first that also shows the queues drained (never, if they don't)
        after = until(
            f"{RUNS} runs ended and the queues drained",
            lambda: (
                (f := samples(get(port, "/metrics")[1]))
                and total(f, "agentledger_runs", status="ended") == RUNS
                and total(f, "agentledger_runs_ended_total") == RUNS
                and all(f.get(key) == 0 for key in QUEUE_GAUGES)
                and f
            ),
        )
        probes = {path: get(port, path) for path in ("/healthz", "/readyz", "/nothing")}
        intake_probes = {path: get(intake_port, path) for path in ("/healthz", "/readyz")}
        intake_metrics = samples(get(intake_port, "/metrics")[1])
    finally:
        workers.terminate()
        intake.terminate()
        _, stderr = workers.communicate(timeout=30)
        _, intake_stderr = intake.communicate(timeout=30)
    yield {"during": during, "after": after, "probes": probes, "stderr": stderr + intake_stderr,
           "intake_probes": intake_probes, "intake_metrics": intake_metrics}  # fmt: skip


def test_a_scrape_during_the_runs_shows_them_live(operated: dict[str, Any]) -> None:
    during = operated["during"]
    statuses = ("requesting_model", "validating", "running_tools", "accepting")
    assert sum(total(during, "agentledger_runs", status=s) for s in statuses) >= 1


def test_every_metric_counts_what_the_runs_did(operated: dict[str, Any]) -> None:
    m, by_intake = operated["after"], operated["intake_metrics"]
    assert total(m, "agentledger_runs_ended_total", status="completed") == RUNS
    # the runs' first events are the intake's, counted there
    assert (
        total(
            by_intake, "agentledger_run_transitions_total", from_status="none",
            to_status="requesting_model",
        )
        == RUNS
    )  # fmt: skip
    assert total(by_intake, "agentledger_events_appended_total", type="RunCreated") == RUNS
    assert total(m, "agentledger_events_appended_total", type="RunCreated") == 0
    assert total(m, "agentledger_run_transitions_total", to_status="completed") == RUNS
    assert total(m, "agentledger_model_tokens_total", kind="input", model="scripted") > 0
    assert total(m, "agentledger_model_tokens_total", kind="output", model="scripted") > 0
    assert 0 < total(m, "agentledger_model_cost_usd_total", model="scripted") < 0.1
    for tool in ("ops_slow_read", "ops_logged_write"):
        assert total(m, "agentledger_tool_calls_total", tool=tool, outcome="succeeded") == RUNS
    # the write waits for the slow read's lock on the same key, in each run
    assert total(m, "agentledger_lock_waits_total", tool="ops_logged_write") == RUNS
    assert total(m, "agentledger_inbox_rejected_entries") == 1  # read from Redis
    assert total(m, "agentledger_inbox_rejected_total") == 0  # the workers run no intake
    assert total(operated["intake_metrics"], "agentledger_inbox_rejected_total") == 1
    # two model requests a run, each a step of the model pool: a message it ran, or a step
    # carried on in the append of the outcome before it; the tools pool's steps likewise
    for pool in ("model", "tools"):
        ran = total(m, "agentledger_step_seconds_count", pool=pool, outcome="ok")
        assert ran >= RUNS  # a run's first model request; the write told its lock is free
        assert ran + total(m, "agentledger_steps_carried_total", pool=pool) >= 2 * RUNS
    assert total(m, "agentledger_step_seconds_count", pool="accept") >= RUNS
    assert total(m, "agentledger_step_seconds_sum", pool="tools") >= 1.0 * RUNS  # the slow reads
    # and every queue gauge of every pool read 0 (all done, none dead): the scrape kept
    # is the first that showed it, the fixture fails if none does


def test_the_latency_histograms_busy_threads_and_tenant_cost_are_scraped(
    operated: dict[str, Any],
) -> None:
    """Every series the Grafana dashboard names is in the workers' real scrape (two
    processes: prometheus_client's multiprocess files, added up by the parent)."""
    m = operated["after"]
    scraped = {key.split("{", 1)[0] for key in m}
    assert dashboard_names() <= scraped, dashboard_names() - scraped
    for tool in ("ops_slow_read", "ops_logged_write"):
        assert (
            total(m, "agentledger_tool_call_seconds_count", tool=tool, outcome="succeeded") == RUNS
        )
    # the slow read sleeps 1 s in each run, and the write waited for its lock meanwhile
    assert total(m, "agentledger_tool_call_seconds_sum", tool="ops_slow_read") >= 1.0 * RUNS
    assert total(m, "agentledger_lock_wait_seconds_count", tool="ops_logged_write") == RUNS
    assert total(m, "agentledger_lock_wait_seconds_sum", tool="ops_logged_write") >= 0.5 * RUNS
    # two model requests a run, the scripted model taking 0.8 s and 1.5 s
    assert (
        total(m, "agentledger_model_call_seconds_count", model="scripted", outcome="ok") == 2 * RUNS
    )
    assert total(m, "agentledger_model_call_seconds_sum", model="scripted") >= 2.3 * RUNS
    assert (
        total(m, "agentledger_model_call_tokens_count", model="scripted", kind="input") == 2 * RUNS
    )
    assert total(m, "agentledger_run_seconds_count", status="completed") == RUNS
    assert total(m, "agentledger_run_seconds_sum", status="completed") >= 3.3 * RUNS
    assert total(m, "agentledger_queue_wait_seconds_count", pool="model") >= RUNS
    assert 0 < total(m, "agentledger_tenant_cost_usd_total", tenant="t") < 0.1
    assert total(m, "agentledger_pool_threads", pool="tools") >= 2  # each process's budget, added
    assert total(m, "agentledger_pool_threads_busy") == 0  # all done


def test_the_probes_answer(operated: dict[str, Any]) -> None:
    probes = operated["probes"]
    assert probes["/healthz"] == (200, "ok\n")
    assert probes["/readyz"] == (200, "ok\n")
    assert probes["/nothing"][0] == 404
    assert operated["intake_probes"] == {"/healthz": (200, "ok\n"), "/readyz": (200, "ok\n")}


def test_json_log_lines_name_run_call_pool_and_worker_and_hide_secrets(
    operated: dict[str, Any],
) -> None:
    stderr = operated["stderr"]
    assert SECRET not in stderr and "sk-ant-api03-abcdefghijklmnop" not in stderr
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    for record in records:
        assert {"at", "level", "logger", "message", "run_id", "call_id", "pool", "worker",
                "trace_id", "span_id"} <= set(record)  # fmt: skip
        assert record["worker"], record
    wrote = [r for r in records if r["logger"] == "ops_tools"]
    assert len(wrote) == RUNS
    for record in wrote:
        assert record["run_id"].startswith("r-") and record["call_id"] == "c2", record
        assert record["pool"] == "tools" and record["level"] == "warning"
        # the span it was written in: the call's, in the run's trace (as `trace` names them)
        assert record["trace_id"] == trace_id_of(record["run_id"])
        assert record["span_id"] == tool_span_id(record["run_id"], "c2")
        assert "[REDACTED:OPS_SECRET]" in record["message"]
    assert len({r["run_id"] for r in wrote}) == RUNS
    rejected = [r for r in records if "rejected" in r["message"]]
    assert rejected and rejected[0]["run_id"] is None  # the intake's own line: no run


def test_run_logs_json_lines_too(private_redis: PrivateRedis, tmp_path: Path) -> None:
    """The embedded `run --log-format json`: its pools' records name run, call and pool."""
    env = clean_environ(f"opsrun{uuid.uuid4().hex[:8]}", tmp_path / "state")
    env |= {"REDIS_URL": private_redis.url, "AGENTLEDGER_SANDBOX": "off", "OPS_SECRET": SECRET}
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "ops_tools.py").write_text((TOOLS / "ops_tools.py").read_text())
    done = subprocess.run(
        [*AGENTLEDGER, "run", "spec.yaml", "--json", "--log-format", "json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    (wrote,) = [r for r in records if r["logger"] == "ops_tools"]
    assert (wrote["run_id"], wrote["call_id"], wrote["pool"]) == (run_id, "c2", "tools")
    assert SECRET not in done.stderr


def test_a_dead_worker_process_is_replaced_and_readiness_waits_for_its_first_beat(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    env = clean_environ(f"opslive{uuid.uuid4().hex[:8]}", tmp_path / "state")
    env |= {"REDIS_URL": private_redis.url, "AGENTLEDGER_SANDBOX": "off"}
    parent = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--processes", "2", "--metrics-port", "0"],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert parent.stdout is not None
        said = re.search(r"metrics on port (\d+)", parent.stdout.readline())
        assert said, "the workers did not start"
        port = int(said.group(1))
        until("ready", lambda: get(port, "/readyz") == (200, "ok\n"))
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
        assert len(children) == 2
        os.kill(int(children[0]), signal.SIGKILL)

        def replaced() -> list[str] | None:
            now = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
            return now if len(now) == 2 and children[0] not in now else None

        now = until("the dead process replaced", replaced)
        assert children[1] in now  # the other one was left alone
        until(
            "ready again once the new process beats", lambda: get(port, "/readyz") == (200, "ok\n")
        )
        assert get(port, "/healthz")[0] == 200
    finally:
        parent.terminate()
        parent.wait(timeout=30)

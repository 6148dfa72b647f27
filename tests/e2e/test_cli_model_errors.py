"""Every model error ends the run or waits visibly, as a user meets it: through
the real anthropic SDK against the local stand-in of the Messages API (an
overloaded API, a wrong key, a refused permission, a rate limit), and against a
loopback port nobody listens on. Each failed request is in the timeline with
its cause and logged as one warning line; past the turn's bound (or at once,
when retrying cannot help) the run ends `failed` and `status` says why; neither
the CLI nor the workers print a traceback. Before `run` creates anything, its
model is checked: no key, or an API that takes no connection, is exit 2 with
nothing recorded."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2ekit import AGENTLEDGER, Cli, of_type, start_intake, stop_workers, types

from tests.standin.messages_api import Failed, MessagesStandin, Streamed, Text

KEY = "sk-ant-e2e-errors-5d2c8b1a9f"
BOUND = {"AGENTLEDGER_MODEL_MAX_ATTEMPTS": "3", "AGENTLEDGER_MODEL_RETRY_S": "60"}
SAY_DONE = """\
task: "Say done."
principal: {id: alice, tenant: shop-1, scopes: []}
model:
  anthropic: {model: claude-test, max_tokens: 1024}
"""
ENDED = re.compile(r"^run (\S+): (\S+)  (.*)$", re.MULTILINE)


@pytest.fixture
def spec(cli: Cli) -> Path:
    path = cli.cwd / "say_done.yaml"
    path.write_text(SAY_DONE)
    return path


def on(cli: Cli, url: str) -> None:
    cli.env |= {
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    cli.env |= BOUND


def ended(done: subprocess.CompletedProcess[str]) -> tuple[str, str, str]:
    found = ENDED.search(done.stdout)
    assert found, f"no end line:\n{done.stdout}\n{done.stderr}"
    return found.group(1), found.group(2), found.group(3)


def no_traceback(*outputs: str) -> None:
    for text in outputs:
        assert "Traceback" not in text and "dramatiq.worker" not in text, text


def unused_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_overloaded_api_ends_the_run_failed_after_the_turns_attempts_with_the_cause(
    cli: Cli, spec: Path
) -> None:
    with MessagesStandin() as api:
        api.always(Failed(529, "overloaded_error", "Overloaded"))
        on(cli, api.url)
        done = cli("run", spec)
        asked = len(api.requests)

    run_id, status, detail = ended(done)
    assert (done.returncode, status, asked) == (1, "failed", 3)
    assert detail.startswith(
        "model request failed (turn 1): overloaded (529 overloaded_error): Overloaded; "
        "gave up after 3 attempts in "
    )
    assert detail.endswith("(the bound: 3 attempts, 60 s a turn)")
    warned = [ln for ln in done.stderr.splitlines() if ln.startswith("WARNING")]
    assert [w.split(": model request failed: ")[0] for w in warned] == [
        f"WARNING agentledger.services.handlers.model: run {run_id} turn 1 attempt {n}"
        for n in (1, 2, 3)
    ]
    assert warned[-1].endswith("Overloaded; the run fails")
    no_traceback(done.stdout, done.stderr)
    shown = cli("status", run_id, "--json")
    assert shown.returncode == 1 and json.loads(shown.stdout)["detail"] == detail
    events = cli.events(run_id)
    assert types(events)[1:] == [
        "ModelRequested", "ModelRequestFailed", "ModelRequested", "ModelRequestFailed",
        "ModelRequested", "ModelRequestFailed", "RunFailed",
    ]  # fmt: skip
    failed = of_type(events, "ModelRequestFailed")
    assert [(f["kind"], f["status"], f["attempt"]) for f in failed] == [
        ("overloaded", 529, n) for n in (1, 2, 3)
    ]
    assert failed[0]["retry_at"] and failed[1]["retry_at"] and failed[2]["retry_at"] is None
    timeline = cli("tail", "--run", run_id)
    assert (
        "ModelRequestFailed       turn 1 attempt 3 (not retried): overloaded (529"
        in timeline.stdout
    )


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (Failed(401, "authentication_error", "invalid x-api-key"),
         "authentication failed (401 authentication_error): invalid x-api-key"),
        (Failed(403, "permission_error", "this key may not use claude-test"),
         "permission denied (403 permission_error): this key may not use claude-test"),
        (Failed(400, "invalid_request_error", "max_tokens: too large"),
         "request refused (400 invalid_request_error): max_tokens: too large"),
    ],
    ids=["401", "403", "400"],
)  # fmt: skip
def test_an_error_retrying_cannot_help_ends_the_run_at_its_first_attempt(
    cli: Cli, spec: Path, reply: Failed, cause: str
) -> None:
    with MessagesStandin() as api:
        api.always(reply)
        on(cli, api.url)
        done = cli("run", spec)
        asked = len(api.requests)

    run_id, status, detail = ended(done)
    assert (done.returncode, status, asked) == (1, "failed", 1)
    assert detail == f"model request failed (turn 1): {cause}; retrying cannot help"
    no_traceback(done.stdout, done.stderr)
    assert json.loads(cli("status", run_id, "--json").stdout)["detail"] == detail


def test_a_rate_limited_request_is_asked_again_after_the_wait_the_api_asked_for(
    cli: Cli, spec: Path
) -> None:
    with MessagesStandin() as api:
        api.play(
            Failed(429, "rate_limit_error", "slow down", retry_after=1), Streamed((Text("done"),))
        )
        on(cli, api.url)
        done = cli("run", spec)

    run_id, status, _ = ended(done)
    assert (done.returncode, status) == (0, "completed")
    events = cli.events(run_id)
    [failed] = [e for e in events if e["type"] == "ModelRequestFailed"]
    assert (failed["data"]["kind"], failed["data"]["status"]) == ("rate_limited", 429)
    [_, again] = [e for e in events if e["type"] == "ModelRequested"]
    assert again["data"]["attempt"] == 2
    assert again["at"] >= failed["at"] + 1.0, "the wait the API asked for was honoured"
    no_traceback(done.stdout, done.stderr)


@pytest.fixture
def worker_logs(cli: Cli) -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    stop_workers(started)


def test_a_refused_connection_ends_a_submitted_run_failed_naming_the_url_and_no_worker_prints_a_traceback(
    cli: Cli, spec: Path, worker_logs: list[Any]
) -> None:
    url = f"http://127.0.0.1:{unused_port()}"
    on(cli, url)
    cli.env["AGENTLEDGER_MODEL_MAX_ATTEMPTS"] = "2"
    logs = cli.cwd / "workers.log"
    with logs.open("w") as log:
        workers = subprocess.Popen(
            [*AGENTLEDGER, "workers"], cwd=cli.cwd, env=cli.env, text=True,
            stdout=subprocess.PIPE, stderr=log,
        )  # fmt: skip
    worker_logs.append(workers)
    assert workers.stdout is not None and "workers up" in workers.stdout.readline()
    worker_logs.append(start_intake(cli))
    submitted = cli("submit", "--as", cli.publisher(), spec)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    no_traceback(submitted.stderr)  # submit says nothing of the workers' credentials
    assert "ANTHROPIC" not in submitted.stderr

    started = time.monotonic()
    events = cli.wait_events(run_id, lambda es: "RunFailed" in types(es), timeout_s=60)
    assert time.monotonic() - started < 60
    [ended_] = of_type(events, "RunFailed")
    assert ended_["detail"].startswith(
        f"model request failed (turn 1): connection refused at {url}; gave up after 2 attempts in "
    )
    assert [f["kind"] for f in of_type(events, "ModelRequestFailed")] == [
        "connection",
        "connection",
    ]
    shown = cli("status", run_id)
    assert shown.returncode == 1 and f"connection refused at {url}" in shown.stdout
    warned_by = time.monotonic() + 30  # each is written just after its failure's append
    while logs.read_text().count("model request failed") < 2 and time.monotonic() < warned_by:
        time.sleep(0.1)
    stop_workers(worker_logs)
    said = logs.read_text()
    no_traceback(said)
    warned = [ln for ln in said.splitlines() if "model request failed" in ln]
    assert len(warned) == 2 and all(
        run_id in w and f"connection refused at {url}" in w for w in warned
    )


def test_run_without_a_key_exits_2_before_anything_is_recorded(cli: Cli, spec: Path) -> None:
    cli.env.pop("ANTHROPIC_API_KEY", None)
    done = cli("run", spec)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "agentledger: ANTHROPIC_API_KEY is not set: the spec's model is anthropic (claude-test); "
        "export the key (or set `model: scripted`), then run again; nothing was recorded"
    )
    as_json = cli("run", "--json", spec)
    assert as_json.returncode == 2
    said = json.loads(as_json.stdout)
    assert (said["error"], said["variable"], said["exit_code"]) == (
        "ANTHROPIC_API_KEY is not set",
        "ANTHROPIC_API_KEY",
        2,
    )
    assert cli.runs() == []


def test_run_with_an_api_that_takes_no_connection_exits_2_naming_the_url(
    cli: Cli, spec: Path
) -> None:
    url = f"http://127.0.0.1:{unused_port()}"
    on(cli, url)
    done = cli("run", spec)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"agentledger: the model's API is unreachable: connection refused at {url} "
        "(ANTHROPIC_BASE_URL); nothing was recorded"
    )
    no_traceback(done.stderr)
    assert cli.runs() == []


def test_workers_without_a_key_warn_once_at_start(cli: Cli) -> None:
    cli.env.pop("ANTHROPIC_API_KEY", None)
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--queue", "nokey"], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert workers.stdout is not None and "workers up" in workers.stdout.readline()
    finally:
        workers.terminate()
        _, stderr = workers.communicate(timeout=30)
    warned = [ln for ln in stderr.splitlines() if "ANTHROPIC_API_KEY is not set" in ln]
    assert warned == [
        "agentledger: ANTHROPIC_API_KEY is not set for these workers: a run on queue 'nokey' "
        "whose model is anthropic fails at its first model request (scripted runs are served)"
    ]

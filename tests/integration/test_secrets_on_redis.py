"""Secrets on a real redis-server: with the default spec they are redacted before
any entry is written; a spec that keeps them keeps them in the log, and then
`tail` and `status` still print them redacted while `raw` prints them as
stored. Log lines of the process are redacted too."""

from __future__ import annotations

import io
import json
import logging
from dataclasses import replace
from typing import Any

import pytest
import redis

from agentledger.events.types import Event, ModelRequested, ModelResponded, RunCreated, RunFailed
from agentledger.schemas.content import TextBlock, ThinkingBlock
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.redis.locate import Located, Origin
from agentledger.services.entrypoints.cli import context_cmds, inspect_cmds, tail_cmds
from agentledger.services.handlers.app import App
from agentledger.services.handlers.runs import envelopes
from agentledger.services.keys import Keys
from agentledger.services.secrets import LOG_FILTER
from agentledger.services.session import Session, session_over
from agentledger.services.settings import Settings

VAR, VALUE = "IT_DEPLOY_TOKEN", "itv-8c1d2e3f4a5b6978"
AWS = "AKIAIOSFODNN7EXAMPLE"
THINKING = ThinkingBlock(thinking=f"I must not repeat {VALUE}", signature="c2ln")


def spec(*, keep: bool) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "integration test run",
            "principal": {"id": "it", "tenant": "it-tenant"},
            "model": {"scripted": [{"end_turn": "done"}]},
            "secrets": [VAR],
            "keep_secrets_in_log": keep,
        }
    )


def leaky_run(app: App, run_id: str, *, keep: bool) -> None:
    """A legal log whose model reply and failure detail carry the secret."""
    events: list[Event] = [
        RunCreated(spec=spec(keep=keep)),
        ModelRequested(turn=1, attempt=1, deadline_at=9e9),
        ModelResponded(
            turn=1,
            content=(THINKING, TextBlock(text=f"the token is {VALUE}")),
            stop_reason="end_turn",
            model="m",
        ),
        RunFailed(reason="it", detail=f"leaked {VALUE} and {AWS}"),
    ]
    batch = envelopes(run_id, events, after_seq=0, at=1.0, source="it")
    app.store.append(run_id, batch, expected_seq=0, live=False)


def stored_bytes(client: redis.Redis, keys: Keys, run_id: str) -> bytes:
    return b"".join(fields[b"e"] for _, fields in client.xrange(keys.run(run_id)))


@pytest.fixture
def session(settings: Settings, client: redis.Redis, keys: Keys, app: App) -> Session:
    found = Located(settings.redis_url or "", Origin.REDIS_URL, settings.state_dir)
    return replace(session_over(settings, client, found), store=app.store)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, VALUE)


def test_by_default_secrets_are_redacted_before_anything_reaches_redis(
    app: App, client: redis.Redis, keys: Keys
) -> None:
    leaky_run(app, "run-redacted", keep=False)
    raw = stored_bytes(client, keys, "run-redacted")
    assert VALUE.encode() not in raw.replace(THINKING.thinking.encode(), b"")
    assert AWS.encode() not in raw
    assert f"[REDACTED:{VAR}]".encode() in raw and b"[REDACTED:aws_access_key_id]" in raw
    reply = app.store.read("run-redacted")[2].data
    assert reply.content[0] == THINKING  # signed: kept verbatim
    assert reply.content[1] == TextBlock(text=f"the token is [REDACTED:{VAR}]")


EVERY = {"types": None, "from_start": False}  # every event type; no --from-start


def test_a_spec_that_keeps_secrets_keeps_them_but_tail_and_status_print_them_redacted(
    app: App, client: redis.Redis, keys: Keys, session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    leaky_run(app, "run-kept", keep=True)
    assert stored_bytes(client, keys, "run-kept").count(VALUE.encode()) == 3
    printed: list[str] = []
    for show in (
        lambda: tail_cmds.tail(session, run_id="run-kept", follow=False, as_json=False, **EVERY),
        lambda: tail_cmds.tail(session, run_id="run-kept", follow=False, as_json=True, **EVERY),
        lambda: inspect_cmds.status(session, "run-kept", as_json=False),
        lambda: inspect_cmds.status(session, "run-kept", as_json=True),
    ):
        show()
        printed.append(capsys.readouterr().out)
    assert all(VALUE not in out and AWS not in out for out in printed)
    assert f"[REDACTED:{VAR}]" in printed[1] and "[REDACTED:aws_access_key_id]" in printed[3]
    status: dict[str, Any] = json.loads(printed[3])
    assert status["status"] == "failed" and status["detail"].startswith("leaked [REDACTED:")


def test_raw_is_the_one_command_that_prints_the_stored_entries(
    app: App, session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    leaky_run(app, "run-raw", keep=True)
    assert context_cmds.raw(session, "run-raw", after_seq=0) == 0
    out, err = capsys.readouterr()
    assert f"leaked {VALUE}" in out and "not redacted" in err
    assert len(out.splitlines()) == 4
    assert context_cmds.raw(session, "run-missing", after_seq=0) == 2


def test_log_lines_and_tracebacks_are_redacted() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LOG_FILTER)
    log = logging.getLogger("it.secrets")
    log.addHandler(handler)
    try:
        LOG_FILTER.learn({VAR: VALUE})
        log.warning("calling with %s and key %s", VALUE, "sk-ant-api03-abcdefghijklmn")
        try:
            raise RuntimeError(f"refused {VALUE}")
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert VALUE not in text and "sk-ant-api03" not in text
    assert f"[REDACTED:{VAR}]" in text and "[REDACTED:anthropic_api_key]" in text
    assert "RuntimeError: refused [REDACTED:" in text

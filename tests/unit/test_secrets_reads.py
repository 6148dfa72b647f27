"""A run's secrets are read from the environment once a CHECK_S per spec on a
thread, not at every model request of a carried run; a new spec, or a change to
the process's own secrets, is read afresh at once."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.schemas.spec import RunSpec
from agentledger.services import secrets
from agentledger.services.settings import Settings

SPEC: dict[str, Any] = {
    "task": "secrets read once",
    "principal": {"id": "u", "tenant": "t"},
    "model": {"scripted": [{"end_turn": "done"}]},
    "secrets": ["UNIT_READ_ONCE_TOKEN"],
}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []
    real = secrets.read_secrets

    def counted(names: Any, environ: Any = None) -> dict[str, str]:
        if names:  # a run's (the process's own are read when its generation is due)
            seen.append(tuple(names))
        return real(names, environ)

    monkeypatch.setattr(secrets, "read_secrets", counted)
    monkeypatch.setenv("UNIT_READ_ONCE_TOKEN", "tok-read-once-1234567")
    return seen


def test_a_runs_secrets_are_read_once_for_many_model_requests(reads: list[Any]) -> None:
    spec = RunSpec.model_validate(SPEC)
    made = {id(secrets.redactor_for(spec)) for _ in range(200)}
    assert len(made) == 1
    assert reads == [("UNIT_READ_ONCE_TOKEN",)]
    assert secrets.redactor_for(spec).text("x tok-read-once-1234567") == (
        "x [REDACTED:UNIT_READ_ONCE_TOKEN]"
    )


def test_another_spec_is_read_afresh(reads: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    secrets.redactor_for(RunSpec.model_validate(SPEC))
    monkeypatch.setenv("UNIT_READ_ONCE_TOKEN", "tok-read-once-7654321")
    r = secrets.redactor_for(RunSpec.model_validate(SPEC))
    assert len(reads) == 2
    assert r.text("tok-read-once-7654321") == "[REDACTED:UNIT_READ_ONCE_TOKEN]"


def test_a_change_to_the_process_secrets_is_taken_at_once(reads: list[Any]) -> None:
    spec = RunSpec.model_validate(SPEC)
    before = secrets.redactor_for(spec)
    secrets.configure(Settings(redis_url="redis://:pw-read-once-99@127.0.0.1:1/0"))
    after = secrets.redactor_for(spec)
    assert after is not before
    assert after.text("pw-read-once-99") == "[REDACTED:redis_password]"

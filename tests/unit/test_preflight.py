"""Before `run` creates a run, its model is checked from here: a key, and an API
address that takes a TCP connection (through the proxy the environment names).
Each refusal names what is wrong in one line; no request is sent and no
connection leaves this test (`connect` is a stand-in)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from agentledger.schemas.spec import AnthropicModel, AnthropicSettings, ScriptedModel
from agentledger.services.adapters.models.preflight import check_provider
from agentledger.services.errors import ProviderUnready
from agentledger.services.settings import Settings

CLAUDE = AnthropicModel(anthropic=AnthropicSettings(model="claude-sonnet-4-5"))
KEYED = Settings(anthropic_api_key="sk-ant-test-0123456789")


class Connect:
    """Records where it was asked to connect; fails with `error` when given."""

    def __init__(self, error: OSError | None = None) -> None:
        self.error = error
        self.asked: list[tuple[str, int]] = []

    def __call__(self, address: tuple[str, int], timeout: float) -> Any:
        self.asked.append(address)
        assert timeout <= 5.0, "a short timeout"
        if self.error is not None:
            raise self.error
        return socket.socket()  # closed at once, never connected


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def refusal(settings: Settings, connect: Connect) -> str:
    with pytest.raises(ProviderUnready) as raised:
        check_provider(CLAUDE, settings, connect=connect)
    assert "\n" not in str(raised.value)
    return str(raised.value)


def test_an_anthropic_spec_without_a_key_is_refused_naming_the_variable_and_nothing_is_tried() -> (
    None
):
    connect = Connect()
    said = refusal(Settings(), connect)
    assert said.startswith(
        "ANTHROPIC_API_KEY is not set: the spec's model is anthropic (claude-sonnet-4-5); "
    )
    assert connect.asked == []


def test_a_scripted_spec_needs_no_key_and_no_connection() -> None:
    connect = Connect(ConnectionRefusedError())
    check_provider(ScriptedModel(scripted=[{"end_turn": "done"}]), Settings(), connect=connect)
    assert connect.asked == []


def test_the_default_api_is_tried_on_its_https_port() -> None:
    connect = Connect()
    check_provider(CLAUDE, KEYED, connect=connect)
    assert connect.asked == [("api.anthropic.com", 443)]


def test_a_refused_base_url_is_named_with_its_variable() -> None:
    connect = Connect(ConnectionRefusedError(111, "Connection refused"))
    settings = KEYED.with_(anthropic_base_url="http://127.0.0.1:1")
    assert refusal(settings, connect) == (
        "the model's API is unreachable: connection refused at http://127.0.0.1:1 "
        "(ANTHROPIC_BASE_URL); nothing was recorded"
    )
    assert connect.asked == [("127.0.0.1", 1)]


def test_a_host_that_does_not_resolve_is_said() -> None:
    connect = Connect(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    settings = KEYED.with_(anthropic_base_url="https://nowhere.invalid")
    assert refusal(settings, connect) == (
        "the model's API is unreachable: the host 'nowhere.invalid' does not resolve (Name or "
        "service not known) at https://nowhere.invalid (ANTHROPIC_BASE_URL); nothing was recorded"
    )


def test_no_answer_in_time_is_said() -> None:
    said = refusal(KEYED, Connect(TimeoutError("timed out")))
    assert "no answer within 5 s at https://api.anthropic.com; nothing was recorded" in said


def test_a_base_url_that_is_not_a_url_is_refused() -> None:
    settings = KEYED.with_(anthropic_base_url="127.0.0.1:8080")
    assert "'127.0.0.1:8080' (ANTHROPIC_BASE_URL) is not http(s)://host[:port]" in refusal(
        settings, Connect()
    )


def test_through_a_proxy_the_proxy_takes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    connect = Connect(ConnectionRefusedError())
    said = refusal(KEYED, connect)
    assert connect.asked == [("127.0.0.1", 3128)]
    assert (
        "connection refused at https://api.anthropic.com (through the proxy http://127.0.0.1:3128)"
        in said
    )


def test_a_host_no_proxy_names_is_tried_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    connect = Connect()
    check_provider(CLAUDE, KEYED.with_(anthropic_base_url="http://127.0.0.1:8080"), connect=connect)
    assert connect.asked == [("127.0.0.1", 8080)]

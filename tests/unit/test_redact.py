"""Redaction: declared secret values and well-known credential patterns become
`[REDACTED:name]` in text, nested values and events; thinking blocks and the
run's spec are left as they are; nothing else changes."""

from __future__ import annotations

import json

import pytest

from agentledger.events.redact import (
    MIN_SECRET_CHARS,
    Redactor,
    redact_envelope,
    redact_event,
    redactor,
)
from agentledger.events.types import (
    ModelResponded,
    RunCreated,
    ToolCallFailed,
    ToolCallProposed,
    ToolCallSucceeded,
    ToolError,
)
from agentledger.schemas.content import (
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import Principal, RunSpec, ScriptedModel, ScriptedTurn

TOKEN = "tok-5d41402abc4b2a76"
R = redactor({"DEPLOY_TOKEN": TOKEN})

PATTERN_CASES = [
    ("key sk-ant-api03-AbCdEf0123456789_xyz-QQ here", "anthropic_api_key"),
    ("OPENAI=sk-proj-abcdefghijklmnopqrstuvwx", "api_key"),
    ("aws AKIAIOSFODNN7EXAMPLE.", "aws_access_key_id"),
    ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_token"),
    ("slack xoxb-1234567890-abcdefghij", "slack_token"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "bearer_token"),
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nabc==\n-----END RSA PRIVATE KEY-----"


def test_a_declared_value_is_replaced_by_its_name() -> None:
    assert (
        R.text(f"export DEPLOY={TOKEN}; echo ok")
        == "export DEPLOY=[REDACTED:DEPLOY_TOKEN]; echo ok"
    )


@pytest.mark.parametrize(("text", "name"), PATTERN_CASES)
def test_a_well_known_credential_is_replaced_by_its_kind(text: str, name: str) -> None:
    out = Redactor().text(text)
    assert f"[REDACTED:{name}]" in out
    assert out.count("[REDACTED:") == 1


def test_a_private_key_block_goes_whole_even_inside_json_text_or_cut_off() -> None:
    assert Redactor().text(f"a {PEM} b") == "a [REDACTED:private_key] b"
    assert Redactor().text(json.dumps({"key": PEM})) == '{"key": "[REDACTED:private_key]"}'
    assert Redactor().text("x -----BEGIN PRIVATE KEY-----\nMIIE") == "x [REDACTED:private_key]"


def test_a_value_is_found_as_it_reads_inside_json_text_too() -> None:
    odd = 'pa"ss\\wörd-42'
    r = redactor({"DB_PASSWORD": odd})
    for dumped in (json.dumps({"p": odd}), json.dumps({"p": odd}, ensure_ascii=False)):
        assert odd not in r.text(dumped) and "[REDACTED:DB_PASSWORD]" in r.text(dumped)


def test_the_longer_of_two_overlapping_values_wins_and_short_values_are_ignored() -> None:
    r = redactor({"SHORT": "abc", "INNER": "secret-1", "OUTER": "secret-1-extended"})
    assert r.text("secret-1-extended secret-1 abc") == "[REDACTED:OUTER] [REDACTED:INNER] abc"
    assert len("abc") < MIN_SECRET_CHARS


def test_redacting_twice_changes_nothing_more_and_plain_text_is_untouched() -> None:
    text = f"{TOKEN} AKIAIOSFODNN7EXAMPLE Bearer {'x' * 20} the stock of A1 is 3"
    once = R.text(text)
    assert R.text(once) == once
    assert (
        R.text("the stock of A1 is 3; call c17 toolu_01ABC")
        == "the stock of A1 is 3; call c17 toolu_01ABC"
    )


def test_nested_values_keep_their_shape() -> None:
    value = {"cfg": [TOKEN, {"k": f"x{TOKEN}"}], "n": 3, "t": (None, True, 1.5)}
    assert R.value(value) == {
        "cfg": ["[REDACTED:DEPLOY_TOKEN]", {"k": "x[REDACTED:DEPLOY_TOKEN]"}],
        "n": 3,
        "t": (None, True, 1.5),
    }


def test_the_values_never_show_in_a_repr() -> None:
    assert TOKEN not in repr(R)


def test_tool_inputs_outputs_and_errors_are_redacted_in_events() -> None:
    done = ToolCallSucceeded(
        call_id="c1", output={"env": f"T={TOKEN}"}, started_at=1, finished_at=2
    )
    assert redact_event(done, R).output == {"env": "T=[REDACTED:DEPLOY_TOKEN]"}  # type: ignore[union-attr]
    failed = ToolCallFailed(
        call_id="c1",
        error=ToolError(code="internal", message=f"auth {TOKEN} refused", retryable=False),
        finished_at=2,
    )
    assert redact_event(failed, R).error.message == "auth [REDACTED:DEPLOY_TOKEN] refused"  # type: ignore[union-attr]
    proposed = ToolCallProposed(call_id="c1", turn=1, name="w", input={"text": TOKEN})
    assert redact_event(proposed, R).input == {"text": "[REDACTED:DEPLOY_TOKEN]"}  # type: ignore[union-attr]


def test_a_model_reply_keeps_its_thinking_blocks_verbatim() -> None:
    thinking = ThinkingBlock(thinking=f"the token is {TOKEN}", signature="c2lnbmF0dXJl")
    hidden = RedactedThinkingBlock(data="EmwKAhgBEgy3va3pzix")
    reply = ModelResponded(
        turn=1,
        content=(
            thinking,
            hidden,
            TextBlock(text=TOKEN),
            ToolUseBlock(id="u", name="w", input={"t": TOKEN}),
        ),
        stop_reason="tool_use",
        model="m",
    )
    out = redact_event(reply, R)
    assert out.content[:2] == (thinking, hidden)  # type: ignore[union-attr]
    assert out.content[2] == TextBlock(text="[REDACTED:DEPLOY_TOKEN]")  # type: ignore[union-attr]
    assert out.content[3].input == {"t": "[REDACTED:DEPLOY_TOKEN]"}  # type: ignore[union-attr]


def test_an_event_without_secrets_and_the_runs_spec_come_back_as_the_same_objects() -> None:
    clean = ToolCallSucceeded(call_id="c1", output={"available": 3}, started_at=1, finished_at=2)
    assert redact_event(clean, R) is clean
    spec = RunSpec(
        task=f"use {TOKEN}",
        principal=Principal(id="a", tenant="t"),
        model=ScriptedModel(scripted=(ScriptedTurn(end_turn="x"),)),
    )
    created = RunCreated(spec=spec)
    assert redact_event(created, R) is created
    env = Envelope(id="e", run_id="r", seq=2, type=clean.type, at=1.0, source="tools", data=clean)
    assert redact_envelope(env, R) is env


def test_the_providers_blocks_go_back_untouched_and_cited_text_is_redacted() -> None:
    from pydantic import TypeAdapter

    from agentledger.schemas.content import ContentBlock, ProviderBlock, TextBlock

    r = redactor({"DEPLOY_TOKEN": "tok-9f8e7d6c5b4a"})
    result = TypeAdapter(ContentBlock).validate_python(
        {"type": "web_fetch_tool_result", "tool_use_id": "srv_1",
         "content": {"type": "web_fetch_result", "url": "https://x", "retrieved_at": None,
                     "content": {"type": "document", "source": {"type": "text", "data": "tok-9f8e7d6c5b4a"}}}}
    )  # fmt: skip
    assert isinstance(result, ProviderBlock) and r.block(result) is result
    cited = TextBlock(
        text="The token is tok-9f8e7d6c5b4a.",
        citations=(
            {"type": "char_location", "cited_text": "tok-9f8e7d6c5b4a", "document_index": 0},
        ),
    )
    clean = r.block(cited)
    assert isinstance(clean, TextBlock) and "tok-9f8e7d6c5b4a" not in clean.model_dump_json()
    assert clean.citations is not None and clean.citations[0]["document_index"] == 0


def test_the_one_trigger_scan_knows_every_pattern_trigger() -> None:
    from agentledger.events.redact import PATTERNS, _may_match

    for _, triggers, _pattern in PATTERNS:
        for t in triggers:
            assert _may_match(f"some text {t} more")
    assert not _may_match('{"type":"toolcallstarted","call_id":"c1"}')


@pytest.mark.parametrize("pad", [0, 40, 5000], ids=["short", "medium", "long"])
def test_every_form_of_every_value_is_found_in_short_and_long_text_alike(pad: int) -> None:
    """Every form of every value is found wherever it stands in a text, short or long,
    values with regex metacharacters and non-ASCII ones included."""
    values = {
        "key": "0f" * 32,
        "meta": "p@ss.w*rd+(x)|[y]?$^\\",
        "accented": "pässwörd-üñí",
    }
    r = redactor(values)
    for form, name in r.values:
        text = "x" * pad + f" {form} " + "y" * pad
        assert r.finds(text), (name, form, pad)
        assert f"[REDACTED:{name}]" in r.text(text)
    clean = "x" * pad + " nothing secret here " + "y" * pad
    assert not r.finds(clean) and r.text(clean) == clean

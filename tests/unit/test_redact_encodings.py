"""Secrets are redacted in the forms they take when encoded — base64 (standard
and URL-safe, padded or not, at any offset inside longer base64), hex (lower
and upper case), URL-encoded — and the process's own secrets (the Redis
password of the URL it uses, every publisher key of the publishers file, inline
or in its variable) are redacted from every run, even one that keeps its own
secrets in the log."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from agentledger.events.redact import encoded_forms, redactor
from agentledger.events.types import RunFailed
from agentledger.schemas.codec import pack
from agentledger.schemas.spec import RunSpec
from agentledger.services import secrets
from agentledger.services.settings import Settings

PASSWORD = "r3dis/pa ss+word=42"  # a slash, a space, a plus, an equals sign: every encoding differs
KEY = "9f" * 32  # a publisher key: 64 hex characters
ENCODINGS: dict[str, Callable[[str], str]] = {
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64 unpadded": lambda v: base64.b64encode(v.encode()).decode().rstrip("="),
    "base64 url-safe": lambda v: base64.urlsafe_b64encode(v.encode()).decode(),
    "base64 url-safe unpadded": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "hex": lambda v: v.encode().hex(),
    "HEX": lambda v: v.encode().hex().upper(),
    "quote": lambda v: quote(v, safe=""),
    "quote keeping /": quote,
    "quote_plus": quote_plus,
    "json": lambda v: json.dumps(v)[1:-1],
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_each_encoded_form_of_a_secret_is_redacted(encoding: str) -> None:
    form = ENCODINGS[encoding](PASSWORD)
    out = redactor({"REDIS": PASSWORD}).text(f"said: {form}.")
    assert form not in out and out == "said: [REDACTED:REDIS]."


@pytest.mark.parametrize("before", [b"", b"x", b"xy", b"xyz", b"HOME=/root\x00REDIS_URL=redis://:"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_secret_inside_longer_base64_text_is_redacted_wherever_it_starts(
    before: bytes, encode: Callable[[bytes], bytes]
) -> None:
    """As `base64 /proc/self/environ` would print it: the secret's own characters go."""
    blob = encode(before + PASSWORD.encode() + b"@redis:6379/0\x00PATH=/bin").decode()
    out = redactor({"REDIS": PASSWORD}).text(blob)
    assert "[REDACTED:REDIS]" in out
    leftover = out.replace("[REDACTED:REDIS]", "")
    assert len(leftover) < len(blob) - len(PASSWORD)  # at most a character or two of its bits stay
    assert not any(f in out for f in encoded_forms(PASSWORD))


def test_a_hex_key_is_redacted_also_as_the_base64_of_its_bytes() -> None:
    raw = bytes.fromhex(KEY)
    r = redactor({"publisher_key:billing": KEY})
    for form in (
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    ):
        assert r.text(form) == "[REDACTED:publisher_key:billing]"


def test_plain_text_and_short_values_are_left_alone() -> None:
    r = redactor({"SHORT": "abc", "REDIS": PASSWORD})
    assert r.text("abc YWJj 616263 the stock of A1 is 3") == "abc YWJj 616263 the stock of A1 is 3"
    assert all(len(f) >= 6 for f in encoded_forms(PASSWORD))


def test_redacting_an_encoded_secret_twice_changes_nothing_more() -> None:
    r = redactor({"REDIS": PASSWORD})
    once = r.text(" ".join(f(PASSWORD) for f in ENCODINGS.values()))
    assert r.text(once) == once and once.count("[REDACTED:REDIS]") == len(ENCODINGS)


@pytest.mark.parametrize(
    ("url", "password"),
    [
        (f"redis://:{quote(PASSWORD, safe='')}@redis:6379/0", PASSWORD),
        (f"redis://ops:{quote(PASSWORD, safe='')}@redis:6379/0", PASSWORD),
        (f"unix:///run/redis.sock?db=0&password={quote(PASSWORD, safe='')}", PASSWORD),
        ("redis://redis:6379/0", None),
    ],
)
def test_the_password_of_a_redis_url_is_found_as_redis_py_uses_it(
    url: str, password: str | None
) -> None:
    found = secrets.redis_passwords(url)
    assert (password in found) if password else found == []


# --- the process's own secrets -------------------------------------------------------


SPEC = RunSpec.model_validate({
    "task": "t", "principal": {"id": "u", "tenant": "t"}, "model": {"scripted": [{"end_turn": "ok"}]},
    "secrets": ["UNIT_RUN_TOKEN"],
})  # fmt: skip
KEPT = SPEC.model_copy(update={"keep_secrets_in_log": True})
RUN_TOKEN = "run-token-5e6f7a8b9c"
ENV_KEY = "ab" * 32


@pytest.fixture
def process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh holder of this process's secrets: a Redis URL with a password and a
    publishers file with an inline key and one in a variable."""
    monkeypatch.setattr(secrets, "PROCESS", secrets.ProcessSecrets())
    monkeypatch.setattr(secrets, "CHECK_S", 0.0)
    monkeypatch.setenv("UNIT_RUN_TOKEN", RUN_TOKEN)
    monkeypatch.setenv("UNIT_SVC_KEY", ENV_KEY)
    path = tmp_path / "publishers.yaml"
    write_publishers(path, {"billing": {"key": KEY}, "shop": {"key_env": "UNIT_SVC_KEY"}})
    secrets.configure(Settings(
        redis_url=f"redis://:{quote(PASSWORD, safe='')}@redis:6379/0", probe_url=None,
        publishers_file=str(path), state_dir=str(tmp_path),
    ))  # fmt: skip
    yield path


def write_publishers(path: Path, publishers: dict[str, dict[str, str]]) -> None:
    grant = {"principals": [{"id": "u", "tenant": "t"}]}
    path.write_text(json.dumps({"publishers": {n: {**p, **grant} for n, p in publishers.items()}}))


def test_every_run_redacts_the_redis_password_and_every_publisher_key(process: Path) -> None:
    text = f"{PASSWORD} {base64.b64encode(KEY.encode()).decode()} {ENV_KEY.upper()} {RUN_TOKEN}"
    out = secrets.redactor_for(SPEC).text(text)
    assert out == (
        "[REDACTED:redis_password] [REDACTED:publisher_key:billing] "
        "[REDACTED:publisher_key:shop] [REDACTED:UNIT_RUN_TOKEN]"
    )


def test_a_run_that_keeps_its_secrets_still_never_stores_the_processs(process: Path) -> None:
    stored = secrets.stored_redactor(KEPT).text(
        f"{RUN_TOKEN} {PASSWORD} {KEY} AKIAIOSFODNN7EXAMPLE"
    )
    assert (
        stored
        == f"{RUN_TOKEN} [REDACTED:redis_password] [REDACTED:publisher_key:billing] AKIAIOSFODNN7EXAMPLE"
    )
    assert RUN_TOKEN not in secrets.stored_redactor(SPEC).text(RUN_TOKEN)


def test_a_publisher_filed_later_has_its_key_redacted_once_the_file_changes(process: Path) -> None:
    later = "cd" * 32
    assert secrets.redactor_for(SPEC).text(later) == later
    write_publishers(process, {"billing": {"key": KEY}, "late": {"key": later}})
    assert secrets.redactor_for(SPEC).text(later) == "[REDACTED:publisher_key:late]"


def test_a_publishers_file_this_process_cannot_parse_gives_no_keys_and_no_error(
    process: Path,
) -> None:
    process.write_text("publishers: [not, a, map")
    assert (
        secrets.redactor_for(SPEC).text(f"{PASSWORD} {KEY}") == f"[REDACTED:redis_password] {KEY}"
    )


def test_log_lines_of_the_process_are_redacted_in_every_form(process: Path) -> None:
    import logging

    record = logging.LogRecord("t", logging.INFO, __file__, 1, "url %s key %s",
                               (quote_plus(PASSWORD), KEY.upper()), None)  # fmt: skip
    secrets.LOG_FILTER.filter(record)
    assert (
        record.getMessage() == "url [REDACTED:redis_password] key [REDACTED:publisher_key:billing]"
    )


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("around", ["", "ünïcode ", "\u212a", "x" * 70, '"quoted" \\ '])
def test_the_scan_of_an_event_as_packed_finds_whatever_the_scan_of_its_json_finds(
    encoding: str, around: str
) -> None:
    """Each event is serialised once: its msgpack bytes are scanned, not its JSON; the
    bytes' scan says yes wherever the JSON's does (a string's length byte, a
    multi-byte neighbour or a JSON escape in front of the value changes nothing)."""
    r = redactor({"REDIS_PASSWORD": PASSWORD})
    texts = [
        f"{around}{ENCODINGS[encoding](PASSWORD)}{around}",
        f"{around}Bearer {'Z' * 20}",
        f"{around}sk-ant-{'q' * 12}",
        f"{around}AKIA{'B' * 16}",
        f"{around}-----BEGIN RSA PRIVATE KEY-----\nMIIE",
    ]
    found = 0
    for text in texts:
        event = RunFailed(reason="x", detail=text)
        if r.finds(event.model_dump_json()):  # (a word character before a pattern: no match)
            found += 1
            assert r.finds_packed(pack(event.model_dump(mode="json"))), text
    assert found >= 2  # the value's form and the bearer token at least
    assert not r.finds_packed(pack(RunFailed(reason="x", detail=f"{around}plain").model_dump()))

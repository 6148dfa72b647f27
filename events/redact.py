"""Redaction of secrets. Values declared secret (a run spec names environment
variables; `services/` reads their values at the edge and passes them in, with
the process's own: its Redis password, the publishers' keys) and well-known
credential patterns are replaced by `[REDACTED:name]`. Each value is matched in
the forms it takes when encoded (`encoded_forms`): escaped in JSON, base64
(standard and URL-safe, padded or not, and at any offset inside a longer
base64 text), hex (lower and upper case), URL-encoded.

Pure: no environment, no I/O. Used on every context view sent to a model, on
what `tail`, `status` and `run` print, on log lines, and on events before they
are appended when the spec does not keep secrets in the log. Text is redacted
wherever it can carry a secret (text and its citations' quoted text, tool
input, tool results); thinking blocks and the provider's own blocks (server
tool results, compaction, fallback: signed or encrypted) are never touched —
they must go back to the model verbatim."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from agentledger.events.types import Event, ModelResponded, RunCreated
from agentledger.schemas.content import ContentBlock, TextBlock, ToolResultBlock, ToolUseBlock
from agentledger.schemas.envelope import Envelope

MIN_SECRET_CHARS = 6  # a shorter value would redact ordinary words and ids

# (name, what the lower-cased text must contain for a match to be possible, pattern):
# the cheap substring test spares the regex scan of almost every text
PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("anthropic_api_key", ("sk-ant-",), re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")),
    ("api_key", ("sk-",), re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{20,}")),
    ("aws_access_key_id", ("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ),
    ("slack_token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    (
        "private_key",
        ("private key-----",),
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
    ),
    ("bearer_token", ("bearer ",), re.compile(r"(?<=(?i:bearer) )[A-Za-z0-9\-._~+/]{16,}=*")),
)


_TRIGGERS = tuple(dict.fromkeys(t for _, triggers, _ in PATTERNS for t in triggers))


def _may_match(low: str) -> bool:
    """Whether any pattern's trigger is in the lower-cased text: almost no text holds
    one, and a plain loop over them all is a third of the cost of asking each pattern."""
    for t in _TRIGGERS:
        if t in low:
            return True
    return False


def marker(name: str) -> str:
    return f"[REDACTED:{name}]"


@dataclass(frozen=True, slots=True)
class Redactor:
    """Replaces secrets in text and in nested JSON-like values. `values` holds
    (value, name) pairs, longest value first; it never shows in a repr."""

    values: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    patterns: bool = True  # False: only the values (the well-known patterns are left alone)
    # the forms no other form of the same value is part of: a text holding none of
    # them holds no value (a third of the forms: `finds` asks only these)
    needles: tuple[str, ...] = field(default=(), repr=False)
    # the needles' UTF-8 bytes, one character a byte (as `finds_packed` reads packed bytes)
    _needle_bytes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        as_bytes = tuple(n.encode().decode("latin-1") for n in self.needles)
        object.__setattr__(self, "_needle_bytes", as_bytes)

    def finds_packed(self, raw: bytes) -> bool:
        """Whether anything in the strings of `raw`, an event as the codec packed it
        (msgpack: each string its UTF-8 bytes, whole), may need redacting: a value in
        one of its forms, or a pattern's trigger. A superset of `finds` on the event's
        JSON (a form JSON escapes is there as the value itself; a pattern matches
        ASCII text only, so its trigger is in the bytes as in the text), asked instead
        of it so each event is serialised once; only an event it says yes to is walked.
        The bytes are read one character a byte (latin-1: a copy, and `in` on text is
        three times as fast as on bytes), lower-cased as bytes (ASCII only: fast)."""
        text = raw.decode("latin-1")
        for needle in self._needle_bytes:
            if needle in text:
                return True
        return self.patterns and _may_match(raw.lower().decode("latin-1"))

    def finds(self, s: str) -> bool:
        """Whether `text` would change anything in `s`: one scan, no copy. A whole
        event's JSON is asked first; only one that holds something is walked."""
        if self._holds_value(s):
            return True
        if not self.patterns:
            return False
        low = s.lower()
        return _may_match(low) and any(
            any(t in low for t in triggers) and pattern.search(s) is not None
            for _, triggers, pattern in PATTERNS
        )

    def _holds_value(self, s: str) -> bool:
        """Whether `s` holds a value in one of its forms: `in` per needle, a plain loop
        (on an event's JSON ~0.15 µs a needle; RE2 and `re` alternations cost more
        below thousands of characters, and RE2 gives up the GIL on every search)."""
        for needle in self.needles:
            if needle in s:
                return True
        return False

    def text(self, s: str) -> str:
        if self._holds_value(s):
            for value, name in self.values:
                if value in s:
                    s = s.replace(value, marker(name))
        if not self.patterns:
            return s
        low = s.lower()
        if not _may_match(low):
            return s
        for name, triggers, pattern in PATTERNS:
            if any(t in low for t in triggers):
                s = pattern.sub(marker(name), s)
        return s

    def value(self, v: Any) -> Any:
        match v:
            case str():
                return self.text(v)
            case dict():
                return {self.value(k): self.value(x) for k, x in v.items()}
            case list():
                return [self.value(x) for x in v]
            case tuple():
                return tuple(self.value(x) for x in v)
        return v

    def _citation(self, c: dict[str, Any]) -> dict[str, Any]:
        return _cited(self, c)

    def block(self, b: ContentBlock) -> ContentBlock:
        changes: dict[str, Any]
        match b:
            case TextBlock():
                changes = {"text": self.text(b.text)}
                if b.citations:
                    changes["citations"] = tuple(self._citation(c) for c in b.citations)
            case ToolUseBlock():
                changes = {"input": self.value(b.input)}
            case ToolResultBlock():
                changes = {"content": self.text(b.content)}
            case _:
                return b  # thinking, redacted_thinking, the provider's: sent back as they came
        same = all(getattr(b, k) == v for k, v in changes.items())
        return b if same else b.model_copy(update=changes)


def _cited(r: Redactor, c: dict[str, Any]) -> dict[str, Any]:
    text = c.get("cited_text")
    if not isinstance(text, str) or (clean := r.text(text)) == text:
        return c
    return {**c, "cited_text": clean}


def redactor(secrets: Mapping[str, str], *, patterns: bool = True) -> Redactor:
    """A redactor for `name -> value`, each value matched in all its `encoded_forms`
    (the longest form first, so a whole encoding goes before a piece of it)."""
    pairs: set[tuple[str, str]] = set()
    needles: set[str] = set()
    for name, value in secrets.items():
        if len(value) < MIN_SECRET_CHARS:
            continue
        forms = encoded_forms(value)
        pairs.update((form, name) for form in forms)
        needles.update(_smallest(forms))
    ordered = tuple(sorted(pairs, key=lambda p: (-len(p[0]), p)))
    return Redactor(ordered, patterns, tuple(sorted(needles)))


def _smallest(forms: tuple[str, ...]) -> list[str]:
    """The forms that hold no other form (a text holding a form holds one of these)."""
    kept: list[str] = []
    for form in sorted(forms, key=len):
        if not any(k in form for k in kept):
            kept.append(form)
    return kept


def encoded_forms(value: str) -> tuple[str, ...]:
    """The forms of `value` a redactor looks for: the value; as it reads inside JSON
    text (escaped); base64, standard and URL-safe, padded and not, and the part of
    it that is the same wherever the value starts inside longer base64 text; hex,
    lower and upper case; URL-encoded (`quote`, with and without '/' kept, and
    `quote_plus`). A value that is itself hex (a key) also in either case, and in
    the base64 forms of the bytes it spells. Forms shorter than MIN_SECRET_CHARS are left out: they would
    redact ordinary words."""
    raw = value.encode()
    forms = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        raw.hex(),
        raw.hex().upper(),
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        *_base64_forms(raw),
    }
    if _is_hex(value):
        forms.update((value.lower(), value.upper(), *_base64_forms(bytes.fromhex(value))))
    return tuple(sorted(f for f in forms if len(f) >= MIN_SECRET_CHARS))


def _base64_forms(raw: bytes) -> Iterator[str]:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        yield whole
        yield whole.rstrip("=")
        for offset in range(3):  # the value's bytes start at 0, 1 or 2 of a 3-byte group
            yield _aligned(encode(b"\0" * offset + raw).decode(), offset, len(raw))


def _aligned(encoded: str, offset: int, size: int) -> str:
    """The characters of `encoded` (the base64 of `offset` other bytes, then the
    value's `size`) whose 6 bits all come from the value: the same characters
    whatever bytes come before or after the value in a longer text."""
    first = -(-8 * offset // 6)  # the first character that starts on the value's bits
    last = (8 * (offset + size)) // 6  # the characters before it end inside the value
    return encoded[first:last]


def _is_hex(value: str) -> bool:
    if len(value) < 2 * MIN_SECRET_CHARS or len(value) % 2:
        return False
    try:
        binascii.unhexlify(value)
    except (binascii.Error, ValueError):
        return False
    return True


def redact_event(e: Event, r: Redactor) -> Event:
    """The event with its secrets replaced; the same object when it holds none.
    A run's spec (RunCreated) is what its author wrote and is kept as it is."""
    if isinstance(e, RunCreated) or not r.finds(e.model_dump_json()):
        return e  # the common case: nothing in it to redact, found in one scan
    if isinstance(e, ModelResponded):
        content = tuple(r.block(b) for b in e.content)
        return e if content == e.content else e.model_copy(update={"content": content})
    data = e.model_dump()
    clean = r.value(data)
    return e if clean == data else type(e).model_validate(clean)


def redact_envelope(env: Envelope[Any], r: Redactor) -> Envelope[Any]:
    data = redact_event(env.data, r)
    return env if data is env.data else env.model_copy(update={"data": data})

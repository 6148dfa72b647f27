"""Inbox garbage: every kind of bad entry an outside publisher (or an attacker
who can write the inbox) may leave, made from a seed. Each one must end in the
rejected stream with its reason; none may wedge the intake or create a run."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

INBOX_MAX_BYTES = 64 * 1024  # the scenario's size limit (AGENTLEDGER_INBOX_MAX_BYTES)

Maker = Callable[[random.Random, str], "bytes | dict[str, bytes]"]


def _request(rng: random.Random, valid: str, **change: object) -> bytes:
    """A RunRequested like the valid one (`valid`, JSON), changed."""
    data = json.loads(valid)
    data.pop("run_id", None)
    data["request_id"] = f"junk-{rng.getrandbits(48):x}"
    data.update(change)
    return json.dumps(data).encode()


def _spec_change(rng: random.Random, valid: str, **spec: object) -> bytes:
    data = json.loads(valid)
    return _request(rng, valid, spec={**data["spec"], **spec})


MAKERS: dict[str, Maker] = {
    "random bytes": lambda r, v: r.randbytes(r.randint(1, 300)),
    "invalid UTF-8": lambda r, v: b'{"type": "RunRequested", "task": "\xff\xfe\xc3"}',
    "deep nesting": lambda r, v: b"[" * r.randint(65, 5000) + b"]" * 10,
    "deep nesting in a spec": lambda r, v: _spec_change(
        r, v, task="x", extra=json.loads("[" * 70 + "]" * 70)
    ),
    "oversize": lambda r, v: (
        b'{"type": "RunRequested", "pad": "' + b"x" * (INBOX_MAX_BYTES + r.randint(1, 999)) + b'"}'
    ),
    "truncated JSON": lambda r, v: v.encode()[: r.randint(1, len(v) - 1)],
    "not an object": lambda r, v: r.choice([b"[]", b'"text"', b"42", b"null", b"true"]),
    "unknown type": lambda r, v: json.dumps(
        {"type": r.choice(["RunDeleted", "", None, 7])}
    ).encode(),
    "no spec": lambda r, v: b'{"type": "RunRequested"}',
    "wrong field types": lambda r, v: _spec_change(r, v, task=7, budgets={"max_turns": "many"}),
    "unknown field": lambda r, v: _request(r, v, owner="mallory"),
    "bad run id": lambda r, v: _request(r, v, run_id="../../etc"),
    "tools no worker serves": lambda r, v: _spec_change(r, v, tools=["os"]),
    "control of no run": lambda r, v: json.dumps(
        {"type": "RunAborted", "run_id": "no-such-run", "by": "x"}
    ).encode(),
    "no message field": lambda r, v: {"junk": r.randbytes(20)},
}


def garbage(rng: random.Random, valid: str) -> tuple[str, bytes | dict[str, bytes]]:
    """One bad entry (its message bytes, or whole fields) and what kind it is."""
    kind = rng.choice(sorted(MAKERS))
    return kind, MAKERS[kind](rng, valid)

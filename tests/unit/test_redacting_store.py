"""The redacting store over the in-memory one: whatever a writer appends is stored
redacted, whether it went through `as_stored` first (the step engine's folds) or
not; events `as_stored` already returned are not redacted again at the append."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agentledger.events.redact import Redactor, redactor
from agentledger.events.types import CODEC, RunCreated, RunFailed
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store import redacting as redacting_module
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.packed import given, packed
from agentledger.services.adapters.store.redacting import RedactingStore
from agentledger.services.handlers.runs import envelopes

SECRET = "tok-5f1e2d3c4b5a69788"
SPEC = RunSpec.model_validate(
    {
        "task": "redacting store",
        "principal": {"id": "u", "tenant": "t"},
        "model": {"scripted": [{"end_turn": "done"}]},
        "secrets": ["UNIT_TOKEN"],
    }
)


class Counting:
    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, spec: RunSpec) -> Redactor:
        self.asked += 1
        return redactor({"UNIT_TOKEN": SECRET})


@pytest.fixture
def store() -> tuple[RedactingStore, MemoryEventStore, Counting]:
    memory, counting = MemoryEventStore(), Counting()
    redacting = RedactingStore(memory, counting)
    created = envelopes("run-a", [RunCreated(spec=SPEC)], after_seq=0, at=1.0, source="t")
    redacting.append("run-a", created, expected_seq=0, live=True)
    return redacting, memory, counting


def failed(detail: str, seq: int) -> list[Any]:
    return envelopes(
        "run-a", [RunFailed(reason="x", detail=detail)], after_seq=seq, at=2.0, source="t"
    )


def test_an_event_appended_without_as_stored_is_redacted(
    store: tuple[RedactingStore, MemoryEventStore, Counting],
) -> None:
    redacting, memory, _ = store
    redacting.append("run-a", failed(f"leaked {SECRET}", 1), expected_seq=1, live=False)
    assert SECRET not in memory.read("run-a")[-1].data.detail


def test_events_as_stored_returned_are_appended_as_they_are(
    store: tuple[RedactingStore, MemoryEventStore, Counting],
) -> None:
    redacting, memory, counting = store
    stored = redacting.as_stored("run-a", failed(f"leaked {SECRET}", 1))
    asked = counting.asked

    redacting.append("run-a", stored, expected_seq=1, live=False)

    assert counting.asked == asked, "not redacted again"
    assert memory.read("run-a")[-1].data.detail == stored[0].data.detail
    assert SECRET not in stored[0].data.detail


def test_a_batch_of_stored_events_and_a_new_one_redacts_the_new_one(
    store: tuple[RedactingStore, MemoryEventStore, Counting],
) -> None:
    redacting, memory, _ = store
    first = redacting.as_stored(
        "run-a",
        envelopes("run-a", [RunFailed(reason="a", detail="fine")], after_seq=1, at=2.0, source="t"),
    )
    raw = failed(f"then {SECRET}", 2)  # never given to as_stored

    redacting.append("run-a", [*first, *raw], expected_seq=1, live=False)

    assert [e.data.detail for e in memory.read("run-a")[1:]] == [
        "fine",
        "then [REDACTED:UNIT_TOKEN]",
    ]


class Packing(MemoryEventStore):
    """The memory store, writing each event's bytes as the Redis store does
    (`packed`): what it wrote, and whether each was the bytes `as_stored` made."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[tuple[bytes, bool]] = []

    def append(self, run_id: str, events: Any, **kw: Any) -> int:
        for env in events:
            raw = packed(env)
            self.written.append((raw, raw is not CODEC.encode(env) and raw == CODEC.encode(env)))
        return super().append(run_id, events, **kw)


@pytest.mark.parametrize(
    "where",
    [
        lambda s: f"leaked {s}",  # the value
        lambda s: f"leaked {base64.b64encode(s.encode()).decode()}",  # an encoded form
        lambda s: json.dumps({"q": f'he said "{s}"'}),  # inside JSON text in a string
        lambda s: f"Bearer {'A' * 24}",  # a well-known pattern
    ],
)
def test_a_secret_in_an_event_serialised_once_is_still_redacted(where: Any) -> None:
    memory = Packing()
    redacting = RedactingStore(memory, lambda spec: redactor({"UNIT_TOKEN": SECRET}))
    created = envelopes("run-a", [RunCreated(spec=SPEC)], after_seq=0, at=1.0, source="t")
    redacting.append("run-a", redacting.as_stored("run-a", created), expected_seq=0, live=True)
    detail = where(SECRET)

    stored = redacting.as_stored("run-a", failed(detail, 1))
    redacting.append("run-a", stored, expected_seq=1, live=False)

    raw, _ = memory.written[-1]
    assert SECRET.encode() not in raw and b"A" * 24 not in raw
    assert b"[REDACTED:" in raw
    assert CODEC.decode(raw).data.detail == memory.read("run-a")[-1].data.detail


def test_an_event_without_a_secret_is_written_as_the_bytes_its_scan_read() -> None:
    memory = Packing()
    redacting = RedactingStore(memory, lambda spec: redactor({"UNIT_TOKEN": SECRET}))
    created = envelopes("run-a", [RunCreated(spec=SPEC)], after_seq=0, at=1.0, source="t")
    redacting.append("run-a", redacting.as_stored("run-a", created), expected_seq=0, live=True)

    stored = redacting.as_stored("run-a", failed("nothing to hide", 1))
    redacting.append("run-a", stored, expected_seq=1, live=False)

    raw, reused = memory.written[-1]
    assert reused, "packed again at the append"
    assert CODEC.decode(raw) == stored[0]
    # outside an append, or for an envelope it was not made of, nothing is handed over
    assert packed(stored[0]) is not raw and packed(stored[0]) == raw


def test_packed_bytes_are_not_handed_to_another_object_of_the_same_event() -> None:
    env = failed("x", 1)[0]
    copy = env.model_copy()
    with given({id(env): (env, b"not these")}):
        assert packed(env) == b"not these"
        assert packed(copy) == CODEC.encode(copy)


def test_only_the_payload_is_scanned_so_a_run_id_like_a_pattern_costs_no_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`task-7` holds `sk-`, a pattern's trigger: the header is not redacted (it never
    was), so its bytes are not scanned and the run's events are not walked; a source
    spelled "data" still leaves the whole payload scanned."""
    walked: list[str] = []
    real = redacting_module.redact_envelope

    def counted(env: Any, r: Redactor) -> Any:
        walked.append(env.run_id)
        return real(env, r)

    monkeypatch.setattr(redacting_module, "redact_envelope", counted)
    memory = Packing()
    redacting = RedactingStore(memory, lambda spec: redactor({"UNIT_TOKEN": SECRET}))
    for run_id in ("task-7", "data"):
        created = envelopes(run_id, [RunCreated(spec=SPEC)], after_seq=0, at=1.0, source="t")
        redacting.append(run_id, redacting.as_stored(run_id, created), expected_seq=0, live=True)
    plain = envelopes("task-7", [RunFailed(reason="x", detail="d")], after_seq=1, at=2, source="t")
    assert redacting.as_stored("task-7", plain) == plain
    assert walked == []
    leaked = envelopes(
        "data", [RunFailed(reason="x", detail=f"a {SECRET}")], after_seq=1, at=2.0, source="data"
    )
    stored = redacting.as_stored("data", leaked)
    redacting.append("data", stored, expected_seq=1, live=False)
    assert walked == ["data"]
    assert SECRET.encode() not in memory.written[-1][0]

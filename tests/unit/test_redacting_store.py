"""The redacting store over the in-memory one: whatever a writer appends is stored
redacted, whether it went through `as_stored` first (the step engine's folds) or
not; events `as_stored` already returned are not redacted again at the append."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.events.redact import Redactor, redactor
from agentledger.events.types import RunCreated, RunFailed
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store.memory import MemoryEventStore
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

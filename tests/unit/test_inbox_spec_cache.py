"""The intake validates each distinct spec once (`inbox_parse.Specs`): a request
whose spec was validated before takes that spec object, the rest of its message
validated as ever; a spec that fails is refused with the same reason as without
the cache, and never kept; what is kept is bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentledger.schemas.inbox import RunRequested
from agentledger.services.loops.inbox_parse import Rejected, Specs, parse

SPEC = {
    "task": "t",
    "tools": ["m"],
    "principal": {"id": "p", "tenant": "t"},
    "model": {"scripted": [{"end_turn": "done"}]},
}


def fields(run_id: str, spec: dict[str, Any] = SPEC, **more: Any) -> dict[bytes, bytes]:
    message = {"type": "RunRequested", "run_id": run_id, "spec": spec, **more}
    return {b"message": json.dumps(message).encode()}


def test_the_same_spec_is_validated_once_and_shared() -> None:
    specs = Specs()
    one = parse(fields("r-1"), specs=specs)
    two = parse(fields("r-2"), specs=specs)
    assert isinstance(one, RunRequested) and isinstance(two, RunRequested)
    assert two.spec is one.spec  # the second took the first's, validated
    assert (one.run_id, two.run_id) == ("r-1", "r-2")
    assert two == parse(fields("r-2"))  # as without the cache


def test_another_spec_is_validated_on_its_own() -> None:
    specs = Specs()
    one = parse(fields("r-1"), specs=specs)
    two = parse(fields("r-2", {**SPEC, "task": "other"}), specs=specs)
    assert isinstance(two, RunRequested) and two.spec.task == "other"
    assert isinstance(one, RunRequested) and two.spec is not one.spec


@pytest.mark.parametrize(
    "spec",
    [{**SPEC, "budgets": {"max_turns": 0}}, {**SPEC, "tols": ["x"]}, {"task": ""}],
)
def test_a_bad_spec_is_refused_as_without_the_cache_every_time(spec: dict[str, Any]) -> None:
    with pytest.raises(Rejected) as plain:
        parse(fields("r-1", spec))
    specs = Specs()
    for _ in range(2):  # never kept: refused again, the same way
        with pytest.raises(Rejected) as cached:
            parse(fields("r-1", spec), specs=specs)
        assert cached.value.reason == plain.value.reason


def test_the_rest_of_a_message_is_validated_though_its_spec_was_before() -> None:
    specs = Specs()
    parse(fields("r-1"), specs=specs)
    with pytest.raises(Rejected) as refused:
        parse(fields("r-2", queue="no spaces allowed"), specs=specs)
    assert "queue" in refused.value.reason
    with pytest.raises(Rejected) as unknown:
        parse(fields("r-3", surprise=1), specs=specs)
    assert "surprise" in unknown.value.reason


def test_what_is_kept_is_bounded() -> None:
    specs = Specs(max_items=2, max_bytes=1 << 20)
    first = parse(fields("r-0", {**SPEC, "task": "0"}), specs=specs)
    for i in range(1, 4):
        parse(fields(f"r-{i}", {**SPEC, "task": str(i)}), specs=specs)
    again = parse(fields("r-9", {**SPEC, "task": "0"}), specs=specs)
    assert isinstance(first, RunRequested) and isinstance(again, RunRequested)
    assert again.spec is not first.spec and again.spec == first.spec  # forgotten, made again

"""The scripted model plays its script turn by turn, and ends clearly when the
run asks for a turn the script does not have."""

from __future__ import annotations

import pytest

from agentledger.schemas.content import ToolUseBlock
from agentledger.schemas.spec import ScriptedModel
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.models.scripted import ScriptedAdapter

SCRIPT = ScriptedModel.model_validate(
    {
        "scripted": [
            {"tool_use": [{"id": "c1", "name": "publish", "input": {}}]},
            {"end_turn": "done"},
        ]
    }
)


def request(turn: int) -> ModelRequest:
    return ModelRequest("r-1", turn, None, (), (), context_tokens=10)


def test_turn_n_of_the_script_answers_turn_n_of_the_run() -> None:
    model = ScriptedAdapter(SCRIPT, sleep=False)
    first, second = model.respond(request(1)), model.respond(request(2))
    assert first.stop_reason == "tool_use" and isinstance(first.content[0], ToolUseBlock)
    assert second.stop_reason == "end_turn"
    assert model.respond(request(1)) == first  # a re-driven request gets the same turn


def test_a_turn_past_the_script_is_an_error_retrying_cannot_fix() -> None:
    model = ScriptedAdapter(SCRIPT, sleep=False)
    with pytest.raises(ModelError) as err:
        model.respond(request(3))
    assert not err.value.retryable
    assert "no turn 3" in str(err.value) and "2 turns" in str(err.value)

"""The replay model answers each request with the reply recorded for its turn,
verbatim, and refuses a turn the recorded run never reached — and any request
of a run of another tenant than the recorded run's, or of a recorded run that
does not exist."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.events.types import ModelRequested, ModelResponded, RunCreated
from agentledger.schemas.content import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.models.replay import ReplayAdapter

REPLY = ModelResponded(
    turn=2,
    content=(
        ThinkingBlock(thinking="t", signature="s=="),
        ToolUseBlock(id="u1", name="n", input={}),
    ),
    stop_reason="tool_use",
    usage=Usage(input_tokens=10, output_tokens=3, cache_read_input_tokens=4),
    model="claude-x-1",
)


SPEC = RunSpec.model_validate({
    "task": "t", "principal": {"id": "alice", "tenant": "shop-1"}, "model": {"scripted": [{"end_turn": "done"}]},
})  # fmt: skip


def recorded() -> list[Envelope[Any]]:
    events = [RunCreated(spec=SPEC), ModelRequested(turn=2, attempt=1, deadline_at=1.0), REPLY]
    return [
        Envelope(id=f"e{i}", run_id="r-old", seq=i + 1, type=e.type, at=1.0, source="x", data=e)
        for i, e in enumerate(events)
    ]


def ask(turn: int, tenant: str | None = "shop-1") -> ModelRequest:
    return ModelRequest(
        "r-new", turn, None, (Message(role="user", content=(TextBlock(text="t"),)),), (),
        tenant=tenant,
    )  # fmt: skip


def test_a_request_gets_the_recorded_reply_of_its_turn_verbatim() -> None:
    reply = ReplayAdapter("r-old", recorded).respond(ask(2))
    assert reply.content == REPLY.content and reply.stop_reason == "tool_use"
    assert reply.usage == REPLY.usage and reply.model == "claude-x-1"


def test_a_turn_the_recorded_run_never_reached_ends_the_new_run() -> None:
    with pytest.raises(ModelError, match="'r-old' has no model reply for turn 3") as raised:
        ReplayAdapter("r-old", recorded).respond(ask(3))
    assert raised.value.retryable is False


@pytest.mark.parametrize(
    ("read", "tenant", "reason"),
    [
        (recorded, "shop-2", "not granted: 'r-new' may not replay run 'r-old': no run of tenant 'shop-2' has that id"),
        (lambda: [], "shop-1", "not granted: 'r-new' may not replay run 'r-old': no run of tenant 'shop-1' has that id"),
        (recorded, None, "not granted: run 'r-new' asked without its tenant"),
    ],
)  # fmt: skip
def test_a_run_of_another_tenant_or_a_recorded_run_that_does_not_exist_is_refused(
    read: Any, tenant: str | None, reason: str
) -> None:
    with pytest.raises(ModelError) as raised:
        ReplayAdapter("r-old", read).respond(ask(2, tenant=tenant))
    assert str(raised.value) == reason and raised.value.retryable is False

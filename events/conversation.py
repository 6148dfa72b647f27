"""The conversation the model is shown, derived from the folded run: the task,
each turn's assistant content verbatim, and every tool_use answered by a
tool_result with the same id, all of a turn's results in one user message, in
proposal order. Acceptance feedback follows as text."""

from __future__ import annotations

import json
from typing import Any

from events.state import Call, RunState, Turn
from schemas.content import ContentBlock, Message, TextBlock, ToolResultBlock


def messages(s: RunState) -> tuple[Message, ...]:
    out: list[Message] = [Message(role="user", content=(TextBlock(text=s.spec.task),))]
    for turn in s.turns:
        out.append(Message(role="assistant", content=turn.content))
        reply = _user_reply(turn)
        if reply:
            out.append(Message(role="user", content=tuple(reply)))
    return tuple(out)


def _user_reply(turn: Turn) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    if turn.calls and turn.finished:
        blocks += [tool_result(c) for c in turn.calls]
    if turn.feedback:
        blocks.append(TextBlock(text=turn.feedback))
    return blocks


def tool_result(call: Call) -> ToolResultBlock:
    if call.error is not None:
        body: Any = {
            "error": call.error.model_dump(
                mode="json",
                exclude_none=True,
                exclude={"fields"} if not call.error.fields else None,
            )
        }
        return ToolResultBlock(tool_use_id=call.call_id, content=_text(body), is_error=True)
    return ToolResultBlock(tool_use_id=call.call_id, content=_text(call.output))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

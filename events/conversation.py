"""The conversation the model is shown, derived from the folded run: the task,
each turn's assistant content verbatim, and every tool_use answered by a
tool_result with the same id, all of a turn's results in one user message, in
proposal order. Acceptance feedback follows as text."""

from __future__ import annotations

import json
from typing import Any, Literal

from events.state import Call, RunState, Turn
from schemas.content import ContentBlock, Message, TextBlock, ToolResultBlock


def messages(s: RunState) -> tuple[Message, ...]:
    """Roles alternate: a reply that was paused or cut off is continued by the
    next one, so consecutive assistant contents merge into one message."""
    out: list[Message] = [Message(role="user", content=(TextBlock(text=s.spec.task),))]
    for turn in s.turns:
        _add(out, "assistant", turn.content)
        _add(out, "user", tuple(_user_reply(turn)))
    return tuple(out)


def _add(
    out: list[Message], role: Literal["user", "assistant"], content: tuple[ContentBlock, ...]
) -> None:
    if not content:
        return
    if out[-1].role == role:
        out[-1] = Message(role=role, content=out[-1].content + content)
    else:
        out.append(Message(role=role, content=content))


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

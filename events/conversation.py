"""The conversation the model is shown, derived from the folded run: the task,
each turn's assistant content verbatim, and every tool_use answered by a
tool_result with the same id, all of a turn's results in one user message, in
proposal order. Acceptance feedback follows as text."""

from __future__ import annotations

import json
from typing import Any, Literal

from events.output_cap import capped
from events.state import Call, RunState, Turn
from schemas.content import ContentBlock, Message, TextBlock, ToolResultBlock


def messages(s: RunState) -> tuple[Message, ...]:
    """Roles alternate: a reply that was paused or cut off is continued by the
    next one, so consecutive assistant contents merge into one message."""
    out: list[Message] = [Message(role="user", content=(TextBlock(text=s.spec.task),))]
    for turn in s.turns:
        add_message(out, "assistant", turn.content)
        add_message(out, "user", tuple(user_reply(turn)))
    return tuple(out)


def add_message(
    out: list[Message], role: Literal["user", "assistant"], content: tuple[ContentBlock, ...]
) -> None:
    if not content:
        return
    if out[-1].role == role:
        out[-1] = Message(role=role, content=out[-1].content + content)
    else:
        out.append(Message(role=role, content=content))


def user_reply(turn: Turn) -> list[ContentBlock]:
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
    content = capped(_text(call.output), ref=call.call_id, cap=call.output_cap)
    return ToolResultBlock(tool_use_id=call.call_id, content=content)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

"""The conversation the model is shown, derived from the folded run: the task,
each turn's assistant content verbatim, and every tool_use answered by a
tool_result with the same id, all of a turn's results in one user message, in
proposal order. Acceptance feedback follows as text."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from agentledger.events.output_cap import DEFAULT_CAP, capped, output_text
from agentledger.events.state import Call, RunState, Turn
from agentledger.schemas.content import (
    ContentBlock,
    ImageData,
    Message,
    TextBlock,
    ToolResultBlock,
)


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
        text = output_text(body)
        cap = call.output_cap or DEFAULT_CAP
        if len(text) > cap:  # an error is not kept for read_output: cut, and said so
            text = f"{text[:cap]}\n[cut: shown characters 0–{cap} of {len(text)}]"
        return ToolResultBlock(tool_use_id=call.call_id, content=text, is_error=True)
    # never uncapped: a tool that declares no cap gets the default
    cap = call.output_cap if call.output_cap is not None else DEFAULT_CAP
    total = call.overflow.chars if call.overflow is not None else None
    output, images = split_images(call.output)
    content = capped(output_text(output), ref=call.call_id, cap=cap, total=total)
    return ToolResultBlock(tool_use_id=call.call_id, content=content, images=images)


def split_images(output: Any) -> tuple[Any, tuple[ImageData, ...]]:
    """A tool output's images (an MCP result's `images`: media type and base64 data),
    to be shown as images, and the output without their data."""
    if not isinstance(output, dict) or not isinstance(output.get("images"), list):
        return output, ()
    images: list[ImageData] = []
    for item in output["images"]:
        try:
            images.append(ImageData.model_validate(item))
        except ValidationError:
            return output, ()  # not images as we keep them: shown as the text it is
    rest = {k: v for k, v in output.items() if k != "images"}
    rest["images"] = [{"media_type": i.media_type, "shown": "as an image"} for i in images]
    return rest, tuple(images)

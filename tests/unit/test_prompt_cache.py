"""Where the conversation's cache breakpoints go: the end of the previous
request (its last user block) and the end of this one; never on thinking or
empty text; at most two, so tools and system make four."""

from __future__ import annotations

from agentledger.events.prompt_cache import conversation_breakpoints
from agentledger.schemas.content import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

TASK = Message(role="user", content=(TextBlock(text="Count the stock."),))


def turn(i: int) -> tuple[Message, Message]:
    use = ToolUseBlock(id=f"c{i}", name="read", input={})
    said = Message(role="assistant", content=(ThinkingBlock(thinking="t", signature="s"), use))
    return said, Message(role="user", content=(ToolResultBlock(tool_use_id=f"c{i}", content="3"),))


def test_the_first_request_marks_its_task() -> None:
    assert conversation_breakpoints((TASK,)) == ((0, 0),)


def test_later_requests_mark_the_previous_end_and_their_own() -> None:
    messages = (TASK, *turn(1), *turn(2))
    assert conversation_breakpoints(messages) == ((2, 0), (4, 0))
    # the previous request ended where this one's first breakpoint is
    assert conversation_breakpoints(messages[:3])[-1] == (2, 0)


def test_a_paused_continuation_marks_the_user_blocks_before_it() -> None:
    paused = Message(role="assistant", content=(TextBlock(text="Searching"),))
    assert conversation_breakpoints((TASK, *turn(1), paused)) == ((0, 0), (2, 0))


def test_empty_text_and_thinking_are_never_marked() -> None:
    empty = Message(role="user", content=(TextBlock(text="Go on."), TextBlock(text="")))
    assert conversation_breakpoints((empty,)) == ((0, 0),)

"""What an MCP tool's answer becomes in the log: its text, a summary of binary
content (never the data) but for images small enough to show the model, `isError`
and JSON-RPC errors as our error codes; and how a kept image reaches the model:
an image block in the tool_result for Anthropic's API, a line saying it is there
for the OpenAI APIs (which take no image in a tool's answer)."""

from __future__ import annotations

import mcp_types as types

from agentledger.events.conversation import split_images
from agentledger.events.output_cap import output_text
from agentledger.events.tool_step import Errored, Succeeded
from agentledger.schemas.content import Message, ToolResultBlock, to_api
from agentledger.services.adapters.models.openai_wire import user_turn
from agentledger.services.adapters.tools.mcp.results import outcome_of, parsed, protocol_error


def result(
    *content: types.ContentBlock, error: bool = False, structured: dict[str, object] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=list(content), is_error=error, structured_content=structured
    )


def test_text_content_is_the_output() -> None:
    out = outcome_of(
        result(types.TextContent(type="text", text="a"), types.TextContent(type="text", text="b"))
    )
    assert out == Succeeded("a\nb")


def test_structured_content_is_the_output_when_there_is_no_text() -> None:
    assert outcome_of(result(structured={"n": 1})) == Succeeded({"n": 1})


def test_an_image_too_large_or_of_another_type_is_recorded_as_its_type_and_size_only() -> None:
    big = types.ImageContent(type="image", data="QUJD" * 20_000, mime_type="image/png")
    odd = types.ImageContent(type="image", data="QUJD", mime_type="image/tiff")
    out = outcome_of(result(types.TextContent(type="text", text="see"), big, odd))
    assert out == Succeeded(
        {
            "text": "see",
            "content": [
                {"type": "image", "mime_type": "image/png", "base64_chars": 80_000},
                {"type": "image", "mime_type": "image/tiff", "base64_chars": 4},
            ],
        }
    )


def test_a_small_image_is_kept_and_shown_to_the_model_as_an_image() -> None:
    image = types.ImageContent(type="image", data="iVBORw0K", mime_type="image/png")
    out = outcome_of(result(types.TextContent(type="text", text="a chart"), image))
    assert isinstance(out, Succeeded)
    assert out.output["images"] == [{"media_type": "image/png", "data": "iVBORw0K"}]
    output, images = split_images(out.output)
    block = ToolResultBlock(tool_use_id="c1", content=output_text(output), images=images)
    assert "iVBORw0K" not in block.content and '"shown": "as an image"' in block.content
    assert to_api(block)["content"] == [
        {"type": "text", "text": block.content},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
    ]
    assert "images" not in to_api(ToolResultBlock(tool_use_id="c2", content="x"))
    [(call_id, said)], _ = user_turn(Message(role="user", content=(block,)))
    assert call_id == "c1" and said.endswith(
        "[1 image(s) not shown (image/png): this API takes no images in tool results]"
    )


def test_is_error_results_are_failures_with_our_codes() -> None:
    out = outcome_of(
        result(
            types.TextContent(type="text", text="Access denied - path outside allowed directories"),
            error=True,
        )
    )
    assert (
        isinstance(out, Errored)
        and out.error.code == "permission_denied"
        and not out.error.retryable
    )
    silent = outcome_of(result(error=True))
    assert (
        isinstance(silent, Errored)
        and silent.error.code == "internal"
        and "said nothing" in silent.error.message
    )


def test_json_rpc_errors_are_coded() -> None:
    assert protocol_error(-32602, "bad params").error.code == "invalid_arguments"
    assert protocol_error(-32603, "oops").error.message == "MCP error -32603: oops"


def test_a_lookup_answer_is_read_from_structured_content_or_json_text() -> None:
    assert parsed(result(structured={"done": True, "result": 1})) == {"done": True, "result": 1}
    assert parsed(result(types.TextContent(type="text", text='{"done": false}'))) == {"done": False}

"""What an MCP tool's answer becomes in the log: its text, a summary of binary
content (never the data), `isError` and JSON-RPC errors as our error codes."""

from __future__ import annotations

import mcp_types as types

from agentledger.events.tool_step import Errored, Succeeded
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


def test_an_image_is_recorded_as_its_type_and_size_never_its_data() -> None:
    image = types.ImageContent(type="image", data="QUJD" * 1000, mime_type="image/png")
    out = outcome_of(result(types.TextContent(type="text", text="see"), image))
    assert out == Succeeded(
        {
            "text": "see",
            "content": [{"type": "image", "mime_type": "image/png", "base64_chars": 4000}],
        }
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

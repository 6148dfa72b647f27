"""Traces from the log (`agentledger.events.spans`): the spans a run's events stand for."""

from __future__ import annotations

import pytest
from journeys import (
    JOURNEYS,
    approvals_granted_denied_and_expired,
    happy_path,
    mcp_server_sampled_and_asked,
)

from agentledger.events.spans import (
    SpanBuilder,
    by_parent,
    chat_span_id,
    run_span_id,
    spans_of,
    tool_span_id,
    trace_id_of,
)


def test_a_finished_run_is_one_invoke_agent_span_with_chat_and_execute_tool_children_in_log_order() -> (
    None
):
    log = happy_path()
    spans = spans_of(log.envelopes)
    tree = by_parent(spans)
    (root,) = tree[None]
    assert root.name == "invoke_agent agentledger"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.id"] == log.run_id
    assert root.error is None and root.end == log.envelopes[-1].at
    children = tree[root.span_id]
    assert [s.name for s in children] == [
        "chat scripted", "execute_tool read_file", "execute_tool write_file", "chat scripted",
    ]  # fmt: skip
    assert [s.start_seq for s in children] == sorted(s.start_seq for s in children)
    assert {s.trace_id for s in spans} == {trace_id_of(log.run_id)}
    assert all(s.end is not None and s.end >= s.start for s in spans)
    assert set(tree) == {None, root.span_id}  # nothing deeper


def test_chat_spans_carry_the_genai_request_and_usage_attributes() -> None:
    log = happy_path()
    chat = next(s for s in spans_of(log.envelopes) if s.name.startswith("chat"))
    assert chat.span_id == chat_span_id(log.run_id, 1, 1)
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert isinstance(chat.attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(chat.attributes["gen_ai.usage.output_tokens"], int)
    assert chat.kind == "client"


def test_tool_spans_name_the_tool_and_call_and_list_the_calls_steps_as_events() -> None:
    log = happy_path()
    span = next(s for s in spans_of(log.envelopes) if s.span_id == tool_span_id(log.run_id, "a"))
    assert span.attributes["gen_ai.tool.name"] == "read_file"
    assert span.attributes["gen_ai.tool.call.id"] == "a"
    assert span.attributes["agentledger.call.status"] == "succeeded"
    assert [e.name for e in span.events] == [
        "ToolCallValidated", "ToolCallStarted", "ToolCallSucceeded",
    ]  # fmt: skip


def test_a_denied_or_expired_approval_ends_its_tool_span_with_an_error() -> None:
    log = approvals_granted_denied_and_expired()
    spans = {s.attributes.get("gen_ai.tool.call.id"): s for s in spans_of(log.envelopes)}
    assert spans["b"].error == "denied by bob"
    assert spans["g"].error is not None and "expired" in spans["g"].error
    assert spans["a"].error is None
    assert "ApprovalGranted" in [e.name for e in spans["a"].events]
    assert spans["d"].error is not None and spans["d"].error.startswith("invalid_arguments")


def test_a_live_run_has_its_open_spans_unended() -> None:
    log = approvals_granted_denied_and_expired()  # still requesting the model
    root = next(s for s in spans_of(log.envelopes) if s.parent_id is None)
    assert root.end is None and root.span_id == run_span_id(log.run_id)


@pytest.mark.parametrize("name", sorted(JOURNEYS))
def test_every_span_ends_once_and_the_builder_ends_what_spans_of_lists(name: str) -> None:
    log = JOURNEYS[name][0]()
    builder = SpanBuilder()
    ended = [s for env in log.envelopes for s in builder.add(env)]
    ids = [s.span_id for s in ended]
    assert len(ids) == len(set(ids))  # each span is exported once
    assert all(s.end_seq is not None and s.start_seq <= s.end_seq for s in ended)
    whole = spans_of(log.envelopes)
    assert {s.span_id for s in whole} == {*ids, *(s.span_id for s in builder.open_spans())}
    roots = [s for s in whole if s.parent_id is None]
    assert len(roots) == 1
    if log.s.status.terminal:
        assert not builder.open_spans()
        assert (roots[0].error is None) == (log.s.status == "completed")


def test_the_same_log_gives_the_same_ids() -> None:
    assert spans_of(happy_path().envelopes) == spans_of(happy_path().envelopes)


def test_a_cached_prompt_counts_in_input_tokens_and_the_run_span_holds_no_gen_ai_usage() -> None:
    from runlog import Log, do_model_turn, text

    from agentledger.schemas.content import Usage

    log = Log.created()
    usage = Usage(input_tokens=3, output_tokens=40, cache_read_input_tokens=2755,
                  cache_creation_input_tokens=100)  # fmt: skip
    do_model_turn(log, text("done"), usage=usage)
    spans = spans_of(log.envelopes)
    (chat,) = [s for s in spans if s.name.startswith("chat")]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 2858  # 3 + 2755 + 100
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 2755
    assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 100
    assert chat.attributes["gen_ai.usage.cache_read_input_tokens"] == 2755
    assert chat.attributes["gen_ai.usage.cache_creation_input_tokens"] == 100
    assert chat.attributes["gen_ai.usage.output_tokens"] == 40
    ended = spans_of(happy_path().envelopes)
    root = next(s for s in ended if s.parent_id is None)
    assert root.end is not None and "agentledger.usage.input_tokens" in root.attributes
    assert not [k for k in root.attributes if k.startswith("gen_ai.usage.")]


def test_an_mcp_servers_sampling_is_a_chat_span_under_its_call_with_its_usage() -> None:
    log = mcp_server_sampled_and_asked()
    spans = spans_of(log.envelopes)
    sampled = [s for s in spans if s.attributes.get("agentledger.mcp.server") == "ev"]
    assert sampled  # the server's requests recorded while its call ran
    for span in sampled:
        assert span.parent_id == tool_span_id(log.run_id, "c1")
        assert span.name == "chat scripted" and span.end == span.start
        assert span.attributes["gen_ai.usage.input_tokens"] == 3
        assert span.attributes["gen_ai.usage.output_tokens"] == 2

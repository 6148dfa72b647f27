"""Answers to what an MCP server asks during a call (`client_side.Answerer`):

- sampling: the run's own model (never another run's: the run is the one whose
  call is in flight on that session) answers, its `max_tokens` within what the
  operator allows (SAMPLING_MAX_TOKENS) and the run has left, refused when the
  run's budget (cost, input or output tokens, wall clock) would not allow it; the
  answer is recorded (`ToolSampledModel`) before the server is told it, and its
  usage counts in the run's budget;
- elicitation: the server's question is put to a person as an escalation of the
  run (`RunEscalated`, reason `tool_question`); `reply RUN '<JSON object>'`
  accepts with that content (checked against the server's schema), `reply RUN
  decline` / `cancel` say so, `resume` declines, and a run that is aborted or
  cancelled, or a call that ends meanwhile, cancels. The call waits within its
  own timeout."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus
from agentledger.events.tool_requests import (
    ask_human,
    record_sample,
    sampling_refusal,
    sampling_tokens,
)
from agentledger.events.types import (
    HumanReplied,
    RunAborted,
    RunCancelRequested,
    RunEscalated,
    RunResumed,
)
from agentledger.schemas.content import Message, TextBlock
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.adapters.tools.mcp.client_side import refused
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided

SOURCE = "tool"
SAMPLING_MAX_TOKENS = 4096  # the most output a server's sampling request may ask
PROMPT_CHARS = 4000  # of a sampling request's prompt, kept in its event
POLL_S = 0.2  # how often a question's answer is looked for in the run's log
STOPS: dict[str, str] = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
}


@dataclass
class ToolRequests:
    app_of: Callable[[], App]  # the worker's app now (its tool set changes with its servers)

    def sample(
        self, asker: ToolContext, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        app = self.app_of()
        s = app.runs.load(asker.run_id)
        if s is None:
            return refused("sampling", f"no run {asker.run_id!r}")
        messages = _messages(params.messages)
        prompt = "\n\n".join(f"[{m.role}] {_text(m)}" for m in messages)
        max_tokens = sampling_tokens(s, params.max_tokens, SAMPLING_MAX_TOKENS)
        chars = len(prompt) + len(params.system_prompt or "")
        why = sampling_refusal(
            s, asker.call_id, input_chars=chars, max_tokens=max_tokens, now=app.clock.now()
        )
        if why is not None:
            return refused("sampling", why)
        request = ModelRequest(
            run_id=s.run_id, turn=s.turns_used, system=params.system_prompt, messages=messages,
            tools=(), tenant=s.spec.principal.tenant, max_tokens=max_tokens, sample=s.samples + 1,
        )  # fmt: skip
        try:
            reply = app.model_for(s.spec.model).respond(request)
        except ModelError as exc:
            return refused("sampling", f"the run's model failed: {exc}")
        text = "".join(b.text for b in reply.content if isinstance(b, TextBlock))
        answer = ToolSampledModel(
            call_id=asker.call_id, server=server, sample=request.sample or 1,
            system=params.system_prompt, prompt=prompt[:PROMPT_CHARS], max_tokens=max_tokens,
            text=text, stop_reason=reply.stop_reason, model=reply.model, usage=reply.usage,
        )  # fmt: skip
        taken = app.engine.take(s.run_id, Decided(SOURCE, lambda st: record_sample(st, answer)))
        if taken.first(ToolSampledModel) is None:
            return refused("sampling", f"call {asker.call_id!r} ended while the model answered")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=text),
            model=reply.model, stop_reason=STOPS.get(reply.stop_reason, reply.stop_reason),
        )  # fmt: skip

    def elicit(
        self, asker: ToolContext, server: str, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        app = self.app_of()
        detail = question(asker, server, params)
        schema = (
            params.requested_schema if isinstance(params, types.ElicitRequestFormParams) else None
        )
        taken = app.engine.take(
            asker.run_id, Decided(SOURCE, lambda st: ask_human(st, asker.call_id, detail, schema))
        )
        asked = next((e.seq for e in taken.appended if isinstance(e.data, RunEscalated)), None)
        if asked is None:
            return refused(
                "elicitation",
                f"run {asker.run_id!r} cannot wait for a person now ({taken.state.status})",
            )
        return self._answer(app, asker, asked, schema)

    def _answer(
        self, app: App, asker: ToolContext, asked: int, schema: dict[str, Any] | None
    ) -> types.ElicitResult:
        seen = asked
        while True:
            for env in app.store.read(asker.run_id, after_seq=seen):
                seen = env.seq
                found = _answered(env.data, schema)
                if found is not None:
                    return found
            s = app.runs.load(asker.run_id)
            if s is None or not _running(s, asker.call_id):
                return types.ElicitResult(action="cancel")
            time.sleep(POLL_S)


def question(asker: ToolContext, server: str, params: types.ElicitRequestParams) -> str:
    """The escalation's detail: who asks what, and how to answer."""
    run = asker.run_id
    if isinstance(params, types.ElicitRequestURLParams):
        how = f"open {params.url}, then `agentledger reply {run} accept` (or decline, cancel)"
    else:
        fields = ", ".join(sorted(params.requested_schema.get("properties", {}))) or "none"
        how = f"`agentledger reply {run} '<JSON object>'` (fields: {fields}), or decline, cancel"
    return f"MCP server {server!r} asks during call {asker.call_id}: {params.message} — answer: {how}; resume declines"


def _answered(e: Any, schema: dict[str, Any] | None) -> types.ElicitResult | None:
    match e:
        case HumanReplied():
            return _reply(e.text.strip(), schema)
        case RunResumed():
            return types.ElicitResult(action="decline")
        case RunAborted() | RunCancelRequested():
            return types.ElicitResult(action="cancel")
    return None


def _reply(text: str, schema: dict[str, Any] | None) -> types.ElicitResult:
    """A person's reply as the server's answer: a word, or the content (a JSON object
    its schema accepts; anything else declines)."""
    if text in ("decline", "cancel"):
        return types.ElicitResult(action=text)
    if schema is None or answer_problem(text, schema) is not None:
        return types.ElicitResult(
            action="accept" if text == "accept" and schema is None else "decline"
        )
    return types.ElicitResult(action="accept", content=json.loads(text))


def answer_problem(text: str, schema: dict[str, Any] | None) -> str | None:
    """What is wrong with a reply to a tool's question (None: it answers it): a word
    (decline, cancel; accept for a question with no form), or a JSON object the
    question's schema accepts."""
    text = text.strip()
    if text in ("decline", "cancel") or (schema is None and text == "accept"):
        return None
    if schema is None:
        return "answer accept, decline or cancel"
    try:
        content = json.loads(text)
    except json.JSONDecodeError:
        return "the answer is a JSON object (or decline, cancel): it is not JSON"
    if not isinstance(content, dict):
        return "the answer is a JSON object (or decline, cancel)"
    errors = sorted(
        Draft202012Validator(schema).iter_errors(content), key=lambda e: list(map(str, e.path))
    )
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path) or "(answer)"
        return f"{where}: {errors[0].message}"
    return None


def _running(s: RunState, call_id: str) -> bool:
    call = s.current_turn.call(call_id) if s.current_turn else None
    return call is not None and call.status is CallStatus.STARTED


def _messages(sampled: list[types.SamplingMessage]) -> tuple[Message, ...]:
    """The server's messages as the model is sent them: text (other content said as its
    type), roles merged where the same speaks twice, starting with the user."""
    out: list[Message] = []
    for m in sampled:
        blocks = m.content if isinstance(m.content, list) else [m.content]
        text = "\n".join(
            b.text if isinstance(b, types.TextContent) else f"[{b.type}]" for b in blocks
        )
        if out and out[-1].role == m.role:
            out[-1] = Message(role=m.role, content=(TextBlock(text=f"{_text(out[-1])}\n\n{text}"),))
        else:
            out.append(Message(role=m.role, content=(TextBlock(text=text),)))
    if not out or out[0].role != "user":
        out.insert(0, Message(role="user", content=(TextBlock(text="(the server's request)"),)))
    return tuple(out)


def _text(m: Message) -> str:
    return "".join(b.text for b in m.content if isinstance(b, TextBlock))

"""The scripted model: plays the spec's turns in order, one per model request.
Turn N of the script answers the request for the run's turn N, so a re-driven
request after a crash gets the same turn (and so does a request whose context
view left older turns out). A request past the script's last turn (after a
denial or failed checks the script did not plan for) is a model error that
retrying cannot fix: the run ends `failed` saying so, instead of the model
inventing turns until the turn budget runs out. An MCP server's sampling request
(the run's n-th) is answered by the script's n-th `sampled` text."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from agentledger.schemas.content import TextBlock, ToolUseBlock, Usage
from agentledger.schemas.spec import ScriptedModel
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

LEASE_MARGIN_S = 1.0  # a model claim lasts the longest scripted delay plus this


class ScriptedAdapter:
    def __init__(self, script: ScriptedModel, *, sleep: bool = True):
        self._script = script
        self._sleep = sleep
        # a reply is a sleep of its delay and one append: a second past the longest delay
        # is ample for a live worker, and a dead one's turn is taken up that much sooner
        self._lease_s = max((t.delay_s for t in script.scripted), default=0.0) + LEASE_MARGIN_S

    def claim_lease_s(self) -> float:
        return self._lease_s

    def respond(self, request: ModelRequest) -> ModelReply:
        if request.sample is not None:
            return self._sampled(request, request.sample)
        done = request.turn - 1
        if done >= len(self._script.scripted):
            raise ModelError(
                exhausted(len(self._script.scripted), request.turn), kind="not_configured"
            )
        turn = self._script.scripted[done]
        if turn.delay_s and self._sleep:
            _said_slowly(turn.end_turn or turn.refusal or "", turn.delay_s, request.watch)
        if turn.refusal is not None:
            return self._reply((TextBlock(text=turn.refusal),), "refusal", request)
        if turn.tool_use is not None:
            uses = tuple(ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in turn.tool_use)
            return self._reply(uses, turn.stop_reason or "tool_use", request)
        return self._reply(
            (TextBlock(text=turn.end_turn or ""),), turn.stop_reason or "end_turn", request
        )

    def _sampled(self, request: ModelRequest, n: int) -> ModelReply:
        answers = self._script.sampled
        if n > len(answers):
            raise ModelError(
                f"the scripted model has no answer to sampling request {n}: its script's "
                f"`sampled` has {len(answers)}",
                kind="not_configured",
            )
        return self._reply((TextBlock(text=answers[n - 1]),), "end_turn", request)

    def _reply(self, content, stop_reason, request: ModelRequest) -> ModelReply:  # type: ignore[no-untyped-def]
        # a stand-in for usage, ~4 characters a token: what was sent, what was said
        seen = request.context_tokens
        if seen is None:
            seen = (
                sum(len(json.dumps([b.model_dump() for b in m.content])) for m in request.messages)
                // 4
            )
        said = len(json.dumps([b.model_dump() for b in content]))
        usage = Usage(input_tokens=seen, output_tokens=max(1, said // 4))
        if not self._script.counted:  # a flow's deterministic stage: no model stands behind it
            usage = Usage()
        return ModelReply(content=content, stop_reason=stop_reason, usage=usage, model="scripted")


def _said_slowly(text: str, delay_s: float, watch: Callable[[str], None] | None) -> None:
    """The turn's delay; a watcher is told its text a word at a time across it, as a
    streaming model would say it."""
    if watch is None or not text:
        time.sleep(delay_s)
        return
    words = text.split(" ")
    pieces = [w + " " for w in words[:-1]] + words[-1:]
    for piece in pieces:
        time.sleep(delay_s / (len(pieces) + 1))
        watch(piece)
    time.sleep(delay_s / (len(pieces) + 1))


def exhausted(turns: int, asked: int) -> str:
    plural = "turn" if turns == 1 else "turns"
    return (
        f"the scripted model has no turn {asked}: its script has {turns} {plural}, all played "
        "(the run went on after the script's last turn, e.g. after a denial or failed checks)"
    )

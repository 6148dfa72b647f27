"""One model provider of the provider suite (`test_provider_suite`), behind one face:
a provider-neutral description of a scripted reply (`Say`: text, tool calls, a cut
at the output limit, a refusal, usage, a delay) becomes the stand-in's own reply
type (the Messages API's `Streamed`, Chat Completions' `Chat`), the CLI is pointed
at the stand-in as a user would point it at the provider, and each request the
stand-in received is read back in neutral terms: its turn, the call ids of its last
assistant turn, the tool ids its results answer, in order, and what each said."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from e2ekit import Cli

from tests.standin import chat_completions as chat
from tests.standin import messages_api as messages

ANTHROPIC_KEY = "sk-ant-e2e-suite-3b7d1f9a2c"
OPENAI_KEY = "sk-e2e-suite-8c4e2a6f1d"
LOOPBACK = {"NO_PROXY": "127.0.0.1,localhost"}


@dataclass(frozen=True)
class Use:
    """A tool call; `cut_at`: only this many characters of its input arrive."""

    id: str
    name: str
    input: dict[str, Any]
    cut_at: int | None = None


@dataclass(frozen=True)
class Say:
    """One scripted reply, whichever provider sends it."""

    text: str | None = None
    calls: tuple[Use, ...] = ()
    cut: bool = False  # stopped at the output limit
    refusal: str | None = None
    usage: tuple[int, int] | None = None  # (input, output) tokens; None: the stand-in's own
    delay_s: float = 0.0  # the stand-in waits this long before it answers

    @property
    def ids(self) -> list[str]:
        return [u.id for u in self.calls]


def turn_of(body: dict[str, Any]) -> int:
    """The turn a request asks for: one more than the assistant turns it carries."""
    return 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")


class Side:
    """A provider under test: its stand-in (started by `opened`) and its wire shapes."""

    name: str
    model_id: str  # the stand-in's model id: the one a reply says it came from
    key: str

    def __init__(self) -> None:
        self.api: Any = None
        self.by_turn: dict[int, list[Any]] | None = None  # see `answer_by_turn`
        self._turns_lock = threading.Lock()  # the stand-in answers on a thread a request

    def reply(self, say: Say) -> Any:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def model(self, **extra: Any) -> dict[str, Any]:
        """The spec's `model:` section, aimed at the stand-in."""
        raise NotImplementedError

    def asked(self, body: dict[str, Any]) -> list[str]:
        """The call ids of the request's last assistant turn."""
        raise NotImplementedError

    def answers(self, body: dict[str, Any]) -> dict[str, str]:
        """What the request's last user turn says to each call, by call id, in order."""
        raise NotImplementedError

    def answered(self, body: dict[str, Any]) -> list[str]:
        return list(self.answers(body))

    def play(self, *says: Say) -> None:
        self.api.play(*(self.reply(s) for s in says))

    def answer_by_turn(self, script: dict[int, list[Say]]) -> None:
        """Answer each request by its turn, not by its place in the queue: the turn's
        first reply the first time it is asked, its next one when asked again (the
        last one from then on). A claim a busy machine let expire is asked again and
        given the same answer, so a test's script never shifts. Called again, it
        replaces the script of the turns it names."""
        given = {t: [self.reply(s) for s in says] for t, says in script.items()}
        with self._turns_lock:
            self.by_turn = {**(self.by_turn or {}), **given}

    def choose(self, body: Any, queued: Any) -> Any:
        """The reply to a request: its turn's, when answering by turn, else the queue's."""
        with self._turns_lock:
            if self.by_turn is None or not isinstance(body, dict):
                return queued
            replies = self.by_turn.get(turn_of(body))
            if not replies:
                return queued
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.api.requests if r.method == "POST"]

    def requests(self) -> list[Any]:
        return list(self.api.requests)


class _MessagesByTurn(messages.MessagesStandin):
    side: Side

    def _next(self, recorded: messages.Recorded) -> tuple[int, messages.Reply, Any]:
        n, reply, usage = super()._next(recorded)
        return n, self.side.choose(recorded.body, reply), usage


class _ChatByTurn(chat.ChatStandin):
    side: Side

    def _next(self, recorded: chat.Recorded) -> tuple[int, chat.Reply]:
        n, reply = super()._next(recorded)
        return n, self.side.choose(recorded.body, reply)


class Anthropic(Side):
    name, model_id, key = "anthropic", messages.MODEL, ANTHROPIC_KEY

    def reply(self, say: Say) -> messages.Streamed:
        content: list[messages.Block] = [
            messages.Text(t) for t in (say.text, say.refusal) if t is not None
        ]
        content += [messages.ToolUse(u.id, u.name, u.input, cut_at=u.cut_at) for u in say.calls]
        stop = "end_turn"
        if say.refusal is not None:
            stop = "refusal"
        elif say.cut:
            stop = "max_tokens"
        elif say.calls:
            stop = "tool_use"
        usage = None
        if say.usage is not None:
            usage = {"input_tokens": say.usage[0], "output_tokens": say.usage[1]}
            usage |= {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        return messages.Streamed(tuple(content), stop_reason=stop, usage=usage, delay_s=say.delay_s)

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key, "ANTHROPIC_BASE_URL": self.api.url, **LOOPBACK}

    def model(self, **extra: Any) -> dict[str, Any]:
        return {"anthropic": {"model": self.model_id, "max_tokens": 1024, **extra}}

    def asked(self, body: dict[str, Any]) -> list[str]:
        [*_, last] = [m for m in body["messages"] if m["role"] == "assistant"]
        return [b["id"] for b in last["content"] if b["type"] == "tool_use"]

    def answers(self, body: dict[str, Any]) -> dict[str, str]:
        last = body["messages"][-1]
        assert last["role"] == "user", last
        return {
            b["tool_use_id"]: _text_of(b.get("content"))
            for b in last["content"]
            if isinstance(b, dict) and b["type"] == "tool_result"
        }


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content)
    return str(content or "")


class OpenAI(Side):
    name, model_id, key = "openai", chat.MODEL, OPENAI_KEY

    def reply(self, say: Say) -> chat.Chat:
        calls = tuple(chat.Call(u.name, u.input, id=u.id, cut_at=u.cut_at) for u in say.calls)
        finish = "auto"
        if say.refusal is not None:
            finish = "content_filter"
        elif say.cut:
            finish = "length"
        usage = None
        if say.usage is not None:
            usage = {"prompt_tokens": say.usage[0], "completion_tokens": say.usage[1]}
            usage["total_tokens"] = sum(say.usage)
        return chat.Chat(
            say.text, calls, refusal=say.refusal, finish_reason=finish, usage=usage,
            delay_s=say.delay_s,
        )  # fmt: skip

    def env(self) -> dict[str, str]:
        return {"AGENTLEDGER_MODEL_ENDPOINTS": self.api.url, "OPENAI_API_KEY": self.key, **LOOPBACK}

    def model(self, **extra: Any) -> dict[str, Any]:
        settings = {"model": self.model_id, "base_url": self.api.url, "max_tokens": 1024}
        return {"openai": {**settings, **extra}}

    def asked(self, body: dict[str, Any]) -> list[str]:
        [*_, last] = [m for m in body["messages"] if m["role"] == "assistant"]
        return [c["id"] for c in last.get("tool_calls") or ()]

    def answers(self, body: dict[str, Any]) -> dict[str, str]:
        tail: list[dict[str, Any]] = []
        for m in reversed(body["messages"]):
            if m["role"] == "assistant":
                break
            tail.insert(0, m)
        return {m["tool_call_id"]: str(m["content"]) for m in tail if m["role"] == "tool"}


SIDES: dict[str, type[Side]] = {"anthropic": Anthropic, "openai": OpenAI}


@contextlib.contextmanager
def opened(name: str, cli: Cli) -> Iterator[Side]:
    """The provider `name` with its stand-in started, and `cli` pointed at it."""
    side = SIDES[name]()
    standin: Any = _MessagesByTurn() if name == "anthropic" else _ChatByTurn()
    standin.side = side
    with standin as api:
        side.api = api
        cli.env |= side.env()
        yield side


@dataclass
class Spec:
    """A small run spec over the inventory example's tools and workspace."""

    budgets: dict[str, Any] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)  # added to the provider's settings

    def write(self, example: Path, model: dict[str, Any]) -> Path:
        """The spec, with `model` as its whole `model:` section, as a file in `example`."""
        body: dict[str, Any] = {
            "task": "How many A1 can we sell? Reserve 2.",
            "system": "Use the stock tools; never guess a quantity.",
            "workspace": "./ws",
            "copy_workspace": True,
            "tools": ["inventory_tools"],
            "principal": {
                "id": "alice",
                "tenant": "shop-1",
                "scopes": ["stock:read", "stock:write"],
            },
            "budgets": {"max_turns": 8, **self.budgets},
            "model": model,
        }
        if self.policies:
            body["policies"] = self.policies
        path = example / f"suite-{len(list(example.glob('suite-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return path

    def on(self, side: Side, example: Path) -> Path:
        """The spec aimed at `side`'s stand-in."""
        return self.write(example, side.model(**self.model))

"""The context view: under its budget it is the full conversation; over it,
older tool results are shortened with markers, then the oldest turns left out
whole; the recent turns, the task and every tool_use/tool_result pair stay; the
log's turns are untouched; the hash and the decisions rebuild the view."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agentledger.events import context_past, context_units, context_view
from agentledger.events.context_view import CHARS_PER_TOKEN, assemble, canonical, with_context
from agentledger.events.conversation import messages
from agentledger.events.history import History
from agentledger.events.redact import redactor
from agentledger.events.state import Call, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import CODEC, ModelRequested
from agentledger.schemas.content import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import (
    ContextSettings,
    Principal,
    RunSpec,
    ScriptedModel,
    ScriptedTurn,
    ToolSpec,
)

TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read a file of the workspace.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        read_only=True,
    ),
)
OUTPUT_CHARS = 4_000


def spec(**context: int) -> RunSpec:
    return RunSpec(
        task="Summarise every file.",
        system="Read before you write.",
        principal=Principal(id="alice", tenant="t1"),
        model=ScriptedModel(scripted=(ScriptedTurn(end_turn="done"),)),
        context=ContextSettings(**context),
    )


def output(i: int, chars: int = OUTPUT_CHARS) -> str:
    line = f"file {i}: the quick brown fox jumps over the lazy dog. "
    return (line * (chars // len(line) + 1))[:chars]


def turn(i: int, chars: int = OUTPUT_CHARS) -> Turn:
    use = ToolUseBlock(id=f"c{i}", name="read_file", input={"path": f"f{i}.txt"})
    call = Call(
        call_id=use.id, turn=i, name=use.name, input=use.input,
        status=CallStatus.SUCCEEDED, output=output(i, chars),
    )  # fmt: skip
    thinking = ThinkingBlock(thinking=f"I should read f{i}.txt", signature=f"sig-{i}==")
    return Turn(i, (thinking, TextBlock(text=f"reading {i}"), use), "tool_use", "m", (call,))


def run(n: int, s: RunSpec, chars: int = OUTPUT_CHARS) -> RunState:
    turns = [turn(i, chars) for i in range(1, n + 1)]
    return RunState(
        run_id="r-1",
        status=RunStatus.REQUESTING_MODEL,
        spec=s,
        workspace=None,
        created_at=0.0,
        history=History(turns[:-1]),
        current_turn=turns[-1],
    )


def results(view_messages: tuple[Message, ...]) -> dict[str, str]:
    return {
        b.tool_use_id: b.content
        for m in view_messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }


def assert_every_tool_use_is_answered_next(view_messages: tuple[Message, ...]) -> None:
    assert view_messages[0].role == "user"
    roles = [m.role for m in view_messages]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles
    for i, m in enumerate(view_messages):
        ids = [b.id for b in m.content if isinstance(b, ToolUseBlock)]
        if ids:
            answer = view_messages[i + 1]
            got = [b.tool_use_id for b in answer.content if isinstance(b, ToolResultBlock)]
            assert got == ids
    answered = [
        b.tool_use_id for m in view_messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    used = [b.id for m in view_messages for b in m.content if isinstance(b, ToolUseBlock)]
    assert answered == used


def test_under_its_budget_the_view_is_the_whole_conversation_with_no_decisions() -> None:
    s = run(5, spec())
    view = assemble(s, TOOLS)
    assert view.messages == messages(s)
    assert view.decisions == ()
    assert view.system == "Read before you write." and view.tools == TOOLS


def test_a_60_turn_run_stays_under_its_budget_while_the_log_keeps_all_60_turns() -> None:
    s = run(60, spec(budget_tokens=20_000, keep_recent_turns=4))
    full = len(canonical(s.spec.system, TOOLS, messages(s)))
    view = assemble(s, TOOLS)
    assert full // CHARS_PER_TOKEN > 60_000  # the whole conversation is three times the budget
    assert view.tokens <= 20_000
    sent = len(canonical(view.system, view.tools, view.messages))
    assert sent <= view.chars <= sent * 1.1  # the size is an upper bound, close to the truth
    assert len(s.turns) == 60
    assert all(len(c.output) == OUTPUT_CHARS for t in s.turns for c in t.calls)
    assert [d.action for d in view.decisions] == ["shortened"]
    assert_every_tool_use_is_answered_next(view.messages)


def test_the_most_recent_turns_are_sent_in_full_and_older_results_shortened_oldest_first() -> None:
    s = run(60, spec(budget_tokens=20_000, keep_recent_turns=4))
    sent = results(assemble(s, TOOLS).messages)
    assert len(sent) == 60  # no turn left out: shortening was enough
    for i in range(57, 61):
        assert sent[f"c{i}"] == output(i)
    assert len(sent["c1"]) < 400
    lengths = [len(sent[f"c{i}"]) for i in range(1, 57)]
    assert lengths == sorted(lengths)  # the oldest are the first cut


def test_a_shortened_result_keeps_a_preview_and_says_what_was_cut_and_where_the_rest_is() -> None:
    s = run(60, spec(budget_tokens=20_000, preview_chars=120))
    content = results(assemble(s, TOOLS).messages)["c3"]
    assert content.startswith(output(3)[:120] + "\n")
    assert content.endswith(
        f"[cut: {OUTPUT_CHARS - 120:,} of {OUTPUT_CHARS:,} chars of the result of call c3 "
        "(read_file, turn 3); the full result is in the run log: read_output(ref='c3') reads it]"
    )


def test_the_decision_says_which_turns_were_shortened_and_by_how_much() -> None:
    s = run(60, spec(budget_tokens=20_000, preview_chars=100))
    (d,) = assemble(s, TOOLS).decisions
    assert (d.action, d.first_turn) == ("shortened", 1)
    assert d.items == d.last_turn <= 56
    assert d.chars_before == d.items * OUTPUT_CHARS
    assert d.chars_after < d.items * 400


def test_when_shortening_is_not_enough_the_oldest_turns_are_left_out_whole_and_named() -> None:
    s = run(60, spec(budget_tokens=6_000, keep_recent_turns=4))
    view = assemble(s, TOOLS)
    assert view.tokens <= 6_000
    omitted, shortened = view.decisions
    assert (omitted.action, shortened.action) == ("omitted", "shortened")
    assert omitted.first_turn == 1 and omitted.items == omitted.last_turn < 56
    assert shortened.first_turn == omitted.last_turn + 1 and shortened.last_turn == 56
    task, note = view.messages[0].content
    assert task == TextBlock(text="Summarise every file.")
    assert isinstance(note, TextBlock)
    assert note.text.startswith(f"[omitted: turns 1-{omitted.last_turn} ({omitted.items} turns,")
    sent = results(view.messages)
    assert f"c{omitted.last_turn}" not in sent and f"c{omitted.last_turn + 1}" in sent
    assert_every_tool_use_is_answered_next(view.messages)


@pytest.mark.parametrize("budget", [256, 1_000, 3_000, 8_000, 20_000, 70_000, 200_000])
@pytest.mark.parametrize("recent", [1, 4])
def test_no_budget_separates_a_tool_use_from_its_tool_result(budget: int, recent: int) -> None:
    view = assemble(run(60, spec(budget_tokens=budget, keep_recent_turns=recent)), TOOLS)
    assert_every_tool_use_is_answered_next(view.messages)
    for i in range(61 - recent, 61):
        assert results(view.messages)[f"c{i}"] == output(i)


def test_recent_turns_that_alone_exceed_the_budget_are_sent_and_reported_over_budget() -> None:
    s = run(3, spec(budget_tokens=256, keep_recent_turns=4))
    view = assemble(s, TOOLS)
    assert view.messages == messages(s)
    (d,) = view.decisions
    assert d.action == "over_budget" and d.chars_before == view.chars
    assert d.chars_after == 256 * CHARS_PER_TOKEN


def test_thinking_blocks_go_back_verbatim_however_the_view_is_cut() -> None:
    s = run(60, spec(budget_tokens=3_000))
    sent = [
        b for m in assemble(s, TOOLS).messages for b in m.content if isinstance(b, ThinkingBlock)
    ]
    assert sent and all(b == s.turns[int(b.signature[4:-2]) - 1].content[0] for b in sent)


def test_secrets_are_redacted_everywhere_in_the_view_but_the_log_keeps_them() -> None:
    token = "tok-9f8e7d6c5b4a"
    base = run(2, spec())
    call = base.turns[0].calls[0]
    leaky = Turn(1, base.turns[0].content, "tool_use", "m", (
        Call(call.call_id, 1, call.name, call.input, CallStatus.SUCCEEDED,
             output={"config": f"TOKEN={token}", "aws": "AKIAIOSFODNN7EXAMPLE"}),
    ))  # fmt: skip
    s = RunState(**{**{f: getattr(base, f) for f in base.__slots__}, "history": History([leaky])})  # type: ignore[arg-type]
    view = assemble(s, TOOLS, redactor({"DEPLOY_TOKEN": token}))
    text = canonical(view.system, view.tools, view.messages)
    assert token not in text and "AKIAIOSFODNN7EXAMPLE" not in text
    assert "TOKEN=[REDACTED:DEPLOY_TOKEN]" in text and "[REDACTED:aws_access_key_id]" in text
    assert s.turns[0].calls[0].output["config"] == f"TOKEN={token}"


def test_the_hash_is_of_what_is_sent_and_rebuilding_from_the_same_state_matches() -> None:
    s = run(30, spec(budget_tokens=8_000))
    a, b = assemble(s, TOOLS), assemble(s, TOOLS)
    assert a.digest == b.digest and len(a.digest) == 64
    assert assemble(s, ()).digest != a.digest
    assert assemble(run(30, spec(budget_tokens=9_000)), TOOLS).digest != a.digest


def test_the_claim_records_hash_size_and_decisions_and_round_trips_through_the_codec() -> None:
    view = assemble(run(60, spec(budget_tokens=5_000)), TOOLS)
    requested = with_context(ModelRequested(turn=61, attempt=1, deadline_at=5.0), view)
    assert requested.context_hash == view.digest and requested.context_tokens == view.tokens
    assert requested.context_decisions == view.decisions
    env = Envelope(
        id="e1",
        run_id="r-1",
        seq=9,
        type=requested.type,
        at=1.0,
        source="model",
        v=1,
        data=requested,
    )
    assert CODEC.decode(CODEC.encode(env)).data == requested
    assert len(json.dumps([d.model_dump() for d in view.decisions])) < 400


def test_a_model_request_from_an_older_log_decodes_without_context_fields() -> None:
    old = ModelRequested.model_validate(
        {"type": "ModelRequested", "turn": 1, "attempt": 1, "deadline_at": 2.0}
    )
    assert old.context_hash is None and old.context_decisions == ()


# --- grown by turns: built once, extended, identical to a rebuild --------------------


def grown(n: int, s: RunSpec, chars: int = OUTPUT_CHARS) -> list[RunState]:
    """The states a run passes through at each model request, grown as the fold grows them
    (the history shared and appended to, past turns the same objects)."""
    states, history = [], History[Turn]()
    for i in range(1, n + 1):
        current = turn(i, chars)
        state = run(1, s)
        states.append(replace(state, history=history, current_turn=current))
        history = history.append(current)
    return states


def forget() -> None:
    for cache in (
        context_units._UNITS,
        context_units._SHORT,
        context_past._PAST,
        context_view._BUILT,
        context_view._HEADS,
    ):
        cache.clear()


@pytest.mark.parametrize("budget", [2_000, 8_000, 30_000, 200_000])
def test_a_view_grown_turn_by_turn_is_the_view_rebuilt_from_scratch(budget: int) -> None:
    forget()
    states = grown(60, spec(budget_tokens=budget))
    incremental = [assemble(s, TOOLS) for s in states]
    for s, seen in zip(states, incremental, strict=True):
        forget()  # as `agentledger context` in a new process
        rebuilt = assemble(s, TOOLS)
        assert (rebuilt.digest, rebuilt.messages) == (seen.digest, seen.messages)
        assert (rebuilt.chars, rebuilt.decisions) == (seen.chars, seen.decisions)


def test_under_budget_each_request_extends_the_one_before() -> None:
    views = [assemble(s, TOOLS) for s in grown(40, spec())]
    for before, after in zip(views, views[1:], strict=False):
        assert after.messages[: len(before.messages)] == before.messages


def kept(before: context_view.ContextView, after: context_view.ContextView) -> float:
    """The share of the earlier request that the later one starts with."""
    pairs = zip(before.messages, after.messages, strict=False)
    same = next((i for i, (a, b) in enumerate(pairs) if a != b), len(before.messages))
    return same / len(before.messages)


def test_over_budget_the_prefix_is_rewritten_in_steps_not_every_turn() -> None:
    views = [assemble(s, TOOLS) for s in grown(120, spec(budget_tokens=30_000))]
    assert all(v.tokens <= 30_000 for v in views)
    changed = [kept(a, b) for a, b in zip(views, views[1:], strict=False)]
    # of 119 requests, about one in STEP_TURNS changes what was sent before it
    assert 1 <= sum(k < 1 for k in changed) <= 120 // context_past.STEP_TURNS
    cut = [d for d in views[-1].decisions if d.action == "shortened"]
    assert cut and cut[0].last_turn % context_past.STEP_TURNS == 0


def test_a_tight_budget_changes_the_tail_each_turn_and_the_head_only_in_steps() -> None:
    views = [assemble(s, TOOLS) for s in grown(120, spec(budget_tokens=8_000))]
    assert all(v.tokens <= 8_000 for v in views)
    changed = [kept(a, b) for a, b in zip(views, views[1:], strict=False)]
    assert sum(k < 0.5 for k in changed) <= 120 // context_past.STEP_TURNS


def test_a_refused_turn_leaves_the_view_but_what_a_person_said_after_it_stays() -> None:
    s = run(3, spec())
    refused = Turn(3, (TextBlock(text="I can't help with that."),), "refusal", "m", (),
                   feedback="alice says: only read the public files")  # fmt: skip
    s = replace(s, current_turn=refused)
    view = assemble(s, TOOLS)
    text = canonical(view.system, view.tools, view.messages)
    assert "I can't help with that." not in text
    assert view.messages[-1].role == "user"
    assert view.messages[-1].content[-1] == TextBlock(text="alice says: only read the public files")
    (withdrawn,) = view.decisions
    assert (withdrawn.action, withdrawn.first_turn, withdrawn.items) == ("withdrawn", 3, 1)
    assert s.turns[-1].content == refused.content  # the log keeps it


def test_a_thinking_block_without_its_signature_is_never_sent_back() -> None:
    s = run(2, spec())
    cut = Turn(2, (ThinkingBlock(thinking="Let me think ab", signature=""),), "max_tokens", "m")
    view = assemble(replace(s, current_turn=cut), TOOLS)
    sent = [b for m in view.messages for b in m.content if isinstance(b, ThinkingBlock)]
    assert [b.signature for b in sent] == ["sig-1=="]


def test_the_head_made_once_a_run_is_made_again_when_its_tools_system_or_task_change() -> None:
    """The canonical JSON before the turns is kept from one request to the next;
    a request with other tools, another system text or another task gets its own."""
    forget()
    states = grown(3, spec())
    other_tool = ToolSpec(
        name="list_files", description="List.", input_schema={"type": "object"}, read_only=True
    )
    changed = [
        (states[2], TOOLS),
        (states[2], (*TOOLS, other_tool)),
        (replace(states[2], spec=states[2].spec.model_copy(update={"system": "Be brief."})), TOOLS),
        (replace(states[2], spec=states[2].spec.model_copy(update={"task": "Count them."})), TOOLS),
    ]
    for s in states[:2]:
        assemble(s, TOOLS)  # the run's head is kept
    for s, tools in changed:
        seen = assemble(s, tools)
        forget()  # as in a new process: nothing kept
        fresh = assemble(s, tools)
        assert (seen.digest, seen.messages, seen.chars) == (
            fresh.digest,
            fresh.messages,
            fresh.chars,
        )
    assert len({assemble(s, tools).digest for s, tools in changed}) == len(changed)

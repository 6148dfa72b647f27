"""No stored event is larger than the store's cap: a tool that returns 30 MB (and
declares no output cap) is recorded as the head of its output and an `Overflow`
naming the run's overflow pages, written with the event in the same append;
`read_output` pages through the whole output, into those pages; and the model's
next request carries at most the default cap of it. A failure's message and a
check's evidence are cut the same way. What a tool returns is redacted before
it is cut, so no secret is split between an event and its pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from handlerkit import Unit, call, new_unit, spec
from runlog import RUN_ID, T0, envelope, make_spec
from unit_tools import numbered_text

from agentledger.events.context_view import assemble
from agentledger.events.output_cap import DEFAULT_CAP, PAGE_CHARS, cut_event
from agentledger.events.redact import redactor
from agentledger.events.types import (
    CODEC,
    AcceptanceChecked,
    ModelRequested,
    RunCreated,
    ToolCallFailed,
    ToolCallSucceeded,
)
from agentledger.schemas.content import ToolResultBlock
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.overflow import DEFAULT_MAX_BYTES
from agentledger.services.adapters.store.redacting import RedactingStore
from agentledger.services.adapters.tools.builtin import PAGE, read_output
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.handlers.outputs import RunOutputs
from agentledger.services.handlers.snapshots import _decoded, encode

BIG = 30_000_000


FAR = BIG - 2 * PAGE - 5  # deep in the overflow pages


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Unit, str]:
    """One run (its 30 MB made once): a tool returns 30 MB and declares no output
    cap, the model reads deep into it with read_output, and ends its turn."""
    unit = new_unit(tmp_path_factory.mktemp("big") / "ws")
    run = unit.create(
        "r-big",
        spec(
            {"tool_use": [call("c1", "big_output", chars=BIG)]},
            {"tool_use": [call("c2", "read_output", ref="c1", offset=FAR)]},
            {"end_turn": "ok"},
        ),
    )
    unit.drive()
    return unit, run


def _succeeded(unit: Unit, run_id: str, call_id: str) -> tuple[ToolCallSucceeded, bytes]:
    [env] = [
        e for e in unit.memory.read(run_id)
        if isinstance(e.data, ToolCallSucceeded) and e.data.call_id == call_id
    ]  # fmt: skip
    return env.data, CODEC.encode(env)


def test_a_30_mb_output_is_stored_as_a_head_under_the_cap_with_the_rest_in_overflow_pages(
    big: tuple[Unit, str],
) -> None:
    unit, run = big
    stored, encoded = _succeeded(unit, run, "c1")
    assert len(encoded) <= DEFAULT_MAX_BYTES  # measured as the log holds it
    over = stored.overflow
    assert over is not None and over.field == "output" and over.chars == BIG
    assert stored.output == numbered_text(BIG)[: over.head]
    pages = unit.memory.overflow_pages(run, over.ref, 0, over.pages)
    assert stored.output + "".join(pages) == numbered_text(BIG)  # nothing lost
    assert all(len(p) == PAGE_CHARS for p in pages[:-1])


def test_read_output_pages_through_the_whole_output(big: tuple[Unit, str]) -> None:
    unit, run = big
    ctx = ToolContext(
        run, "reader", None, "unit", "unit-tenant", output_window=RunOutputs(unit.app, run).window
    )

    read, offset = [], 0
    while True:
        page = read_output("c1", ctx, offset=offset)
        shown, marker = page.rsplit("\n[", 1)
        read.append(shown)
        if "this is the end" in marker:
            break
        assert f"call read_output(ref='c1', offset={offset + PAGE})" in marker
        offset += PAGE
    assert "".join(read) == numbered_text(BIG)
    assert offset == BIG - PAGE


def test_read_output_as_the_model_calls_it_reads_into_the_overflow_pages(
    big: tuple[Unit, str],
) -> None:
    unit, run = big
    got, _ = _succeeded(unit, run, "c2")
    assert got.output == numbered_text(BIG)[FAR : FAR + PAGE] + (
        f"\n[cut: shown characters {FAR}–{FAR + PAGE} of {BIG}; the full output is kept as ref "
        f"'c1': call read_output(ref='c1', offset={FAR + PAGE}) to read on]"
    )


def test_the_next_model_request_carries_the_default_cap_of_an_uncapped_output(
    big: tuple[Unit, str],
) -> None:
    unit, run = big
    requests = [e.data for e in unit.memory.read(run) if isinstance(e.data, ModelRequested)]
    assert len(requests) == 3
    tokens = [r.context_tokens for r in requests]
    # the task, the tool list, 4,000 characters of each result and its marker: not 7.5 M tokens
    assert all(t is not None and t * 4 < 2 * DEFAULT_CAP + 8_000 for t in tokens), tokens
    first, _ = _view_results(unit, run)
    assert first == numbered_text(BIG)[:DEFAULT_CAP] + (
        f"\n[cut: shown characters 0–{DEFAULT_CAP} of {BIG}; the full output is kept as ref "
        f"'c1': call read_output(ref='c1', offset={DEFAULT_CAP}) to read on]"
    )


def _view_results(unit: Unit, run: str) -> list[str]:
    view = assemble(unit.state(run), unit.app.toolset.specs)
    return [
        b.content for m in view.messages for b in m.content
        if isinstance(b, ToolResultBlock) and isinstance(b.content, str)
    ]  # fmt: skip


def test_a_huge_failure_message_is_cut_and_the_model_sees_a_capped_error(unit: Unit) -> None:
    run = unit.create(
        "r-fail",
        spec({"tool_use": [call("c1", "big_failure", chars=2_000_000)]}, {"end_turn": "ok"}),
    )
    unit.drive()
    [env] = [e for e in unit.memory.read(run) if isinstance(e.data, ToolCallFailed)]
    assert len(CODEC.encode(env)) <= DEFAULT_MAX_BYTES
    over = env.data.overflow
    assert over is not None and over.field == "error.message" and over.chars == 2_000_000
    pages = unit.memory.overflow_pages(run, over.ref, 0, over.pages)
    assert env.data.error.message + "".join(pages) == numbered_text(2_000_000)
    [result] = _view_results(unit, run)
    assert len(result) < 2 * DEFAULT_CAP and "[cut: shown characters 0–4000 of" in result


def test_a_checks_huge_evidence_keeps_its_head_and_its_reason() -> None:
    evidence = {"output": "x" * 1_000_000, "reason": "got " + "x" * 5000}
    checked = AcceptanceChecked(
        index=0, check="tool", passed=False, evidence=evidence, checked_at=1.0
    )
    cut, pages = cut_event(checked, ref="e1", max_bytes=DEFAULT_MAX_BYTES)
    assert isinstance(cut, AcceptanceChecked) and cut.overflow is not None
    assert cut.evidence["reason"].startswith("got xxx") and len(cut.evidence["reason"]) == 2000
    assert (
        cut.evidence["head"] + "".join(pages)
        == '{"output": "' + "x" * 1_000_000 + '", "reason": "got ' + "x" * 5000 + '"}'
    )


def test_an_output_under_the_cap_is_stored_whole_and_untouched() -> None:
    ok = ToolCallSucceeded(
        call_id="c", output={"rows": list(range(1000))}, started_at=1.0, finished_at=2.0
    )
    assert cut_event(ok, ref="e1", max_bytes=DEFAULT_MAX_BYTES) == (ok, [])


def test_a_head_never_splits_a_character() -> None:
    text = "é" * 300_000  # two bytes each
    ok = ToolCallSucceeded(call_id="c", output=text, started_at=1.0, finished_at=2.0)
    cut, pages = cut_event(ok, ref="e1", max_bytes=DEFAULT_MAX_BYTES)
    assert isinstance(cut, ToolCallSucceeded) and cut.overflow is not None
    assert cut.output + "".join(pages) == text
    assert len(cut.output.encode()) <= DEFAULT_MAX_BYTES


def test_a_secret_is_redacted_before_the_output_is_cut() -> None:
    secret = "sk-ant-" + "s3cr3t" * 10  # a well-known credential pattern
    text = ("x" * (PAGE_CHARS - 30) + " " + secret + " ") * 8  # secrets across page boundaries
    inner = MemoryEventStore()
    store = RedactingStore(inner, lambda spec: redactor({}))
    done = ToolCallSucceeded(call_id="c", output=text, started_at=T0, finished_at=T0)
    batch = [envelope(RunCreated(spec=make_spec()), seq=1), envelope(done, seq=2)]

    store.append(RUN_ID, store.as_stored(RUN_ID, batch), expected_seq=0, live=True)

    [_, env] = inner.read(RUN_ID)
    assert env.data.overflow is not None
    pages = inner.overflow_pages(RUN_ID, env.id, 0, env.data.overflow.pages)
    whole = env.data.output + "".join(pages)
    assert "s3cr3t" not in whole and whole.count("[REDACTED:anthropic_api_key]") == 8


def test_an_outcome_logged_before_the_cap_existed_decodes_as_it_did() -> None:
    stored = envelope(
        ToolCallSucceeded(call_id="c", output={"n": 1}, started_at=T0, finished_at=T0), seq=2
    )
    old = {**stored.model_dump(mode="json"), "data": {
        "type": "ToolCallSucceeded", "call_id": "c", "output": {"n": 1},
        "started_at": T0, "finished_at": T0,
    }}  # fmt: skip
    decoded = CODEC.from_mapping(old)
    assert decoded.data == stored.data and decoded.data.overflow is None


def test_a_cut_output_survives_a_snapshot_of_the_state(big: tuple[Unit, str]) -> None:
    unit, run = big
    state = unit.state(run)
    snap = encode(state, pages_saved=0, with_spec=True)
    restored = _decoded(snap, lambda n: [snap.pages[i] for i in range(n)])
    [cut] = [c for t in restored.turns for c in t.calls if c.call_id == "c1"]
    assert cut.overflow is not None and cut.overflow.chars == BIG
    assert restored.turns == state.turns

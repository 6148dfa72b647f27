"""The one codec: every event type survives encode → decode unchanged, and every
kind of bad entry is refused with InvalidEvent naming the field and keeping
the raw bytes, so it can be inspected and moved aside."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from pydantic import BaseModel, ConfigDict
from runlog import PROPERTY, RUN_ID, T0, envelope, make_spec, text, use
from strategies import random_events

from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.types import (
    CODEC,
    EVENT_TYPES,
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ChildRunEnded,
    ChildRunStarted,
    Event,
    FieldError,
    FlowRouted,
    HumanReplied,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    RunHeld,
    RunReleased,
    RunResumed,
    RunTimedOut,
    ToolCallBackedOff,
    ToolCallCancelled,
    ToolCallConfirmedNotDone,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallLeaseExpired,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolCallWaiting,
    ToolError,
)
from agentledger.schemas.codec import EventCodec, unpack
from agentledger.schemas.content import RedactedThinkingBlock, ThinkingBlock, Usage
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent

ERROR = ToolError(
    code="invalid_arguments",
    message="path: Field required",
    retryable=False,
    fields=(FieldError(loc="path", msg="Field required"),),
    retry_after_s=1.5,
)
EVERY_EVENT: list[Event] = [
    ToolSampledModel(
        call_id="c1",
        server="ev",
        sample=1,
        system="be brief",
        prompt="[user] hi",
        max_tokens=40,
        text="hello",
        stop_reason="end_turn",
        model="scripted",
        usage=Usage(input_tokens=3, output_tokens=1),
    ),
    RunCreated(spec=make_spec(), request_id="req-1", workspace="/tmp/ws", base_dir="/tmp"),
    RunCreated(spec=make_spec(), workspace="/tmp/ws", parent_run_id="r-p.s1", stage="fix"),
    ChildRunStarted(stage="fix", attempt=1, child_run_id="r-p.fix.1.s1", spec=make_spec()),
    ChildRunEnded(
        stage="fix",
        attempt=2,
        child_run_id="r-p.fix.2.s1",
        outcome="completed",
        status="completed",
        result={"summary": "done", "n": [1, {"a": None}]},
        usage=Usage(input_tokens=7, output_tokens=2),
        cost_usd=0.25,
        turns=3,
        detail="ok",
    ),  # fmt: skip
    FlowRouted(stage="verify", outcome="failed", to="fix", loop=True),
    FlowRouted(stage="merge", outcome="succeeded", to=None),
    RunHeld(tenant="acme", queue="default", place=3, max_live=2),
    RunReleased(held_s=12.5),
    ModelRequested(turn=1, attempt=2, deadline_at=T0 + 0.25),
    ModelRequestFailed(
        turn=1,
        attempt=2,
        kind="rate_limited",
        cause="rate limited (429 rate_limit_error): slow down",
        status=429,
        retry_at=T0 + 3.5,
    ),  # fmt: skip
    ModelResponded(
        turn=1,
        content=(
            ThinkingBlock(thinking="hmm", signature="sig=="),
            RedactedThinkingBlock(data="opaque"),
            text("let me look"),
            use("c1", path="a", nested={"k": [1, 2.5, None]}),
        ),
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=3, cache_read_input_tokens=7),
        model="claude-x",
    ),
    ToolCallProposed(call_id="c1", turn=1, name="read_file", input={"path": "a"}),
    ToolCallValidated(call_id="c1", read_only=True, reads=("file:a",), timeout_s=5.0),
    ApprovalRequested(
        call_id="c3",
        read_only=False,
        writes=("file:b",),
        timeout_s=10.0,
        expires_at=T0 + 3600,
        reason="writes need a person",
    ),
    ApprovalGranted(call_id="c3", by="bob", note="fine"),
    ApprovalDenied(call_id="c3", by="agentledger", note="no answer in time", expired=True),
    ToolCallRejected(call_id="c2", error=ERROR),
    ToolCallStarted(call_id="c1", attempt=1, worker="w-1", deadline_at=T0 + 10),
    ToolCallSucceeded(
        call_id="c1", output={"lines": ["x", "y"], "n": 2}, started_at=T0, finished_at=T0 + 1
    ),
    ToolCallFailed(call_id="c1", error=ERROR, finished_at=T0 + 2),
    ToolCallOutcomeUnknown(call_id="c1", reason="the worker died"),
    ToolCallConfirmedNotDone(call_id="c1", op_key="write:a"),
    ToolCallCancelled(call_id="c1", requested_at=T0, stopped_at=T0 + 0.5),
    ToolCallForceTerminated(
        call_id="c1", requested_at=T0, terminated_at=T0 + 5, detail="SIGKILL to 1 process group"
    ),
    AcceptanceStarted(attempt=1, deadline_at=T0 + 30),
    AcceptanceChecked(
        index=0,
        check="pytest",
        passed=False,
        evidence={"exit_code": 1},
        started_at=T0 - 1,
        checked_at=T0,
        depends_on=("*",),
    ),
    AcceptanceCheckStopped(
        attempt=1,
        index=0,
        check="command 'sleep 9' exits 0",
        requested_at=T0,
        stopped_at=T0 + 5,
        signals=("SIGTERM", "SIGKILL"),
        detail="SIGKILL after 5s",
    ),  # fmt: skip
    AcceptanceFailed(feedback="1 check failed"),
    RunCompleted(detail="2 acceptance checks passed"),
    RunFailed(reason="model_error", detail="overloaded"),
    RunBudgetExhausted(budget="turns", used=8, limit=8, detail="8 of 8 turns used"),
    RunEscalated(reason="outcome_unknown", detail="write unknown"),
    RunTimedOut(limit_s=600.0, elapsed_s=600.5, detail="600.5s of 600s wall clock used"),
    RunCancelRequested(by="carol", source="inbox", reason="wrong task"),
    RunCancelled(
        requested_at=T0, by="carol", side_effects=("write_file(c3) succeeded",), detail="cancelled"
    ),
    HumanReplied(by="dana", text="the file is called b"),
    RunResumed(by="dana", note="try again"),
    RunAborted(by="dana", note="enough"),
    ToolCallWaiting(call_id="c1", request_id="run-1/c1/1", waiting_for=("file:a",)),
    ToolCallBackedOff(call_id="c1", request_id="run-1/c1/1", keys=("limit:svc:a",), until=T0 + 2),
    ToolCallScheduled(
        call_id="c1", request_id="run-1/c1/1", tokens={"file:a": 7}, lease_until=T0 + 30
    ),
    ToolCallLeaseExpired(call_id="c1", request_id="run-1/c1/1"),
]


def header(event: Event | None = None, **changes: Any) -> dict[str, Any]:
    """A decoded entry as a mapping, with some fields changed or (None) removed."""
    raw = CODEC.encode(envelope(event or ModelRequested(turn=1, attempt=1, deadline_at=T0), seq=2))
    obj: dict[str, Any] = msgpack.unpackb(raw)
    for name, value in changes.items():
        if value is None:
            del obj[name]
        else:
            obj[name] = value
    return obj


def refused(obj: Any) -> InvalidEvent:
    raw = msgpack.packb(obj)
    with pytest.raises(InvalidEvent) as err:
        CODEC.decode(raw)
    assert err.value.raw == raw
    return err.value


def test_the_sample_holds_every_event_type() -> None:
    assert {e.type for e in EVERY_EVENT} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: e.type)
def test_every_event_type_survives_a_round_trip(event: Event) -> None:
    env = envelope(event, seq=3).model_copy(update={"causation_id": f"{RUN_ID}:2"})
    decoded = CODEC.decode(CODEC.encode(env))
    assert decoded == env
    assert type(decoded.data) is type(event)


@PROPERTY
@given(random_events)
def test_any_generated_event_survives_a_round_trip(event: Event) -> None:
    env = envelope(event, seq=1)
    assert CODEC.decode(CODEC.encode(env)) == env


@pytest.mark.parametrize("raw", [b"", b"\xc1", b"\x92\x01", b"\x81\xa1a"])
def test_garbage_bytes_are_refused_keeping_the_bytes(raw: bytes) -> None:
    with pytest.raises(InvalidEvent) as err:
        CODEC.decode(raw)
    assert err.value.raw == raw and err.value.field is None


@pytest.mark.parametrize("obj", [[1, 2], "RunCreated", 7, None])
def test_an_entry_that_is_not_a_map_is_refused(obj: Any) -> None:
    assert "expected a map" in refused(obj).reason


@pytest.mark.parametrize("name", ["id", "run_id", "seq", "type", "at", "source"])
def test_a_missing_header_field_is_named(name: str) -> None:
    err = refused(header(**{name: None}))
    assert (err.field, err.reason) == (name, "missing")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("id", 1),
        ("run_id", b"run-1"),
        ("seq", "2"),
        ("seq", True),
        ("seq", 2.0),
        ("at", "yesterday"),
        ("at", False),
        ("source", ["test"]),
        ("causation_id", 5),
        ("v", "1"),
    ],
)
def test_a_wrong_typed_header_field_is_named(name: str, value: Any) -> None:
    err = refused(header(**{name: value}))
    assert err.field == name and err.reason.startswith("wrong type")


def test_an_unexpected_header_field_is_named() -> None:
    assert refused({**header(), "colour": "red"}).field == "colour"


def test_an_unknown_event_type_is_refused() -> None:
    err = refused(header(type="RunTeleported"))
    assert err.field == "type" and "'RunTeleported'" in err.reason


@pytest.mark.parametrize("data", [None, [], "x"], ids=["missing", "list", "str"])
def test_a_payload_that_is_missing_or_not_a_map_is_refused(data: Any) -> None:
    assert refused(header(data=data)).field == "data"


@pytest.mark.parametrize(
    ("event", "data", "field"),
    [
        (None, {"turn": 0, "attempt": 1, "deadline_at": T0}, "data.turn"),
        (None, {"turn": 1, "attempt": 1}, "data.deadline_at"),
        (None, {"turn": 1, "attempt": 1, "deadline_at": T0, "extra": 1}, "data.extra"),
        (None, {"type": "RunFailed", "turn": 1, "attempt": 1, "deadline_at": T0}, "data.type"),
        (
            ToolCallRejected(call_id="c2", error=ERROR),
            {"call_id": "c", "error": {**ERROR.model_dump(), "code": "oops"}},
            "data.error.code",
        ),
    ],
)
def test_a_bad_payload_is_refused_naming_the_field_inside_it(
    event: Event | None, data: dict[str, Any], field: str
) -> None:
    assert refused(header(event, data=data)).field == field


def test_a_seq_below_1_is_refused() -> None:
    assert refused(header(seq=0)).field == "seq"


def test_encoding_an_unknown_type_is_refused() -> None:
    env = envelope(RunCompleted(detail="x"), seq=1).model_copy(update={"type": "Nope"})
    with pytest.raises(InvalidEvent) as err:
        CODEC.encode(env)
    assert err.value.field == "type"


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1])
def test_a_payload_msgpack_cannot_hold_is_refused_as_an_invalid_event(big: int) -> None:
    event = ToolCallSucceeded(call_id="c1", output={"n": big}, started_at=T0, finished_at=T0)
    with pytest.raises(InvalidEvent):
        CODEC.encode(envelope(event, seq=1))


def test_unpacking_garbage_keeps_the_bytes() -> None:
    with pytest.raises(InvalidEvent) as err:
        unpack(b"\xc1")
    assert err.value.raw == b"\xc1"


class NoteV2(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    type: str = "Note"
    text: str
    lang: str


NOTES = EventCodec(
    {"Note": NoteV2},
    upcasters={("Note", 1): lambda d: {**d, "lang": "en"}},
    current_version={"Note": 2},
)


def note(v: int, data: dict[str, Any]) -> bytes:
    head = {"id": "e", "run_id": "r", "seq": 1, "type": "Note", "at": T0, "source": "s", "v": v}
    return msgpack.packb({**head, "data": data})


def test_an_old_payload_is_upgraded_by_its_upcaster() -> None:
    decoded = NOTES.decode(note(1, {"text": "hi"}))
    assert (decoded.v, decoded.data) == (2, NoteV2(text="hi", lang="en"))


@pytest.mark.parametrize("v", [3, 0])
def test_a_version_the_reader_cannot_upgrade_is_refused_keeping_the_bytes(v: int) -> None:
    raw = note(v, {"text": "hi", "lang": "en"})
    with pytest.raises(InvalidEvent) as err:
        NOTES.decode(raw)
    assert err.value.field == "v"
    assert err.value.raw == raw


@pytest.mark.parametrize("name", ["id", "run_id"])
def test_an_empty_identifier_is_refused(name: str) -> None:
    assert refused(header(**{name: ""})).field == name


def test_decoding_keeps_the_envelope_shape() -> None:
    env = CODEC.decode(CODEC.encode(envelope(RunCompleted(detail="x"), seq=9, at=12)))
    assert isinstance(env, Envelope) and env.at == 12.0 and isinstance(env.at, float)


def test_a_decoded_envelope_is_what_model_construct_makes() -> None:
    """The codec builds envelopes by hand (agentledger.schemas.codec._envelope), as model_construct does."""
    sent = envelope(RunCompleted(detail="x"), seq=9, at=12)
    env = CODEC.decode(CODEC.encode(sent))
    fields = {k: getattr(env, k) for k in Envelope.model_fields}
    made = Envelope[Any].model_construct(**fields)
    assert env == made and env.model_dump() == made.model_dump() == sent.model_dump()
    assert env.model_fields_set == made.model_fields_set
    assert env.__pydantic_extra__ is made.__pydantic_extra__ is None
    assert env.__pydantic_private__ is made.__pydantic_private__ is None
    moved = env.model_copy(update={"seq": 10})
    assert moved.seq == 10 and env.seq == 9
    assert env.model_fields_set is not CODEC.decode(CODEC.encode(sent)).model_fields_set

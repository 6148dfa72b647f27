"""Replays and grants without Redis (issue 31.4 and 31.5): a signed message is
taken once, within the replay window, and only when it names its stamp; request
ids and nonces are a publisher's own; an answer names the escalation it answers
and no other; a control's event says which publisher signed it; a replay model
plays only a run of the same tenant; a `python:` check calls only a function
declared with `@check`; a chosen run id names only a shard the deployment has."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from handlerkit import new_unit, spec
from journeys import reach
from pydantic import ValidationError
from runlog import Log, do_model_turn, text

from agentledger.events import controls
from agentledger.events.errors import ControlRefused
from agentledger.events.grants import (
    freshness_refusal,
    nonce_seen_refusal,
    replay_model_refusal,
    shard_refusal,
)
from agentledger.events.status import RunStatus
from agentledger.events.types import (
    CODEC,
    HumanReplied,
    RunAborted,
    RunCancelRequested,
    RunEscalated,
)
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.inbox import NONCE_PATTERN, RunRequested
from agentledger.schemas.inbox import HumanReplied as HumanRepliedMessage
from agentledger.schemas.inbox import RunAborted as RunAbortedMessage
from agentledger.schemas.spec import PythonCheck
from agentledger.services.adapters.inbox.publishing import stamped
from agentledger.services.adapters.publishers.nonces import MemoryNonces
from agentledger.services.adapters.tools.registry import REGISTRY
from agentledger.services.entrypoints.describe import summary
from agentledger.services.handlers.checks import run_check
from agentledger.services.handlers.spec_check import spec_problems
from agentledger.services.keys import Keys
from agentledger.services.loops.inbox_auth import Granted, check_fresh, nonce_partition
from agentledger.services.loops.inbox_parse import Rejected
from agentledger.services.loops.intake import decide_control

R = RunStatus
NOW = 1_800_000_000.0
WINDOW = 300.0
NONCE = "n0nce-0123456789abcdef"


# --- the window and the stamp -------------------------------------------------


@pytest.mark.parametrize(
    ("issued_at", "nonce", "reason"),
    [
        (None, NONCE, "replayed: the message has no issued_at"),
        (NOW, None, "replayed: the message has no nonce"),
        (None, None, "replayed: the message has no issued_at and no nonce"),
        (NOW - 512, NONCE, "replayed: issued_at is 512 s old; the window is 300 s"),
        (NOW + 400, NONCE, "replayed: issued_at is 400 s ahead of the intake's clock; the window is 300 s"),
        (float("nan"), NONCE, "replayed: issued_at is nan s old"),
    ],
)  # fmt: skip
def test_a_message_unstamped_or_issued_outside_the_window_is_refused_as_replayed(
    issued_at: float | None, nonce: str | None, reason: str
) -> None:
    refusal = freshness_refusal(issued_at, nonce, now=NOW, window_s=WINDOW)
    assert refusal is not None and refusal.startswith(reason)


@pytest.mark.parametrize("age", [0.0, 299.9, -299.9, 300.0, -300.0])
def test_a_message_issued_within_the_window_either_side_is_fresh(age: float) -> None:
    assert freshness_refusal(NOW - age, NONCE, now=NOW, window_s=WINDOW) is None


def test_a_nonce_seen_before_is_refused_saying_when() -> None:
    assert (
        nonce_seen_refusal(NONCE, NOW)
        == f"replayed: nonce {NONCE!r} was seen at 2027-01-15T08:00:00.000+00:00"
    )


def test_publish_stamps_each_message_anew_with_now_and_a_nonce_of_its_own() -> None:
    message = HumanRepliedMessage(run_id="r-1", by="dana", text="go", escalation=4)
    first, second = stamped(message), stamped(message)
    assert message.issued_at is None and message.nonce is None  # the message itself is not changed
    assert first.issued_at is not None and abs(first.issued_at - time.time()) < 5
    assert first.nonce and re.fullmatch(NONCE_PATTERN, first.nonce)
    assert first.nonce != second.nonce
    assert first.model_copy(update={"issued_at": None, "nonce": None}) == message


@pytest.mark.parametrize(
    "nonce", ["short", "x" * 129, "has space 0123456789", "slash/0123456789abc"]
)
def test_a_nonce_of_the_wrong_shape_is_refused_by_the_schema(nonce: str) -> None:
    with pytest.raises(ValidationError, match="nonce"):
        HumanRepliedMessage(run_id="r-1", by="dana", text="go", escalation=4, nonce=nonce)


@pytest.mark.parametrize("message", [HumanRepliedMessage, RunAbortedMessage])
def test_an_answer_that_names_no_escalation_is_refused_by_the_schema(message: Any) -> None:
    with pytest.raises(ValidationError, match="escalation"):
        message.model_validate({"run_id": "r-1", "by": "dana", "text": "go"})


# --- the nonce store ------------------------------------------------------------


def fresh(
    nonces: MemoryNonces, publisher: str, *, entry: str, now: float = NOW, nonce: str = NONCE
) -> str | None:
    message = stamped(HumanRepliedMessage(run_id="r-1", by="dana", text="go", escalation=4))
    message = message.model_copy(update={"issued_at": now, "nonce": nonce})
    grant: Any = None
    try:
        check_fresh(
            message,
            Granted(publisher, grant),
            nonces,
            partitions=4,
            entry=entry,
            now=now,
            window_s=WINDOW,
        )
    except Rejected as r:
        return r.reason
    return None


def test_a_nonce_is_taken_once_and_another_entry_with_it_is_refused() -> None:
    nonces = MemoryNonces()
    assert fresh(nonces, "billing-svc", entry="0/1-0") is None
    reason = fresh(nonces, "billing-svc", entry="2/7-0", now=NOW + 1)
    assert reason is not None and reason.startswith(f"replayed: nonce {NONCE!r} was seen at ")


def test_the_same_entry_handed_to_another_intake_is_not_a_replay_of_itself() -> None:
    nonces = MemoryNonces()
    assert fresh(nonces, "billing-svc", entry="0/1-0") is None
    assert fresh(nonces, "billing-svc", entry="0/1-0", now=NOW + 1) is None


def test_nonces_are_a_publishers_own_and_kept_for_twice_the_window() -> None:
    nonces = MemoryNonces()
    assert fresh(nonces, "billing-svc", entry="0/1-0") is None
    assert fresh(nonces, "ledger-svc", entry="0/2-0") is None  # another publisher's nonce
    assert fresh(nonces, "billing-svc", entry="0/3-0", now=NOW + 2 * WINDOW - 1) is not None
    # by then any message carrying it is outside the window anyway
    assert fresh(nonces, "billing-svc", entry="0/4-0", now=NOW + 2 * WINDOW + 1) is None


def test_a_nonce_is_kept_under_the_partition_its_publisher_and_nonce_hash_to() -> None:
    """Not the partition the entry came in on: the same bytes put into another
    partition find the nonce there too."""
    parts = {nonce_partition("billing-svc", f"{NONCE}{i}", 4) for i in range(40)}
    assert parts == {0, 1, 2, 3}
    assert nonce_partition("billing-svc", NONCE, 4) == nonce_partition("billing-svc", NONCE, 4)


def test_nonce_and_request_keys_are_digests_under_their_hash_tags() -> None:
    keys = Keys("al", 16, inbox_partitions=4)
    key = keys.nonce(3, "billing-svc", NONCE)
    assert key.startswith("al:{in3}:nonce:") and NONCE not in key and "billing" not in key
    a, b = keys.request("billing-svc", "order-42"), keys.request("ledger-svc", "order-42")
    assert a != b and a == keys.request("billing-svc", "order-42")
    assert re.fullmatch(r"al:\{rq[0-9a-f]{4}\}:request:[0-9a-f]{32}", a) and "order-42" not in a


# --- run ids and shards ---------------------------------------------------------


@pytest.mark.parametrize(
    ("run_id", "named", "refused"),
    [("x.s9999", 9999, True), ("x.s16", 16, True), ("x.s15", 15, False), ("x", None, False),
     ("x.s99999", None, False)],
)  # fmt: skip
def test_a_chosen_run_id_naming_a_shard_the_deployment_lacks_is_refused(
    run_id: str, named: int | None, refused: bool
) -> None:
    assert Keys.named_shard(run_id) == named
    refusal = shard_refusal(run_id, named, 16)
    if refused:
        assert refusal == f"invalid: run_id {run_id!r} names shard {named}; this deployment has 16"
    else:
        assert refusal is None


# --- the replay model -------------------------------------------------------------


def test_a_replay_model_plays_only_an_existing_run_of_the_same_tenant() -> None:
    assert replay_model_refusal("billing-svc", "shop-1", "r-old", "shop-1") is None
    other = replay_model_refusal("billing-svc", "shop-1", "r-old", "shop-2")
    missing = replay_model_refusal("billing-svc", "shop-1", "r-old", None)
    # the same words for both: whether another tenant's run of that id exists is not said
    assert (
        other
        == missing
        == (
            "not granted: 'billing-svc' may not replay run 'r-old': no run of tenant 'shop-1' has that id"
        )
    )


# --- answers name their escalation ------------------------------------------------


def escalated_twice() -> tuple[Log, int]:
    """A run the model refused twice: answered once, waiting on its second escalation."""
    log = reach(R.AWAITING_HUMAN)
    first = log.s.escalation
    assert first is not None
    log.decide(controls.reply, by="dana", text="it is allowed", escalation=first)
    do_model_turn(log, text("I still cannot"), stop="refusal")
    assert log.s.status is R.AWAITING_HUMAN
    return log, first


def test_the_state_records_the_seq_of_the_escalation_the_run_waits_on() -> None:
    log = reach(R.AWAITING_HUMAN)
    [escalated] = [e for e in log.envelopes if isinstance(e.data, RunEscalated)]
    assert log.s.escalation == escalated.seq


@pytest.mark.parametrize("answer", [controls.reply, controls.resume, controls.abort])
def test_an_answer_to_an_earlier_escalation_is_refused_naming_both(answer: Any) -> None:
    log, first = escalated_twice()
    current = log.s.escalation
    assert current is not None and current > first
    what = answer.__name__
    args: dict[str, Any] = {"text": "it is allowed"} if what == "reply" else {}
    with pytest.raises(ControlRefused) as refused:
        answer(log.s, by="dana", escalation=first, **args)
    assert refused.value.reason == (
        f"cannot {what}: it answers the escalation at seq {first}, but the run waits on the one at seq {current}"
    )
    assert log.decide(answer, by="dana", escalation=current, **args)  # the current one is taken


# --- who signed a control ----------------------------------------------------------


def test_a_controls_event_records_the_publisher_that_signed_it_and_lines_say_so() -> None:
    log = reach(R.AWAITING_HUMAN)
    message = HumanRepliedMessage(
        run_id=log.run_id, by="alice", text="go on", escalation=log.s.escalation or 0
    )
    [replied] = decide_control(log.s, message, publisher="billing-svc")
    assert replied == HumanReplied(by="alice", text="go on", publisher="billing-svc")
    assert summary(replied) == "alice via billing-svc: 'go on'"
    [aborted] = controls.abort(
        log.s, by="alice", escalation=log.s.escalation or 0, publisher="billing-svc"
    )
    assert summary(aborted) == "by alice via billing-svc"
    log.step(aborted)
    assert log.s.detail == "aborted by alice via billing-svc"
    cancel = RunCancelRequested(by="alice", source="inbox", publisher="billing-svc")
    assert summary(cancel) == "by alice via billing-svc"
    # the web view speaks as its publisher: said once
    assert summary(HumanReplied(by="bob", text="go", publisher="bob")) == "bob: 'go'"
    assert (
        summary(RunCancelRequested(by="bob", source="inbox", publisher="bob")) == "by bob via inbox"
    )


def test_a_control_event_recorded_before_publishers_were_recorded_still_decodes() -> None:
    old = {"id": "e1", "run_id": "r-1", "seq": 3, "type": "RunAborted", "at": NOW, "source": "intake",
           "data": {"type": "RunAborted", "by": "dana", "note": ""}}  # fmt: skip
    envelope: Envelope[Any] = CODEC.from_mapping(old)
    assert envelope.data == RunAborted(by="dana") and envelope.data.publisher is None
    assert summary(envelope.data) == "by dana"


# --- python: checks ------------------------------------------------------------------


def test_only_a_function_declared_with_check_is_a_check() -> None:
    import unit_tools

    assert REGISTRY.is_check(unit_tools.kv_ready)
    assert not REGISTRY.is_check(unit_tools.kv_read)  # a tool function
    assert not REGISTRY.is_check(unit_tools.not_declared)
    assert not REGISTRY.is_check(None) and not REGISTRY.is_check(unit_tools.RAN)

    def kv_ready(workspace: str | None) -> bool:  # the same name, another function
        return True

    assert not REGISTRY.is_check(kv_ready)


@pytest.mark.parametrize(
    "target", ["unit_tools:kv_read", "unit_tools:not_declared", "unit_tools:RAN"]
)
def test_a_python_check_naming_anything_but_a_declared_check_fails_uncalled(
    tmp_path: Path, target: str
) -> None:
    import unit_tools

    unit = new_unit(tmp_path / "ws")
    state = reach(R.AWAITING_HUMAN).s
    verdict = run_check(unit.app, state, PythonCheck(python=target))
    assert not verdict.passed
    assert verdict.evidence["reason"] == (
        f"{target!r} is not declared a check: only functions decorated with @check are called"
    )
    assert unit_tools.RAN["not_declared"] == 0


def test_a_python_check_declared_with_check_is_called_with_the_workspace(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    state = reach(R.AWAITING_HUMAN).s
    verdict = run_check(unit.app, state, PythonCheck(python="unit_tools:kv_ready"))
    assert verdict.passed and verdict.evidence["workspace"] == state.workspace


def test_spec_check_reports_an_undeclared_python_check_when_the_tool_set_is_in_hand(
    tmp_path: Path,
) -> None:
    from handlerkit import toolset

    run = spec(
        {"end_turn": "done"},
        acceptance=[{"python": "unit_tools:kv_read"}, {"python": "unit_tools:kv_ready"}],
    )
    problems = spec_problems(run, None, toolset=toolset())
    assert [(p.field, p.reason) for p in problems] == [(
        "acceptance.0.python",
        "'unit_tools:kv_read' is not declared a check: only functions decorated with @check are called",
    )]  # fmt: skip
    # known only by its manifest (the intake), the tool set's code is not imported: not said
    assert spec_problems(run, None, manifest=toolset().manifest()) == []


def test_a_run_request_is_stamped_as_a_control_is() -> None:
    request = stamped(RunRequested(spec=spec({"end_turn": "done"})))
    assert request.issued_at is not None and request.nonce is not None


def test_a_snapshot_keeps_the_escalation_and_publisher_and_an_older_one_is_not_read() -> None:
    """A version-2 record holds no escalation: read, the run would wait on none and
    refuse every answer; it is folded past instead (another version is never read)."""
    from agentledger.events import snapshot
    from agentledger.services.handlers.state_cache import VERSION

    s = reach(R.AWAITING_HUMAN).s
    restored = snapshot.restore(snapshot.header(s), spec=s.spec, pages=[], tail=[])
    assert restored.escalation == s.escalation is not None
    older = {k: v for k, v in snapshot.header(s).items() if k not in ("escalation", "publisher")}
    with pytest.raises(snapshot.SnapshotError, match="no upgrade from snapshot version 2"):
        snapshot.restore(older | {"v": 2}, spec=s.spec, pages=[], tail=[])
    assert VERSION == "codec4"  # 4: the turn's first model request (agentledger.events.model_retry)


def test_a_controls_span_attributes_name_its_publisher_when_one_signed_it() -> None:
    from agentledger.events.spans import _event_attributes as attributes

    def attrs(event: Any) -> dict[str, Any]:
        env: Envelope[Any] = Envelope(
            id="e1", run_id="r-1", seq=3, type=event.type, at=NOW, source="intake", data=event
        )
        return attributes(env)

    assert (
        attrs(HumanReplied(by="alice", text="go", publisher="billing-svc"))["agentledger.publisher"]
        == "billing-svc"
    )
    assert "agentledger.publisher" not in attrs(HumanReplied(by="alice", text="go"))

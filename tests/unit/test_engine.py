"""The step engine (`agentledger.services.handlers.engine`): one door, `take(run, step)`. A
step's gathering — a call's lock ask included — is done before the save loop;
a save that conflicts is planned again on the fresh state with the answers in
hand, and a composed step (`Then`) joins the step it carries on to the same
append."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import RequestModel
from agentledger.events.lock_step import LockAsk
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event
from agentledger.services.adapters.locks.port import Locks
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers.call import CallClaim
from agentledger.services.handlers.engine import Decided, Then
from agentledger.services.handlers.runs import Runs

DONE = {"end_turn": "done"}


class RefusesOnce:
    """A store whose first append conflicts (another writer got there), unwritten."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.refused = 0

    def append(self, run_id: str, *args: Any, **kwargs: Any) -> int:
        if not self.refused:
            self.refused += 1
            raise ConcurrencyConflict(run_id, kwargs["expected_seq"], kwargs["expected_seq"] + 1)
        return int(self.inner.append(run_id, *args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CountingLocks:
    """The lock table, recording each ask's request ids."""

    def __init__(self, inner: Locks):
        self.inner = inner
        self.asked: list[list[str]] = []

    def enqueue(self, asks: list[LockAsk], notify: Any) -> Any:
        self.asked.append([a.request_id for a in asks])
        return self.inner.enqueue(asks, notify)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def proposed(tmp_path: Path) -> Unit:
    """A run whose model proposed one write (a call that needs a lock)."""
    unit = new_unit(tmp_path / "ws", lock_lease_s=600.0)
    unit.create("run-a", spec({"tool_use": [call("a1", "kv_write", key="k", value="v")]}, DONE))
    unit.deliver(RequestModel("run-a"))
    unit.take()
    return unit


def test_a_call_step_whose_save_conflicts_asks_the_lock_table_once(tmp_path: Path) -> None:
    unit = proposed(tmp_path)
    store, locks = RefusesOnce(unit.store), CountingLocks(unit.app.locks)
    runs = Runs(store, unit.clock, unit.app.outbox, locks, lambda m: None)  # type: ignore[arg-type]
    app = replace(unit.app, runs=runs, locks=locks)

    taken = app.engine.take("run-a", CallClaim(app, "a1"))

    assert store.refused == 1, "the first save conflicted and the batch was planned again"
    assert locks.asked == [["run-a/a1/1.0"]], "asked once, before the save loop"
    assert [e.type for e in taken.appended] == [
        "ToolCallValidated", "ToolCallScheduled", "ToolCallStarted",
    ]  # fmt: skip
    assert unit.call_of("run-a", "a1").status.name == "STARTED"


def test_a_composed_step_joins_the_step_it_carries_on_to_the_same_append(tmp_path: Path) -> None:
    unit = proposed(tmp_path)
    before = unit.state("run-a").seq
    named: list[int] = []
    cancel = Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))

    def next_step(s: RunState) -> Decided:
        named.append(s.seq)
        return cancel

    idle = unit.app.engine.take("run-a", Then(Decided("test", lambda s: []), next_step))
    assert idle.appended == () and named == [], "a first step that decides nothing carries nothing"

    taken = unit.app.engine.take("run-a", Then(CallClaim(unit.app, "a1"), next_step))

    assert named == [before + 3], "named on the state the first step's batch leads to"
    assert taken.carried is cancel
    assert unit.appends_to("run-a")[-1] == (
        "ToolCallValidated", "ToolCallScheduled", "ToolCallStarted", "RunCancelRequested",
    )  # fmt: skip
    assert [e.source for e in taken.appended] == ["tools"] * 3 + ["intake"]


def test_nothing_to_do_on_a_held_state_is_believed_only_of_the_log(tmp_path: Path) -> None:
    unit = proposed(tmp_path)
    stale = unit.state("run-a")
    unit.app.engine.take("run-a", CallClaim(unit.app, "a1"))  # the call is claimed meanwhile
    seen: list[int] = []

    def decide(s: RunState) -> list[Event]:
        seen.append(s.seq)
        return []

    taken = unit.app.engine.take("run-a", Decided("test", decide), held=stale)

    assert seen == [stale.seq, stale.seq + 3], "decided again on the log's state"
    assert taken.appended == () and taken.state.status is RunStatus.RUNNING_TOOLS

"""The pure core performs no I/O: a state loaded from a snapshot holds its whole
past (the shell read the snapshot's pages with it), so every decision made on it
— and on the states it leads to — runs with the store unplugged."""

from __future__ import annotations

from typing import Any

import pytest
from runlog import (
    LEASE_S,
    Log,
    check,
    do_accept,
    do_cancel,
    do_claim,
    do_finish,
    do_model_turn,
    do_tools,
    do_validate,
    use,
)

from agentledger.events.context_view import assemble
from agentledger.events.dispatch import due_commands
from agentledger.events.repeat import consecutive_failures
from agentledger.events.snapshot import PAGE_TURNS
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Errored
from agentledger.events.types import ToolError
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.handlers.state_cache import StateCache, encode


class Unplugged(Exception):
    """The store was asked for something after it was unplugged."""


class Pluggable:
    """A store that answers until `unplug()`, then raises on any call."""

    def __init__(self, inner: MemoryEventStore) -> None:
        self.inner = inner
        self.plugged = True
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def called(*args: Any, **kwargs: Any) -> Any:
            if not self.plugged:
                raise Unplugged(f"store.{name} called after the load")
            self.calls.append(name)
            return attribute(*args, **kwargs)

        return called

    def unplug(self) -> None:
        self.plugged = False


def long_run(turns: int) -> Log:
    log = Log.created(max_turns=turns + 4)
    for i in range(turns):
        do_model_turn(log, use(f"c{i}", path=f"f{i}"))
        do_tools(log)
    return log


def loaded_unplugged(log: Log) -> tuple[Log, Pluggable]:
    """`log`'s run as a new process loads it from a snapshot (pages and all), the store
    unplugged right after the load; a Log that goes on from the loaded state."""
    store = MemoryEventStore()
    store.append(log.run_id, log.envelopes, expected_seq=0, live=True)
    store.save_snapshot(log.run_id, encode(log.s, pages_saved=0, with_spec=True))
    pluggable = Pluggable(store)
    state = StateCache(pluggable, snapshot_every=10**9).load(log.run_id)  # type: ignore[arg-type]
    pluggable.unplug()
    assert state == log.s
    if len(state.history) >= PAGE_TURNS:
        assert "snapshot_pages" in pluggable.calls, "restored from the snapshot, its pages read"
    going_on = Log(log.run_id)
    going_on.state, going_on.envelopes, going_on.now = state, list(log.envelopes), log.now
    return going_on, pluggable


def test_every_step_is_decided_on_a_snapshot_state_with_the_store_unplugged() -> None:
    log, _ = loaded_unplugged(long_run(PAGE_TURNS + 2))
    s = log.s
    assert len(s.history) == PAGE_TURNS + 1 and s.history.item(0).index == 1
    assert assemble(s).messages  # the context view renders every past turn
    assert consecutive_failures(s) == 0  # the repeat detector reads the past newest first
    assert on_tick(s, now=log.now + 10 * LEASE_S) == []
    assert due_commands(s, now=log.now)

    do_model_turn(log, use("again", path="f0"))  # the model's claim and reply
    do_tools(log)  # validation, the claim, the outcome
    do_model_turn(log, use("fails", path="f1"))
    do_validate(log, "fails")
    do_claim(log, "fails")
    do_finish(
        log, "fails", Errored(ToolError(code="not_found", message="no such file", retryable=False))
    )
    assert consecutive_failures(log.s) == 1
    do_model_turn(log, stop="end_turn")
    do_accept(
        log, check(True, started_at=log.now + 1), now=log.now + 1
    )  # `_fresh` reads every turn
    assert log.s.status.terminal, log.s.status


def test_a_control_is_decided_on_a_snapshot_state_with_the_store_unplugged() -> None:
    log, _ = loaded_unplugged(long_run(PAGE_TURNS + 1))
    do_cancel(log)
    assert log.s.status.terminal, log.s.status


def test_the_store_refuses_every_call_once_unplugged() -> None:
    """What makes the checks above able to fail: any store call after the load raises."""
    log, pluggable = loaded_unplugged(long_run(2))
    with pytest.raises(Unplugged, match="snapshot_pages"):
        pluggable.snapshot_pages(log.run_id, 1)

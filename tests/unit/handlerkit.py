"""The handlers in the unit tier: an `App` composed as `agentledger.services.bootstrap.build_app`
composes it, but over the in-memory adapters (store, lock table, ledger — each
passes the contract suite its Redis adapter passes), a manual clock and the
tools of `unit_tools`. No Redis, no broker.

`Unit` plays the broker: the commands a handler dispatched — queued with its
append, or sent on their own (lock grants told to the run that waited) — are
taken from the in-memory outbox and handed to their handler, and nothing else
is: commands are never re-derived from the state here, so a run the writer
forgot to dispatch is stuck, and the test says so. Every append is recorded
with the command being handled when it was made, so a test can check who wrote
into which run's log. A unit made with `carry=carrying(...)` is a worker process
that serves those pools and carries its runs on (`agentledger.services.handlers.carry`);
by default it carries nothing, so every step is a command the test delivers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import unit_tools

from agentledger.events.commands import (
    Command,
    DriveCall,
    DriveFlow,
    Pool,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    StopChild,
)
from agentledger.events.state import Call, RunState
from agentledger.events.types import RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import ModelSpec, RunSpec, ScriptedModel
from agentledger.services.adapters.broker.outbox import Outbox
from agentledger.services.adapters.ledger.memory_ledger import MemoryLedger
from agentledger.services.adapters.locks.memory_locks import MemoryLocks
from agentledger.services.adapters.models.port import ModelAdapter
from agentledger.services.adapters.models.scripted import ScriptedAdapter
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.port import EventStore, Outgoing, Snapshot
from agentledger.services.adapters.store.redacting import RedactingStore
from agentledger.services.adapters.tools.toolset import ToolSet, load_toolset
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers.app import App, Carrying
from agentledger.services.handlers.carry import (
    handle_drive_call,
    handle_request_model,
    handle_run_acceptance,
)
from agentledger.services.handlers.flow import handle_drive_flow
from agentledger.services.handlers.resolve import handle_resolve_call
from agentledger.services.handlers.runs import Runs
from agentledger.services.keys import Keys
from agentledger.services.secrets import stored_redactor
from agentledger.services.settings import Settings
from tests.contracts.clock import ManualClock
from tests.contracts.commands import decoded
from tests.contracts.envelopes import T0

QUEUE = "unit"
POLL_S = 0.005
WAIT_S = 10.0  # the longest a test waits for a call running in a thread to get somewhere
_TOOLSET: list[ToolSet] = []


def toolset() -> ToolSet:
    """The worker's tool set: `unit_tools` and the built-in tools (loaded once)."""
    if not _TOOLSET:
        _TOOLSET.append(load_toolset(["unit_tools"], [str(Path(unit_tools.__file__).parent)]))
    return _TOOLSET[0]


def new_unit(workspace: Path, **options: Any) -> Unit:
    """A fresh app over empty adapters; the tools' counts and gates start afresh."""
    unit_tools.RAN.clear()
    unit_tools.COMMITTED.clear()
    unit_tools.STALL.clear()
    for g in unit_tools.GATES.values():
        g.set()  # a call a failed test left at its gate goes on and ends
    unit_tools.GATES.clear()
    workspace.mkdir(parents=True, exist_ok=True)
    return Unit(workspace, **options)


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": args}


def spec(
    *turns: dict[str, Any],
    acceptance: Sequence[dict[str, Any]] = (),
    **budgets: Any,
) -> RunSpec:
    """A run of the scripted model playing `turns`, with the unit tools."""
    return RunSpec.model_validate(
        {
            "task": "a handler unit test",
            "tools": ["unit_tools"],
            "tool_path": [str(Path(unit_tools.__file__).parent)],
            "principal": {"id": "unit", "tenant": "unit-tenant"},
            "budgets": {"max_turns": 8, **budgets},
            "model": {"scripted": list(turns)},
            "acceptance": list(acceptance),
        }
    )


@dataclass(frozen=True)
class Append:
    """One append that landed: the run written, its events' types, the commands
    queued with it, and the command whose handler made it (None: the intake, the
    sweeper or the test itself)."""

    run_id: str
    types: tuple[str, ...]
    queued: tuple[Command, ...]
    by: Command | None


class RecordingStore:
    """The store as the app sees it, recording every append that lands (and
    counting those refused with a ConcurrencyConflict)."""

    def __init__(self, inner: EventStore, doing: threading.local):
        self._inner = inner
        self._doing = doing
        self.appends: list[Append] = []
        self.conflicts = 0  # appends refused: the log had moved on
        self._lock = threading.Lock()

    def append(
        self,
        run_id: str,
        events: Sequence[Envelope[Any]],
        *,
        expected_seq: int,
        live: bool,
        messages: Sequence[Outgoing] = (),
        expected_id: str = "",
        snapshot: Snapshot | None = None,
    ) -> int:
        try:
            seq = self._inner.append(
                run_id, events, expected_seq=expected_seq, live=live, messages=messages,
                expected_id=expected_id, snapshot=snapshot,
            )  # fmt: skip
        except ConcurrencyConflict:
            with self._lock:
                self.conflicts += 1
            raise
        by = getattr(self._doing, "command", None)
        with self._lock:
            self.appends.append(
                Append(run_id, tuple(e.type for e in events), tuple(decoded(messages)), by)
            )
        return seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def scripted(model: ModelSpec) -> ModelAdapter:
    assert isinstance(model, ScriptedModel), "the unit tier runs the scripted model only"
    return ScriptedAdapter(model, sleep=False)


@dataclass
class Running:
    """A command being handled in a thread of its own (its tool may be held at a gate)."""

    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)

    def join(self) -> None:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the handler did not finish"
        if self.errors:
            raise self.errors[0]


def carrying(
    *, pools: frozenset[Pool] = frozenset(Pool), queue: str = QUEUE, for_s: float = 60.0
) -> Carrying:
    """What a worker process serving `pools` of `queue` carries on (`handlers.carry`)."""
    return Carrying(queue, pools, for_s=for_s)


class Unit:
    def __init__(
        self,
        workspace: Path,
        *,
        lock_lease_s: float = 30.0,
        start: float = T0,
        carry: Carrying | None = None,
        limits: tuple[tuple[str, int], ...] = (),
    ):
        self.clock = ManualClock(start)
        self.workspace = workspace
        self.memory = MemoryEventStore()
        self._doing = threading.local()
        self.store = RecordingStore(RedactingStore(self.memory, stored_redactor), self._doing)
        self.sent: list[Command] = []  # what was sent on its own, not with an append
        settings = Settings(
            prefix="unit",
            shards=1,
            lock_lease_s=lock_lease_s,
            sandbox="off",
            limits=limits,
            snapshot_dir=str(workspace.parent / "snapshots"),  # never the user's state folder
        )
        outbox = Outbox(Keys(settings.prefix, settings.shards))
        locks = MemoryLocks(
            self.clock, lease_s=settings.lock_lease_s, partitions=settings.lock_partitions or 1
        )
        self.app = App(
            settings=settings,
            runs=Runs(self.store, self.clock, outbox, locks, self._send),
            clock=self.clock,
            toolset=toolset(),
            model_for=scripted,
            worker="unit:1",
            locks=locks,
            ledger=MemoryLedger(self.clock, keep_s=settings.ledger_keep_s),
            outbox=outbox,
            send=self._send,
            carrying=carry,
            resend=self._resend,
        )

    def _send(self, messages: Sequence[Outgoing]) -> None:
        self.sent += decoded(messages)
        for m in messages:
            self.memory.outbox.put(m)

    def _resend(self, messages: Sequence[Outgoing]) -> None:
        self.sent += decoded(self.memory.outbox.resend(messages))

    # --- runs -------------------------------------------------------------------------

    def create(self, run_id: str, run_spec: RunSpec) -> str:
        """Append the run's first event as the intake does (its first command is queued)."""
        created = RunCreated(
            spec=run_spec,
            request_id=run_id,
            workspace=str(self.workspace),
            base_dir=str(self.workspace.parent),
            queue=QUEUE,
            toolset=self.app.toolset.fingerprint,
        )
        self.app.runs.create(created, run_id, source="intake", causation_id=None)
        return run_id

    def state(self, run_id: str) -> RunState:
        state = self.app.runs.load(run_id)
        assert state is not None, f"no run {run_id!r}"
        return state

    def call_of(self, run_id: str, call_id: str) -> Call:
        found = self.state(run_id).call(call_id)
        assert found is not None, f"no call {call_id!r} in run {run_id!r}'s turn"
        return found

    def types(self, run_id: str) -> list[str]:
        return [e.type for e in self.memory.read(run_id)]

    def appends_to(self, run_id: str) -> list[tuple[str, ...]]:
        """The event types of each append to the run, in order."""
        return [a.types for a in self.store.appends if a.run_id == run_id]

    def foreign_appends(self) -> list[Append]:
        """Appends a handler made into the log of a run other than its command's."""
        return [a for a in self.store.appends if a.by is not None and a.by.run_id != a.run_id]

    # --- the broker -------------------------------------------------------------------

    def take(self) -> list[Command]:
        """Every command dispatched since the last take, oldest first."""
        return decoded(self.memory.outbox.take())

    def deliver(self, command: Command) -> None:
        self._doing.command = command
        try:
            match command:
                case RequestModel(run_id):
                    handle_request_model(self.app, run_id)
                case DriveCall(run_id, call_id):
                    handle_drive_call(self.app, run_id, call_id)
                case ResolveCall(run_id, call_id):
                    handle_resolve_call(self.app, run_id, call_id)
                case DriveFlow(run_id) | StopChild(run_id):
                    handle_drive_flow(self.app, run_id)
                case RunAcceptance(run_id):
                    handle_run_acceptance(self.app, run_id)
        finally:
            self._doing.command = None

    def start(self, command: Command) -> Running:
        """Deliver in a thread of its own; `join` re-raises what it raised."""
        running = Running(threading.Thread(target=lambda: None))

        def guarded() -> None:
            try:
                self.deliver(command)
            except BaseException as exc:  # handed to the test thread by `join`
                running.errors.append(exc)

        running.thread = threading.Thread(target=guarded, daemon=True)
        running.thread.start()
        return running

    def drive(
        self,
        *,
        until: Callable[[Unit], bool] = lambda u: False,
        rounds: int = 60,
    ) -> list[Command]:
        """Deliver what was dispatched, and what that dispatches, until `until` holds
        or nothing is left; return every command delivered, in order."""
        delivered: list[Command] = []
        for _ in range(rounds):
            if until(self):
                return delivered
            commands = self.take()
            if not commands:
                return delivered
            for command in commands:
                self.deliver(command)
                delivered.append(command)
        raise AssertionError(f"still dispatching after {rounds} rounds: {delivered[-5:]}")

    def wait_for(self, what: Callable[[], bool], *, why: str) -> None:
        """Poll (a call runs in another thread) until `what` holds, or fail."""
        give_up = time.monotonic() + WAIT_S
        while not what():
            assert time.monotonic() < give_up, f"gave up waiting: {why}"
            time.sleep(POLL_S)

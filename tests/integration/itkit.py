"""Helpers of the integration tests: a tool module that counts its executions
at the tool's side, run specs for the scripted model, a synchronous driver that
plays the pools by calling the handlers directly with whatever is due (no
broker), and store wrappers that force optimistic conflicts or mirror a run's
log into memory."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis

from agentledger.events.commands import Command, DriveCall, RequestModel, ResolveCall, RunAcceptance
from agentledger.events.dispatch import due_commands
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.port import EventStore, Outgoing, Snapshot
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import (
    handle_drive_call,
    handle_request_model,
    handle_run_acceptance,
)
from agentledger.services.handlers.resolve import handle_resolve_call
from agentledger.services.handlers.runs import Runs
from agentledger.services.keys import Keys, keys_for
from tests.contracts.commands import decoded

TOOL_MODULE = "it_counting_tools"
EXECUTIONS = "executions.log"

TOOL_SOURCE = '''"""Tools of the integration tests. Each appends one line to executions.log in
the run's workspace before doing anything else: executions are counted here,
at the tool's side, not from the event log."""

import os
import time
import uuid
from pathlib import Path

from agentledger import ToolContext, tool


def _count(ctx: ToolContext, name: str) -> None:
    with open(Path(ctx.workspace, "executions.log"), "a") as f:
        f.write(f"{ctx.call_id} {name} {os.getpid()}\\n")


@tool(read_only=True, reads=lambda a: [f"kv:{a['key']}"])
def it_read(key: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Read a key."""
    _count(ctx, "it_read")
    time.sleep(delay_s)
    return {"key": key, "value": "v"}


@tool(writes=lambda a: [f"kv:{a['key']}"])
def it_write(key: str, value: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Write a key."""
    _count(ctx, "it_write")
    time.sleep(delay_s)
    return {"key": key, "written": value}


@tool(writes=lambda a: [f"kv:{a['key']}"], timeout_s=0.5)
def it_write_soon(key: str, value: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Write a key, within half a second (a claim that runs out within an outage)."""
    _count(ctx, "it_write_soon")
    time.sleep(delay_s)
    return {"key": key, "written": value}


@tool(writes=lambda a: [f"kv:{a['key']}", f"kv:{a['other']}"])
def it_write_two(key: str, other: str, value: str, ctx: ToolContext) -> dict:
    """Write two keys at once."""
    _count(ctx, "it_write_two")
    return {"keys": [key, other], "written": value}


@tool(writes=lambda a: [f"kv:{a['key']}"], timeout_s=0.3)
def it_stuck_write(key: str, ctx: ToolContext) -> dict:
    """A write that never answers within its timeout."""
    _count(ctx, "it_stuck_write")
    ctx.cancelled.wait(10)
    return {"key": key}
'''


def write_tool_module(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{TOOL_MODULE}.py"
    path.write_text(TOOL_SOURCE)
    return path


PUBLISHER = "it-publisher"


def file_publisher(
    path: Path,
    name: str = PUBLISHER,
    *,
    principals: Sequence[str] = ("*@*",),
    scopes: Sequence[str] = ("*",),
    queues: Sequence[str] = ("*",),
    workspaces: Sequence[str] = ("/",),
) -> str:
    """File a publisher in the publishers file at `path` (granted everything by
    default, workspaces anywhere but the state folder); returns its key."""
    from agentledger.schemas.publishers import GrantedPrincipal
    from agentledger.services.adapters.publishers import publishers_file

    granted = [GrantedPrincipal(id=p.split("@")[0], tenant=p.split("@")[1]) for p in principals]
    return publishers_file.add(
        str(path), name, principals=granted, scopes=scopes, queues=queues, workspaces=workspaces
    )


def signed(fields: dict[str, Any], signer: Any) -> dict[str, Any]:
    """An inbox entry's fields with its publisher and signature added (over its
    `message`, whatever that holds)."""
    from agentledger.schemas.signature import sign

    raw = fields.get("message")
    if raw is None:
        return {**fields, "publisher": signer.name}
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    return {**fields, "publisher": signer.name, "signature": sign(signer.key, data)}


def delete_prefix(client: redis.Redis, prefix: str) -> int:
    """Delete every key under `prefix:` (SCAN + DEL; never FLUSH a shared server)."""
    found = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for i in range(0, len(found), 500):
        client.delete(*found[i : i + 500])
    return len(found)


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": args}


def scripted_spec(
    turns: Sequence[dict[str, Any]],
    *,
    tools_dir: Path,
    acceptance: Sequence[dict[str, Any]] = (),
    max_turns: int = 8,
) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "integration test run",
            "tools": [TOOL_MODULE],
            "tool_path": [str(tools_dir)],
            "principal": {"id": "it", "tenant": "it-tenant"},
            "budgets": {"max_turns": max_turns},
            "model": {"scripted": list(turns)},
            "acceptance": list(acceptance),
        }
    )


QUEUE = "it"


def create_run(app: App, client: redis.Redis, run_id: str, spec: RunSpec, workspace: Path) -> str:
    """Append the run's first event as the intake does, bound to the app's tool set."""
    created = RunCreated(
        spec=spec,
        request_id=run_id,
        workspace=str(workspace),
        base_dir=str(workspace.parent),
        queue=QUEUE,
        toolset=app.toolset.fingerprint,
    )
    app.runs.create(created, run_id, source="intake", causation_id=None)
    return run_id


def keys_of(app: App) -> Keys:
    return keys_for(app.settings)


def with_store(app: App, store: EventStore) -> App:
    """The app over another store (a wrapper of the real one), with its own cache."""
    runs = Runs(store, app.clock, app.outbox, app.locks, app.send)
    return replace(app, runs=runs)


def dispatch(app: App, command: Command) -> None:
    match command:
        case RequestModel(run_id):
            handle_request_model(app, run_id)
        case DriveCall(run_id, call_id):
            handle_drive_call(app, run_id, call_id)
        case ResolveCall(run_id, call_id):
            handle_resolve_call(app, run_id, call_id)
        case RunAcceptance(run_id):
            handle_run_acceptance(app, run_id)


def load(app: App, run_id: str) -> RunState:
    state = app.runs.load(run_id)
    assert state is not None, f"no run {run_id!r}"
    return state


def drive(
    app: App,
    run_id: str,
    *,
    until: Callable[[RunState], bool] = lambda s: not s.status.live,
    rounds: int = 60,
) -> RunState:
    """Play the pools: hand every due command to its handler until `until` holds."""
    for _ in range(rounds):
        state = load(app, run_id)
        if until(state):
            return state
        commands = due_commands(state, now=app.clock.now(), redrive=True)
        waited = 0.0
        while not commands and waited < 2.0:  # e.g. a lookup waits for a claim's deadline
            time.sleep(0.1)
            waited += 0.1
            commands = due_commands(state, now=app.clock.now(), redrive=True)
        assert commands, f"run {run_id!r} is stuck in {state.status} with nothing due"
        for command in commands:
            dispatch(app, command)
    raise AssertionError(f"run {run_id!r} did not get there in {rounds} rounds")


def proposed(s: RunState) -> bool:
    """The model proposed the turn's calls and nobody has looked at them yet."""
    return s.status is RunStatus.VALIDATING


def executions(workspace: Path) -> Counter[str]:
    """How many times each call id ran, as the tools themselves recorded it."""
    log = workspace / EXECUTIONS
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines() if line)


def event_types(store: EventStore, run_id: str) -> list[str]:
    return [e.type for e in store.read(run_id)]


class OffsetClock:
    """The system clock moved `offset_s` into the future: a lease that has run out."""

    def __init__(self, offset_s: float):
        self.offset_s = offset_s

    def now(self) -> float:
        return time.time() + self.offset_s


Batch = Sequence[Envelope[Any]]


class WrappedStore:
    """A real store with a say around each append: `before` sees the batch first,
    `landed` once it is written (it may still raise), `conflicted` when it was
    refused; every other method is the inner store's."""

    def __init__(self, inner: EventStore):
        self._inner = inner

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
        self.before(events)
        try:
            seq = self._inner.append(
                run_id, events, expected_seq=expected_seq, live=live, messages=messages,
                expected_id=expected_id, snapshot=snapshot,
            )  # fmt: skip
        except ConcurrencyConflict:
            self.conflicted()
            raise
        self.landed(run_id, events, expected_seq=expected_seq, live=live, seq=seq)
        return seq

    def before(self, events: Batch) -> None:
        pass

    def landed(
        self, run_id: str, events: Batch, *, expected_seq: int, live: bool, seq: int
    ) -> None:
        pass

    def conflicted(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Race:
    """Barriers shared by racing workers: each worker's first append holding a gated
    event type waits until every racer has reached its own, so all of them have
    folded the same seq and all but one hit a ConcurrencyConflict. Counts them."""

    def __init__(self, gates: dict[str, int]):
        self.gates = {kind: threading.Barrier(n) for kind, n in gates.items()}
        self.passed = threading.local()
        self._lock = threading.Lock()
        self.conflicts = 0

    def conflicted(self) -> None:
        with self._lock:
            self.conflicts += 1


class RacingStore(WrappedStore):
    """One racing worker's store: its appends wait at the race's barriers. Give each
    worker its own (`with_store`), as separate processes would have: a worker's cache
    hands its other threads the state it is appending, so threads of one worker do
    not fold the same seq."""

    def __init__(self, inner: EventStore, race: Race):
        super().__init__(inner)
        self.race = race

    def before(self, events: Batch) -> None:
        passed: set[str] = self.race.passed.__dict__.setdefault("kinds", set())
        kinds = {e.type for e in events} & set(self.race.gates)
        for kind in sorted(kinds - passed):
            passed.add(kind)
            self.race.gates[kind].wait(timeout=25)  # a busy machine: the racers join within 30 s

    def conflicted(self) -> None:
        self.race.conflicted()


def racing_workers(app: App, race: Race, n: int = 2) -> list[App]:
    """`n` workers over the same store, each with its own cache, racing as `race` says."""
    return [with_store(app, RacingStore(app.store, race)) for _ in range(n)]


class ReplyLostStore(WrappedStore):
    """A store whose first append holding an event of type `kind` lands, then raises
    a ConnectionError as if Redis had gone down before replying."""

    def __init__(self, inner: EventStore, kind: str):
        super().__init__(inner)
        self._kind = kind
        self.lost: list[int] = []  # the seq each lost reply would have said

    def landed(
        self, run_id: str, events: Batch, *, expected_seq: int, live: bool, seq: int
    ) -> None:
        if not self.lost and any(e.type == self._kind for e in events):
            self.lost.append(seq)
            raise redis.ConnectionError("Connection closed by server.")


class MirroredStore(WrappedStore):
    """Appends to the real store and, once that landed, the same batch to memory."""

    def __init__(self, inner: EventStore):
        super().__init__(inner)
        self.memory = MemoryEventStore()

    def landed(
        self, run_id: str, events: Batch, *, expected_seq: int, live: bool, seq: int
    ) -> None:
        self.memory.append(run_id, events, expected_seq=expected_seq, live=live)


def in_threads(*targets: Callable[[], None]) -> None:
    """Run the targets at once; re-raise the first error any of them hit."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # handed to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a racer did not finish"
    if errors:
        raise errors[0]


def capturing(app: App, clock: Any = None) -> tuple[App, list[Command]]:
    """The app with what it sends on its own (not with an append) captured as commands,
    and, if given, another clock."""
    sent: list[Command] = []

    def send(messages: Sequence[Outgoing]) -> None:
        sent.extend(decoded(messages))
        app.send(messages)

    clock = clock or app.clock
    runs = Runs(app.store, clock, app.outbox, app.locks, send)
    return replace(app, runs=runs, clock=clock, send=send, resend=None), sent  # re-drives too


def claim_without_running(app: App, run_id: str, call_id: str, *, worker: str) -> RunState:
    """What a worker that dies right after its claim leaves behind: the turn validated,
    its locks asked for, the call claimed — and nothing run."""
    from agentledger.services.handlers.call import CallClaim

    return app.engine.take(run_id, CallClaim(replace(app, worker=worker), call_id)).state


def queued(app: App, client: redis.Redis, run_id: str) -> list[Command]:
    """The commands waiting in the run's task-queue streams (queued with appends or
    sent on their own), taken out of them."""
    from agentledger.events.commands import Pool

    state = load(app, run_id)
    found: list[Command] = []
    for pool in Pool:
        stream = app.outbox.stream(state, pool)
        entries = client.xrange(stream)
        found += decoded([Outgoing(stream, fields[b"m"]) for _, fields in entries])
        if entries:
            client.xdel(stream, *[entry_id for entry_id, _ in entries])
    return found

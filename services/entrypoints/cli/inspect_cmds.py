"""Read-only commands: status, runs, tail, replay. What they print is redacted
(`services.entrypoints.cli.redacted`); `agentledger raw` is the one way to the stored bytes."""

from __future__ import annotations

import json
import sys
from typing import Any

from events.errors import CoreError
from events.fold import apply
from events.state import RunState
from events.types import CODEC
from schemas.errors import InvalidEvent
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.session import Session
from services.secrets import redactor_for


def run_summary(state: RunState) -> dict[str, Any]:
    calls = [c for t in state.turns for c in t.calls]
    return {
        "run_id": state.run_id,
        "status": str(state.status),
        "detail": state.detail,
        "turns": state.turns_used,
        "usage": state.usage.model_dump(),
        "tool_calls": [
            {"call_id": c.call_id, "name": c.name, "status": str(c.status)} for c in calls
        ],
    }


def status(session: Session, run_id: str, *, as_json: bool) -> int:
    state = session.load(run_id)
    if state is None:
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    summary = redactor_for(state.spec).value(run_summary(state))
    if as_json:
        print(json.dumps(summary))
    else:
        print(f"run {state.run_id}: {state.status}  (seq {state.seq}, {state.turns_used} turns)")
        if summary["detail"]:
            print(f"  {summary['detail']}")
        for call in summary["tool_calls"]:
            print(f"  {call['call_id']:<12} {call['name']:<24} {call['status']}")
    return exit_codes.for_status(state.status)


def runs(session: Session, *, limit: int) -> int:
    for entry in session.store.runs(limit=limit):
        state = session.load(entry.run_id)
        status = state.status if state else "?"
        task = redactor_for(state.spec).text(state.spec.task) if state else ""
        print(f"{entry.run_id}  {status!s:<17} {task[:60]!r}")
    return 0


def tail(session: Session, *, run_id: str | None, follow: bool, as_json: bool) -> int:
    redactors = RunRedactors(session.store)

    def show(env: Any) -> None:
        text = env.model_dump_json() if as_json else line(env, with_run=run_id is None)
        print(redactors.text(env, text), flush=True)

    if run_id is not None:
        return _tail_run(session, run_id, follow, show)
    streams = {session.keys.feed(s): "0-0" for s in range(session.keys.shards)}
    block = 1000 if follow else None
    while True:
        reply = session.client.xread(streams, count=500, block=block)
        if not reply:
            if not follow:
                return 0
            continue
        for stream, entries in reply:
            for entry_id, fields in entries:
                streams[stream.decode()] = entry_id.decode()
                run, seq = fields[b"run"].decode(), int(fields[b"seq"])
                for env in session.store.read(run, after_seq=seq - 1)[:1]:
                    show(env)


def _tail_run(session: Session, run_id: str, follow: bool, show: Any) -> int:
    seq = 0
    key = session.keys.run(run_id)
    if not session.client.exists(key):
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    while True:
        for env in session.store.read(run_id, after_seq=seq):
            show(env)
            seq = env.seq
        if not follow:
            return 0
        session.client.xread({key: f"0-{seq}"}, block=1000)


def replay(session: Session, run_id: str) -> int:
    """Re-fold the raw log entry by entry: seq continuity, decoding, legality."""
    entries = session.client.xrange(session.keys.run(run_id))
    if not entries:
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    state: RunState | None = None
    for entry_id, fields in entries:
        try:
            env = CODEC.decode(fields.get(b"e", b""))
            if entry_id.decode() != f"0-{env.seq}":
                raise InvalidEvent(
                    f"stream entry {entry_id.decode()} holds seq {env.seq}", field="seq"
                )
            state = apply(state, env)
        except (InvalidEvent, CoreError) as exc:
            print(f"BROKEN at entry {entry_id.decode()}: {exc}")
            return 1
        print(line(env))
    assert state is not None
    print(f"log ok: {state.seq} events, no gaps, every transition legal; status {state.status}")
    return 0

"""Time travel (issue 39): `diff RUN CALL` (what a write changed, as a unified diff),
`status RUN --files` (the files each write call changed, and the acceptance checks
with the workspace each judged) and `checkout RUN --turn N DIR` (the workspace as it
was before turn N; `--call check-A.I`: as a check judged it), all read
from the snapshots the executor recorded and the operator's snapshot store; and `gc`,
which collects the snapshots no kept run refers to."""

from __future__ import annotations

import math
import time
from typing import Any

from agentledger.events.time_travel import Written, before_turn, snapshots_kept, written
from agentledger.events.workspace_tree import (
    MAX_DIFF_BYTES,
    Change,
    Tree,
    changes,
    printable,
    unified,
)
from agentledger.services.adapters.snapshots.checkout import CheckoutRefused, write_tree
from agentledger.services.adapters.snapshots.collect import collect
from agentledger.services.adapters.snapshots.store import SnapshotMissing, SnapshotStore
from agentledger.services.adapters.snapshots.taker import snapshot_store
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.session import Session


class _Refused(Exception):
    def __init__(self, code: int, kind: str, message: str):
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


def _load(session: Session, run_id: str) -> tuple[SnapshotStore, list[Written]]:
    envs = session.store.read(run_id)
    if not envs:
        raise _Refused(exit_codes.USAGE, "no run", f"no run {run_id!r}")
    store = snapshot_store(session.settings)
    if store is None:
        raise _Refused(exit_codes.USAGE, "snapshots off", "AGENTLEDGER_SNAPSHOT_DIR is off")
    return store, written(env.data for env in envs)


def _call(calls: list[Written], run_id: str, call_id: str) -> Written:
    for w in calls:
        if w.call_id == call_id:
            return w
    raise _Refused(
        exit_codes.USAGE, "no snapshots",
        f"call {call_id!r} of run {run_id!r} recorded no workspace snapshots "
        "(not a write of workspace files, or it ran before snapshots were taken)",
    )  # fmt: skip


def _changed(store: SnapshotStore, w: Written) -> list[Change]:
    return changes(store.tree(w.snapshots.before), store.tree(w.snapshots.after))


def diff(session: Session, run_id: str, call_id: str, *, as_json: bool) -> int:
    """The unified diff of what one write call changed in its run's workspace."""
    try:
        store, calls = _load(session, run_id)
        w = _call(calls, run_id, call_id)
        texts = [(c, unified(c, _content(store, c, "before"), _content(store, c, "after")))
                 for c in _changed(store, w)]  # fmt: skip
    except _Refused as r:
        return fail(r.code, r.kind, r.message, as_json)
    except SnapshotMissing as e:
        return fail(exit_codes.CHECK_FAILED, "snapshot missing", str(e), as_json)
    if as_json:
        emit({**_head(run_id, w), "changes": [
            {"path": printable(c.path), "change": c.kind, "diff": t} for c, t in texts
        ]})  # fmt: skip
    else:
        print("".join(t for _, t in texts), end="")
        if not texts:
            say(f"call {call_id!r} changed no file of the workspace")
    if w.snapshots.note:
        say(f"left out of its snapshots: {w.snapshots.note}")
    return 0


def _content(store: SnapshotStore, c: Change, side: str) -> bytes | None:
    entry = c.before if side == "before" else c.after
    if entry is None or entry.kind != "file" or entry.digest is None:
        return None
    if entry.size is not None and entry.size > MAX_DIFF_BYTES:
        return None  # described by its size, never read whole
    return store.blob(entry.digest)


def _head(run_id: str, w: Written) -> dict[str, Any]:
    head = {
        "run_id": run_id, "call_id": w.call_id, "turn": w.turn, "name": w.name,
        "before": w.snapshots.before, "after": w.snapshots.after, "note": w.snapshots.note,
    }  # fmt: skip
    return head if w.passed is None else {**head, "check": True, "passed": w.passed}


MARK = {"added": "A", "removed": "D", "modified": "M"}


def files(session: Session, run_id: str, *, as_json: bool) -> int:
    """The files each snapshotted write call of a run changed, in call order."""
    try:
        store, calls = _load(session, run_id)
        rows = [(w, _changed(store, w)) for w in calls]
    except _Refused as r:
        return fail(r.code, r.kind, r.message, as_json)
    except SnapshotMissing as e:
        return fail(exit_codes.CHECK_FAILED, "snapshot missing", str(e), as_json)
    if as_json:
        emit({"run_id": run_id, "calls": [
            {**_head(run_id, w), "files": [{"path": printable(c.path), "change": c.kind} for c in cs]}
            for w, cs in rows
        ]})  # fmt: skip
        return 0
    if not rows:
        say(f"run {run_id!r} recorded no workspace snapshots")
    for w, cs in rows:
        verdict = "" if w.passed is None else " (passed)" if w.passed else " (failed)"
        print(f"turn {w.turn}  {w.call_id:<12} {w.name}{verdict}")
        for c in cs:
            print(f"  {MARK[c.kind]} {printable(c.path)}")
    return 0


def checkout(
    session: Session, run_id: str, *, turn: int | None, call: str | None, folder: str,
    as_json: bool,
) -> int:  # fmt: skip
    """Write the workspace as it was before `turn` (or before `call` ran: for a check,
    the workspace it judged) into `folder` (absent or empty)."""
    try:
        store, calls = _load(session, run_id)
        tree_id = _call(calls, run_id, call).snapshots.before if call else None
        if call is None and (tree_id := before_turn(calls, turn or 1)) is None:
            raise _Refused(
                exit_codes.USAGE, "no snapshots", f"run {run_id!r} recorded no workspace snapshots"
            )
        assert tree_id is not None
        tree: Tree = store.tree(tree_id)
        left_out = write_tree(store, tree, folder)
    except _Refused as r:
        return fail(r.code, r.kind, r.message, as_json)
    except CheckoutRefused as e:
        return fail(exit_codes.USAGE, "checkout refused", str(e), as_json)
    except SnapshotMissing as e:
        return fail(exit_codes.CHECK_FAILED, "snapshot missing", str(e), as_json)
    kept = len(tree.entries) - len(left_out)
    if as_json:
        emit({"run_id": run_id, "turn": turn, "call": call, "snapshot": tree_id, "folder": folder,
              "written": kept, "left_out": [printable(p) for p in left_out]})  # fmt: skip
    else:
        when = f"before turn {turn}" if call is None else f"before {call}"
        print(
            f"{folder}: the workspace of run {run_id} {when} ({kept} entries, snapshot {tree_id})"
        )
    for p in left_out:
        say(f"not restored (left out of the snapshot): {printable(p)}")
    return 0


def gc(session: Session, *, dry_run: bool, as_json: bool) -> int:
    """Remove the snapshot trees and blobs no kept run refers to; say what was freed."""
    store = snapshot_store(session.settings)
    if store is None:
        return fail(exit_codes.USAGE, "snapshots off", "AGENTLEDGER_SNAPSHOT_DIR is off", as_json)
    referenced, runs = _referenced(session)
    freed = collect(store, referenced, dry_run=dry_run)
    if as_json:
        emit({"runs": runs, "dry_run": dry_run, "freed_trees": freed.trees,
              "freed_blobs": freed.blobs, "freed_bytes": freed.bytes,
              "kept_trees": freed.kept_trees, "kept_blobs": freed.kept_blobs})  # fmt: skip
    else:
        verb = "would free" if dry_run else "freed"
        print(
            f"{verb} {freed.trees} snapshots and {freed.blobs} blobs ({freed.bytes:,} bytes); "
            f"kept {freed.kept_trees} snapshots and {freed.kept_blobs} blobs of {runs} runs"
        )
    return 0


def _referenced(session: Session) -> tuple[set[str], int]:
    """The snapshot ids of the runs whose snapshots are kept, and how many runs there are
    (in Redis and in the archive)."""
    keep_s, now = session.settings.snapshot_keep_s, time.time()
    cursor: tuple[float, str] = (math.inf, "")
    referenced: set[str] = set()
    runs, done = 0, False
    while not done:
        batch, done = session.reader.runs_before(cursor, -math.inf, 200)
        done = done or not batch
        for cursor in batch:
            runs += 1
            state = session.load(cursor[1])
            if state is not None and not snapshots_kept(
                over=state.over, ended_at=state.updated_at, now=now, keep_s=keep_s
            ):
                continue
            for w in written(env.data for env in session.store.read(cursor[1])):
                referenced.update((w.snapshots.before, w.snapshots.after))
    return referenced, runs

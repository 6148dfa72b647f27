"""`whatif RUN --turn N --spec CHANGES` (issue 39): RUN's branch from turn N with
CHANGES, played with RUN's recorded model replies while they still apply
(`branch_cmds`, `agentledger.events.whatif`), then the two side by side: the first
divergence, the calls that differ (and how), the writes that changed files
differently, the acceptance checks that flip, and the files that end up different
(the last snapshot of each). Exit 0 when nothing differs, 1 when something does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentledger.events.time_travel import Written, before_turn, written
from agentledger.events.whatif import Differs, Files, compare, flipped, steps
from agentledger.events.workspace_tree import Change, changes, printable
from agentledger.services.adapters.snapshots.store import SnapshotMissing, SnapshotStore
from agentledger.services.adapters.snapshots.taker import snapshot_store
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.branch_cmds import Branched, Refused, start_branch
from agentledger.services.entrypoints.reply import emit, fail
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session

MARK = {"added": "A", "removed": "D", "modified": "M"}


def whatif(
    session: Session, run_id: str, *, turn: int, changes_path: str, as_: str | None,
    as_json: bool,
) -> int:  # fmt: skip
    try:
        done = start_branch(session, run_id, turn=turn, changes=changes_path, as_=as_, replay=True)
        report = _report(session, done, turn)
    except Refused as r:
        return fail(r.code, r.kind, r.message, as_json)
    except SnapshotMissing as e:
        return fail(exit_codes.CHECK_FAILED, "snapshot missing", str(e), as_json)
    redact = redactor_for(done.created.spec)
    if as_json:
        emit(redact.value(report))
    else:
        print(redact.text(_text(report)))
    return exit_codes.CHECK_FAILED if report["differs"] else 0


def _report(session: Session, done: Branched, turn: int) -> dict[str, Any]:
    store = snapshot_store(session.settings)
    origin = [e.data for e in done.origin]
    branch = [e.data for e in session.store.read(done.run_id)]
    mine, theirs = written(origin), written(branch)
    files = (_files(store, mine), _files(store, theirs))
    a, b = steps(origin), steps(branch)
    calls = compare(a, b, files, since_turn=turn)
    checks = flipped(a, b)
    start = before_turn(mine, turn)
    ended = _ended(store, _last(mine), _last(theirs) or start)
    return {
        "origin": done.origin_id,
        "branch": done.run_id,
        "turn": turn,
        "changed": list(done.changed),
        "status": str(done.state.status),
        "detail": done.state.detail,
        "differs": bool(calls or checks or ended),
        "first_divergence": _differs(calls[0]) if calls else None,
        "calls": [_differs(d) for d in calls],
        "writes": [
            {"call_id": d.key, "turn": d.turn, "files": [printable(p) for p in d.files]}
            for d in calls
            if d.files
        ],
        "checks": [
            {"check_id": k, "check": what, "origin": left, "branch": right}
            for k, what, left, right in checks
        ],
        "files": [{"path": printable(c.path), "change": c.kind} for c in ended],
    }


def _files(store: SnapshotStore | None, calls: Sequence[Written]) -> dict[str, Files]:
    if store is None:
        return {}
    out: dict[str, Files] = {}
    for w in calls:
        found = changes(store.tree(w.snapshots.before), store.tree(w.snapshots.after))
        out[w.call_id] = tuple((c.path, c.kind, c.after.digest if c.after else None) for c in found)
    return out


def _last(calls: Sequence[Written]) -> str | None:
    return calls[-1].snapshots.after if calls else None


def _ended(store: SnapshotStore | None, origin: str | None, branch: str | None) -> list[Change]:
    """What differs between the two workspaces at their last snapshots."""
    if store is None or origin is None or branch is None or origin == branch:
        return []
    return changes(store.tree(origin), store.tree(branch))


def _differs(d: Differs) -> dict[str, Any]:
    return {
        "id": d.key, "turn": d.turn, "name": d.name, "what": list(d.what),
        "origin": d.origin, "branch": d.branch, "files": [printable(p) for p in d.files],
    }  # fmt: skip


def _text(r: dict[str, Any]) -> str:
    changed = ", ".join(r["changed"]) or "nothing"
    lines = [
        f"whatif {r['branch']}: {r['origin']} from turn {r['turn']} with {changed} changed: "
        f"{r['status']}"
    ]
    if r["status"] != "completed" and r["detail"]:
        lines.append(f"  ({r['detail']})")
    if not r["differs"]:
        lines.append("no difference: every call, check and file came out as the origin's")
        return "\n".join(lines)
    if (d := r["first_divergence"]) is not None:
        lines += [
            f"first divergence: turn {d['turn']}, {d['id']} ({d['name']}): {', '.join(d['what'])}",
            f"  origin: {d['origin'] or '(not reached)'}",
            f"  branch: {d['branch'] or '(not reached)'}",
        ]
    lines.append("calls that differ:" if r["calls"] else "calls that differ: none")
    lines += [f"  turn {c['turn']}  {c['id']:<12} {c['name']}: {', '.join(c['what'])}"
              for c in r["calls"]]  # fmt: skip
    lines.append("writes that changed files differently:" if r["writes"] else
                 "writes that changed files differently: none")  # fmt: skip
    lines += [f"  {w['call_id']}: {', '.join(w['files'])}" for w in r["writes"]]
    lines.append(
        "acceptance checks that flip:" if r["checks"] else "acceptance checks that flip: none"
    )
    lines += [
        f"  {c['check_id']}  {c['check']}: {c['origin']} -> {c['branch']}" for c in r["checks"]
    ]
    lines.append(
        "files that end up different:" if r["files"] else "files that end up different: none"
    )
    lines += [f"  {MARK[f['change']]} {f['path']}" for f in r["files"]]
    return "\n".join(lines)

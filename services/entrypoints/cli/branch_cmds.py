"""`branch RUN --turn N [--spec CHANGES]` and `whatif RUN --turn N --spec CHANGES`
(issue 39): a new run whose turns before N are RUN's (its recorded model replies and
tool results, `agentledger.events.branching`: nothing runs again), whose workspace
is RUN's snapshot before turn N, and whose spec is RUN's with CHANGES' top-level keys
put in (a new tool version, another approval rule, another model). `whatif` plays
RUN's recorded replies on from N too, stops where a call departs from RUN's, and
reports the two side by side (`whatif_report`). Both run on embedded workers, signed
as `--as PUBLISHER` (or this state folder's own publisher), and the intake checks the
branch as any run: the publisher's grant, and the origin's tenant."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentledger.events.state import RunState
from agentledger.events.time_travel import before_turn, written
from agentledger.events.types import ModelResponded, RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import Branch, ReplayModel, ReplaySettings, RunSpec
from agentledger.services import bounded_yaml
from agentledger.services.adapters.snapshots.checkout import CheckoutRefused, write_tree
from agentledger.services.adapters.snapshots.store import SnapshotMissing
from agentledger.services.adapters.snapshots.taker import snapshot_store
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.follow_run import follow
from agentledger.services.entrypoints.cli.prepare import request_for, toolset_of
from agentledger.services.entrypoints.cli.publisher_cmds import check_grant, local_signer
from agentledger.services.entrypoints.cli.run_cmds import private_queue, start_workers
from agentledger.services.entrypoints.controls import signer_for
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.session import Session

# what a branch keeps from its origin whatever CHANGES says: who it acts for (a branch
# never gains scopes), the conversation before its turn, where it works
KEPT = ("principal", "task", "branch", "workspace", "copy_workspace")
MODEL_LOG = "agentledger.services.handlers.model"  # where a failed model request is logged


class Refused(Exception):
    def __init__(self, kind: str, message: str, code: int = exit_codes.USAGE):
        super().__init__(message)
        self.kind, self.message, self.code = kind, message, code


@dataclass(frozen=True)
class Branched:
    origin_id: str
    origin: list[Envelope[Any]]
    created: RunCreated
    run_id: str
    state: RunState
    changed: tuple[str, ...]  # the keys CHANGES set


def branch(
    session: Session, run_id: str, *, turn: int, changes: str | None, as_: str | None,
    as_json: bool,
) -> int:  # fmt: skip
    """Start the branch, follow it to its end or to a person, and say what it became."""
    try:
        done = start_branch(session, run_id, turn=turn, changes=changes, as_=as_, replay=False)
    except Refused as r:
        return fail(r.code, r.kind, r.message, as_json)
    status = str(done.state.status)
    if as_json:
        emit({"run_id": done.run_id, "origin": run_id, "turn": turn, "status": status,
              "changed": list(done.changed)})  # fmt: skip
    else:
        print(f"branch {done.run_id} of {run_id} from turn {turn}: {status}")
    return exit_codes.for_status(done.state.status)


def start_branch(
    session: Session, run_id: str, *, turn: int, changes: str | None, as_: str | None,
    replay: bool,
) -> Branched:  # fmt: skip
    origin = session.store.read(run_id)
    if not origin or not isinstance(origin[0].data, RunCreated):
        raise Refused("no run", f"no run {run_id!r}")
    created: RunCreated = origin[0].data
    turns = max((e.data.turn for e in origin if isinstance(e.data, ModelResponded)), default=0)
    if turn > turns:
        raise Refused("no such turn", f"run {run_id!r} has {turns} turns: no turn {turn}")
    overrides = _changes(changes, replay=replay)
    spec = _spec(created, overrides, Branch(run_id=run_id, turn=turn), replay=replay)
    folder = _workspace(session, origin, created, turn) if created.workspace else None
    if folder is not None:
        spec = spec.model_copy(update={"workspace": folder, "copy_workspace": True})
    quiet = logging.getLogger(MODEL_LOG)
    level = quiet.level
    if replay:  # the departure ends the branch by design: the report says so, not a warning
        quiet.setLevel(logging.ERROR)
    try:
        new_id, state = _run(session, spec, created.base_dir, as_)
    finally:
        quiet.setLevel(level)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)  # the intake copied it
    return Branched(run_id, origin, created, new_id, state, tuple(overrides))


def _changes(path: str | None, *, replay: bool) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        found = bounded_yaml.safe_load(bounded_yaml.read_text(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, bounded_yaml.OverLimit) as exc:
        raise Refused("bad --spec", f"--spec {path!r}: {exc}") from None
    if not isinstance(found, dict) or not found:
        raise Refused("bad --spec", f"--spec {path!r} is not a mapping of spec keys to change")
    for key in found:
        if key in KEPT:
            raise Refused(
                "bad --spec", f"--spec may not change {key!r}: a branch keeps its origin's"
            )
        if replay and key == "model":
            raise Refused(
                "bad --spec", "--spec may not change 'model': whatif plays the recorded replies"
            )
    return found


def _spec(
    created: RunCreated, overrides: dict[str, Any], origin: Branch, *, replay: bool
) -> RunSpec:
    base = created.spec.model_dump(mode="json", exclude_none=True)
    try:
        spec = RunSpec.model_validate({**base, **overrides, "branch": origin.model_dump()})
    except ValidationError as exc:
        why = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise Refused("bad --spec", f"the branch's spec is not valid: {why}") from None
    if replay:
        settings = ReplaySettings(
            run_id=origin.run_id, fallback_model=created.spec.model.fallback_model,
            stop_at_divergence=True,
        )  # fmt: skip
        spec = spec.model_copy(update={"model": ReplayModel(replay=settings)})
    return spec


def _workspace(
    session: Session, origin: list[Envelope[Any]], created: RunCreated, turn: int
) -> str:
    """The origin's workspace before `turn`, written into a new temporary folder (its
    snapshot; the origin's folder itself when it recorded none: no write), which the
    intake copies as it copies any run's workspace."""
    folder = Path(tempfile.mkdtemp(prefix="agentledger-branch-"))
    calls = written(e.data for e in origin)
    tree_id = before_turn(calls, turn)
    store = snapshot_store(session.settings)
    try:
        if tree_id is not None and store is not None:
            write_tree(store, store.tree(tree_id), str(folder))
        elif created.workspace and Path(created.workspace).is_dir():
            say("the origin recorded no workspace snapshot: its folder as it is now is used")
            shutil.copytree(created.workspace, folder, symlinks=True)
        else:
            raise Refused("snapshot missing", "the origin's workspace before that turn is not kept")
    except (SnapshotMissing, CheckoutRefused, OSError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise Refused("snapshot missing", str(exc), exit_codes.CHECK_FAILED) from None
    return str(folder)


def _run(
    session: Session, spec: RunSpec, base_dir: str | None, as_: str | None
) -> tuple[str, RunState]:
    toolset = toolset_of(spec, base_dir)
    queue = private_queue()
    signer = signer_for(session.settings, as_) if as_ else local_signer(session)
    check_grant(session.settings, signer, spec.principal, queue)
    request = request_for(
        spec, base_dir, session.settings, queue=queue, toolset=toolset.fingerprint
    )
    assert request.run_id is not None
    stop_workers = start_workers(
        session, toolset, spec, base_dir, queue=queue, processes=0, publisher=signer.name
    )
    try:
        entry_id = session.inbox.publish(request, signer=signer)
        state = follow(session, request.run_id, entry_id, quiet=True, until=threading.Event())
    finally:
        stop_workers()
    if state is None:  # the intake refused it (and `follow` said why)
        raise Refused("refused", f"the intake refused branch {request.run_id!r}")
    return request.run_id, state

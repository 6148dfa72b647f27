"""`replay RUN --rerun`: a new run of the recorded run's spec whose model is the
replay model (the recorded replies, turn by turn), so the tools, the checks and
the core run again for real; then the first event where the new log departs
from the recorded one (`agentledger.events.divergence`). The workspace is always a fresh
copy of the spec's workspace as it is now, made by the intake like any run's. A run that waits for a person
(approval, escalation) stops the rerun there: nobody answers for them."""

from __future__ import annotations

import json
import sys
from typing import Any

from agentledger.events.counted import counted
from agentledger.events.divergence import Divergence, essence, first_divergence
from agentledger.events.following import Until
from agentledger.events.state import RunState
from agentledger.events.types import ModelRequested, RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidSpec
from agentledger.schemas.spec import ReplayModel, ReplaySettings, RunSpec
from agentledger.services.adapters.reading.follow import follow
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.prepare import request_for, toolset_of
from agentledger.services.entrypoints.cli.publisher_cmds import local_signer
from agentledger.services.entrypoints.cli.run_cmds import private_queue, start_workers
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session


def rerun(session: Session, run_id: str, *, as_json: bool) -> int:
    recorded = session.store.read(run_id)
    if not recorded or not isinstance(recorded[0].data, RunCreated):
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    created: RunCreated = recorded[0].data
    spec = replay_spec(created.spec, run_id)
    try:
        toolset = toolset_of(spec, created.base_dir)
        queue = private_queue()
        request = request_for(
            spec, created.base_dir, session.settings, queue=queue, toolset=toolset.fingerprint
        )
    except (InvalidSpec, TypeError) as exc:  # TypeError: a workspace with no base folder
        print(f"agentledger: cannot rerun {run_id!r}: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    assert request.run_id is not None
    if toolset.fingerprint != created.toolset:
        print(
            f"agentledger: the tool code differs from the recorded run's ({created.toolset} -> "
            f"{toolset.fingerprint}): the rerun runs today's",
            file=sys.stderr,
        )
    signer = local_signer(session)  # a private queue
    stop_workers = start_workers(
        session, toolset, spec, created.base_dir, queue=queue, processes=0, publisher=signer.name
    )
    try:
        session.inbox.publish(request, signer=signer)
        state = _until_settled(session, request.run_id)
    finally:
        stop_workers()
    new = session.store.read(request.run_id)
    divergence = first_divergence(recorded, new)
    report = _report(run_id, state, new, divergence, _context_changed(recorded, new))
    printed = json.dumps(report) if as_json else _text(report, divergence)
    print(redactor_for(created.spec).text(printed))
    return exit_codes.CHECK_FAILED if divergence else 0


def replay_spec(spec: RunSpec, run_id: str) -> RunSpec:
    fallback = spec.model.fallback_model  # a refusal the recorded run had goes on as it did
    model = ReplayModel(replay=ReplaySettings(run_id=run_id, fallback_model=fallback))
    # a fresh copy even of a workspace the recorded run worked in in place
    return spec.model_copy(update={"model": model, "copy_workspace": True})


def _until_settled(session: Session, run_id: str) -> RunState:
    """Fold the new run until it ends or waits for a person."""
    for step in follow(session.reader, run_id, until=Until.ASKS_A_PERSON):
        if step.last and step.state is not None:
            return step.state
    raise AssertionError("a follow with no stop of its own ends only at its rule")


def _context_changed(recorded: list[Envelope[Any]], new: list[Envelope[Any]]) -> list[int]:
    """Turns whose context view differs from the recorded one (paths in tool
    outputs differ between workspace copies, so this is a note, not a divergence)."""

    def hashes(envs: list[Envelope[Any]]) -> dict[int, str | None]:
        return {
            e.data.turn: e.data.context_hash for e in envs if isinstance(e.data, ModelRequested)
        }

    before, after = hashes(recorded), hashes(new)
    return sorted(t for t in after if t in before and before[t] and before[t] != after[t])


def _report(
    run_id: str, state: RunState, new: list[Envelope[Any]], d: Divergence | None, changed: list[int]
) -> dict[str, Any]:
    return {
        "recorded": run_id,
        "rerun": state.run_id,
        "status": str(state.status),
        "compared": sum(essence(e) is not None for e in new),
        "divergence": None
        if d is None
        else {
            "position": d.position,
            "recorded_seq": d.recorded_seq,
            "rerun_seq": d.rerun_seq,
            "recorded": d.recorded,
            "rerun": d.rerun,
        },
        "context_differs_at_turns": changed,
    }


def _text(report: dict[str, Any], d: Divergence | None) -> str:
    lines = [f"rerun {report['rerun']} of {report['recorded']}: {report['status']}"]
    if d is None:
        lines.append(
            f"no divergence: {counted(report['compared'], 'event')} compared (ids, times, claims left out)"
        )
    else:
        lines.append(f"DIVERGED at compared event {d.position}:")
        lines.append(f"  recorded (seq {d.recorded_seq}): {d.recorded or '(nothing more)'}")
        lines.append(f"  rerun    (seq {d.rerun_seq}): {d.rerun or '(nothing more)'}")
    if report["context_differs_at_turns"]:
        lines.append(
            f"note: the context sent differs at turns {report['context_differs_at_turns']}"
        )
    return "\n".join(lines)

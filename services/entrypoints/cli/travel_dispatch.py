"""The time-travel commands handed over to their modules (imported only then)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agentledger.services.session import Session


def _diff(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import travel_cmds

    return travel_cmds.diff(session, args.run_id, args.call_id, as_json=as_json)


def _gc(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import travel_cmds

    return travel_cmds.gc(session, dry_run=args.dry_run, as_json=as_json)


def _checkout(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import travel_cmds

    return travel_cmds.checkout(
        session, args.run_id, turn=args.turn, call=args.call, folder=args.folder, as_json=as_json
    )


def _branch(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import branch_cmds

    return branch_cmds.branch(
        session, args.run_id, turn=args.turn, changes=args.changes, as_=args.as_, as_json=as_json
    )


def _whatif(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import whatif_cmds

    return whatif_cmds.whatif(
        session, args.run_id, turn=args.turn, changes_path=args.changes, as_=args.as_,
        as_json=as_json,
    )  # fmt: skip


TRAVEL: dict[str, Callable[[argparse.Namespace, Session, bool], int]] = {
    "diff": _diff,
    "checkout": _checkout,
    "gc": _gc,
    "branch": _branch,
    "whatif": _whatif,
}

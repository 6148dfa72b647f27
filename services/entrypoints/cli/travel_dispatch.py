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


TRAVEL: dict[str, Callable[[argparse.Namespace, Session, bool], int]] = {
    "diff": _diff,
    "checkout": _checkout,
    "gc": _gc,
}

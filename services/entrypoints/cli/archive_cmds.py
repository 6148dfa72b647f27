"""`agentledger archive`: archive the finished runs past their retention age (or
`--older-than`) and take them out of Redis, as the sweepers do every
AGENTLEDGER_ARCHIVE_INTERVAL_S (`agentledger.services.handlers.archiver`);
`--dry-run` names the runs due and changes nothing. Every read command reads an
archived run as before."""

from __future__ import annotations

from agentledger.events.counted import counted
from agentledger.events.retention import RetentionPolicy
from agentledger.services.clock import SystemClock
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.reply import emit, fail
from agentledger.services.handlers.archiver import retention_pass
from agentledger.services.session import Session


def archive(session: Session, *, older_than: float | None, dry_run: bool, as_json: bool) -> int:
    if session.archive is None:
        return fail(
            exit_codes.USAGE, "no archive",
            "AGENTLEDGER_ARCHIVE_URL is off: finished runs stay in Redis", as_json,
        )  # fmt: skip
    policy = session.settings.retention if older_than is None else RetentionPolicy(older_than)
    report = retention_pass(
        session.store, session.archive, session.requests, policy,
        now=SystemClock().now(), dry_run=dry_run,
    )  # fmt: skip
    if as_json:
        emit({
            "archive": session.archive.url, "dry_run": dry_run, "due": report.due,
            "archived": report.archived, "left": report.left,
            "failed": [{"run_id": r, "reason": why} for r, why in report.failed],
        })  # fmt: skip
    elif dry_run:
        print(f"{counted(len(report.due), 'run')} due for the archive at {session.archive.url}")
        for run_id in report.due:
            print(f"  {run_id}")
    else:
        print(
            f"archived {counted(len(report.archived), 'run')} to {session.archive.url}"
            f" and removed them from Redis"
        )
        for run_id in report.left:
            print(f"  {run_id}: changed while archiving; left in Redis for the next pass")
        for run_id, why in report.failed:
            print(f"  {run_id}: not archived (it stays in Redis): {why}")
    return exit_codes.CHECK_FAILED if report.failed else 0

"""`agentledger tail`: events one a line (or one JSON envelope a line), in time
order. Across runs it reads the shard feeds and merges them by event time
(each feed is in append order, and a run lives in one shard, so every run's
events stay in seq order); `--follow` starts at the end unless
`--from-start`. With `--run`, the run's whole log, then (with `--follow`) what
it appends next, until it ends. `--type` keeps only events of those types."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentledger.events.following import Until
from agentledger.events.types import EVENT_TYPES
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.reading.follow import follow as following
from agentledger.services.adapters.reading.port import Cursors
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.parser import BadOption
from agentledger.services.entrypoints.cli.redacted import RunRedactors
from agentledger.services.entrypoints.describe import line
from agentledger.services.entrypoints.reply import fail, say
from agentledger.services.session import Session

FOLLOW_WAIT_S = 1.0  # a follower's wait for the next append before it looks again
Show = Callable[[Envelope[Any]], None]


def tail(
    session: Session,
    *,
    run_id: str | None,
    types: list[str] | None,
    follow: bool,
    from_start: bool,
    as_json: bool,
) -> int:
    wanted = event_types(types)
    redactors = RunRedactors(session.store)

    def show(env: Envelope[Any]) -> None:
        if wanted and env.type not in wanted:
            return
        text = env.model_dump_json() if as_json else line(env, with_run=run_id is None)
        print(redactors.text(env, text), flush=True)

    if run_id is not None:
        if not session.reader.exists(run_id):
            return fail(exit_codes.USAGE, "no run", f"no run {run_id!r}", as_json)
        _tail_run(session, run_id, follow, show)
        return 0
    if not follow or from_start:
        cursors = _history(session, show)
    else:
        cursors = session.reader.feed_ends()
    if follow:
        say("following new events" + ("" if from_start else " (--from-start: the history first)"))
        _follow_feeds(session, cursors, show)
    return 0


def event_types(given: list[str] | None) -> frozenset[str]:
    names = frozenset(n.strip() for g in given or [] for n in g.split(",") if n.strip())
    known = frozenset(EVENT_TYPES)
    unknown = sorted(names - known)
    if unknown:
        listed = ", ".join(sorted(known))
        raise BadOption("--type", f"no event type {unknown[0]!r}; the types are {listed}")
    return names


def _tail_run(session: Session, run_id: str, follow: bool, show: Show) -> None:
    """The run's log; with `follow`, what it appends next, until it is over: ended,
    with no call still running whose late outcome could yet be recorded."""
    if not follow:
        for env in session.reader.read(run_id):
            show(env)
        return
    for step in following(session.reader, run_id, until=Until.OVER, wait_s=FOLLOW_WAIT_S):
        for env in step.events:
            show(env)
        if step.last and step.state is not None:
            say(f"run {run_id} ended {step.state.status}: nothing more will be appended")


def _history(session: Session, show: Show) -> Cursors:
    """Print every event the feeds hold, merged by time; cursors at the feeds' ends."""
    history, cursors = session.reader.feed_history()
    for env in history:
        show(env)
    return cursors


def _follow_feeds(session: Session, cursors: Cursors, show: Show) -> None:
    while True:
        for env in session.reader.feed_next(cursors, timeout_s=FOLLOW_WAIT_S):
            show(env)

"""`agentledger tail`: events one a line (or one JSON envelope a line), in time
order. Across runs it reads the shard feeds and merges them by event time
(each feed is in append order, and a run lives in one shard, so every run's
events stay in seq order); `--follow` starts at the end unless
`--from-start`. With `--run`, the run's whole log, then (with `--follow`) what
it appends next, until it ends. `--type` keeps only events of those types."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from events.types import CODEC, EVENT_TYPES
from schemas.envelope import Envelope
from services.adapters.redis.slot_reads import read_each
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.parser import BadOption
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.reply import fail, say
from services.session import Session

BATCH = 500
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
        if not session.client.exists(session.keys.run(run_id)):
            return fail(exit_codes.USAGE, "no run", f"no run {run_id!r}", as_json)
        _tail_run(session, run_id, follow, show)
        return 0
    if not follow or from_start:
        cursors = _history(session, show)
    else:
        cursors = _ends(session)
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
    seq = 0
    key = session.keys.run(run_id)
    while True:
        for env in session.store.read(run_id, after_seq=seq):
            show(env)
            seq = env.seq
        if not follow:
            return
        state = session.load(run_id)
        if state is not None and state.seq == seq and state.over:
            say(f"run {run_id} ended {state.status}: nothing more will be appended")
            return
        session.client.xread({key: f"0-{seq}"}, block=1000)


def _history(session: Session, show: Show) -> dict[str, str]:
    """Print every event the feeds hold, merged by time; the feeds' last ids."""
    per_shard: list[list[Envelope[Any]]] = []
    cursors: dict[str, str] = {}
    for shard in range(session.keys.shards):
        feed = session.keys.feed(shard)
        entries: Any = session.client.xrange(feed)
        cursors[feed] = entries[-1][0].decode() if entries else "0-0"
        per_shard.append(_envelopes(session, [_ref(f) for _, f in entries]))
    for env in heapq.merge(*per_shard, key=lambda e: e.at):
        show(env)
    return cursors


def _ends(session: Session) -> dict[str, str]:
    pipe = session.client.pipeline(transaction=False)
    feeds = [session.keys.feed(s) for s in range(session.keys.shards)]
    for feed in feeds:
        pipe.xrevrange(feed, count=1)
    return {
        feed: (last[0][0].decode() if last else "0-0")
        for feed, last in zip(feeds, pipe.execute(), strict=True)
    }


def _follow_feeds(session: Session, cursors: dict[str, str], show: Show) -> None:
    while True:
        reply = read_each(session.client, cursors, count=BATCH, block_ms=1000)
        batches: list[list[Envelope[Any]]] = []
        for stream, entries in reply or []:
            cursors[stream.decode()] = entries[-1][0].decode()
            batches.append(_envelopes(session, [_ref(f) for _, f in entries]))
        for env in heapq.merge(*batches, key=lambda e: e.at):
            show(env)


def _ref(fields: dict[bytes, bytes]) -> tuple[str, int, int]:
    """(run, first seq, last seq) of the append a feed entry stands for."""
    last = int(fields[b"seq"])
    return fields[b"run"].decode(), int(fields.get(b"first", last)), last


def _envelopes(session: Session, refs: Iterable[tuple[str, int, int]]) -> list[Envelope[Any]]:
    """The events the feed entries point at, in the feed's order (one round trip)."""
    refs = list(refs)
    pipe = session.client.pipeline(transaction=False)
    for run, first, last in refs:
        pipe.xrange(session.keys.run(run), f"0-{first}", f"0-{last}")
    found: list[Envelope[Any]] = []
    for entries in pipe.execute() if refs else []:
        for _, fields in entries:  # none when the run's log was deleted since
            found.append(CODEC.decode(fields[b"e"]))
    return found

"""The Redis event store: one stream per run (entry ids 0-<seq>), one feed per
shard, both written by one registered Lua script that checks `expected_seq`.
A run's tail is read by another script that checks, in the same call, that the
log still holds the event the caller folded last (or the snapshot's); by plain
reads (`plain_tails`) for a caller the server refuses scripts (the ops user)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from typing import Any

import redis
from redis.exceptions import NoPermissionError, NoScriptError

from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.adapters.redis.direct import ThreadConnections
from agentledger.services.adapters.redis.replicas import ReplicaAcks
from agentledger.services.adapters.store import plain_tails
from agentledger.services.adapters.store.entries import decode_entry, decode_raw
from agentledger.services.adapters.store.overflow import DEFAULT_MAX_BYTES, Cutter, page_field
from agentledger.services.adapters.store.packed import packed
from agentledger.services.adapters.store.port import (
    Append,
    Exported,
    Head,
    Outgoing,
    Removed,
    RunIndexEntry,
    Snapshot,
    Tail,
)
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.keys import Keys

_SCRIPTS = files("agentledger.services.adapters.store")
_KEEP_SNAPSHOT = _SCRIPTS.joinpath("keep_snapshot.lua").read_text()
_APPEND = _KEEP_SNAPSHOT + _SCRIPTS.joinpath("append.lua").read_text()
_TAIL = _SCRIPTS.joinpath("tail.lua").read_text()
_SNAPSHOT = _KEEP_SNAPSHOT + _SCRIPTS.joinpath("snapshot.lua").read_text()
_TOUCH = _SCRIPTS.joinpath("touch.lua").read_text()
_REMOVE = _SCRIPTS.joinpath("remove.lua").read_text()
FEED_MAXLEN = 100_000
SNAPSHOT_TTL_MS = 7 * 24 * 3600 * 1000  # a cache: an idle run's snapshot may go


class RedisEventStore:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        replica_acks: int = 0,
        event_max_bytes: int = DEFAULT_MAX_BYTES,
    ):
        self._r = client
        self._keys = keys
        self._cutter = Cutter(event_max_bytes)
        self._acks = ReplicaAcks(client, replica_acks)  # 0: the append is the only round trip
        self._append = client.register_script(_APPEND)
        self._tail = client.register_script(_TAIL)
        self._snapshot = client.register_script(_SNAPSHOT)
        self._touch = client.register_script(_TOUCH)
        self._remove = client.register_script(_REMOVE)
        self._scripted_reads = True  # until the server refuses this user a script
        self._direct = None if is_cluster(client) else ThreadConnections(client)

    def append(
        self,
        run_id: str,
        events: Sequence[Envelope[Any]],
        *,
        expected_seq: int,
        live: bool,
        messages: Sequence[Outgoing] = (),
        expected_id: str = "",
        snapshot: Snapshot | None = None,
    ) -> int:
        one = Append(run_id, events, expected_seq, live, messages, expected_id, snapshot)
        keys, argv = self._script_args(one)
        verdict, seq = self._acks.call(self._append, keys, argv)
        self._cutter.appended()  # landed, or conflicted (an outage raised above: resent whole)
        return _landed(run_id, expected_seq, verdict, seq)

    def append_many(self, appends: Sequence[Append]) -> list[int | Exception]:
        """The appends' script calls pipelined (on a cluster, one round trip a node);
        one by one when each must wait for its replicas (WAIT counts a connection's
        writes: the waits would mix)."""
        if self._acks.replicas > 0 or len(appends) == 1:
            return [self._one(a) for a in appends]
        calls = [self._script_args(a) for a in appends]
        replies = self._pipelined(calls)
        self._cutter.appended()  # an outage raised above: the pages wait for the resend
        out: list[int | Exception] = []
        for a, reply in zip(appends, replies, strict=True):
            if isinstance(reply, Exception):
                out.append(reply)
                continue
            try:
                out.append(_landed(a.run_id, a.expected_seq, reply[0], reply[1]))
            except ConcurrencyConflict as exc:
                out.append(exc)
        return out

    def _one(self, a: Append) -> int | Exception:
        try:
            return self.append(
                a.run_id, a.events, expected_seq=a.expected_seq, live=a.live,
                messages=a.messages, expected_id=a.expected_id, snapshot=a.snapshot,
            )  # fmt: skip
        except (ConcurrencyConflict, InvalidEvent, redis.ResponseError) as exc:
            return exc

    def _script_args(self, a: Append) -> tuple[list[str], list[Any]]:
        """append.lua's keys and arguments for one append."""
        if not a.events:
            raise ValueError("nothing to append")
        events, pages = self._cutter.for_append(a.events)
        run_id = a.run_id
        argv: list[Any] = [a.expected_seq, run_id, _ms(events[-1].at), int(a.live), FEED_MAXLEN]
        argv += [len(events), a.expected_id]
        for env in events:
            argv += [env.id, env.type, packed(env)]
        kept = _snapshot_args(a.snapshot) if a.snapshot is not None else []
        argv += [len(kept), *kept]
        argv += [len(pages), *(x for page in pages.items() for x in page)]
        argv += [m.data for m in a.messages]
        shard = self._keys.shard(run_id)
        keys = [
            self._keys.run(run_id),
            self._keys.feed(shard),
            self._keys.runs(shard),
            self._keys.live(shard),
            self._keys.snapshot(run_id),
            self._keys.overflow(run_id),
            *(m.stream for m in a.messages),
        ]
        return keys, argv

    def _pipelined(self, calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
        """EVALSHA of append.lua for each call, sent together; a reply is the script's,
        or the error it answered. A script the server lost is loaded and the calls
        it refused sent again (a NOSCRIPT reply ran nothing)."""
        sha = self._append.sha
        commands = [("EVALSHA", sha, len(k), *k, *a) for k, a in calls]
        replies: list[Any] = [None] * len(commands)
        todo = list(range(len(commands)))
        for _ in range(2):
            sent = self._send_all([commands[i] for i in todo])
            for i, reply in zip(todo, sent, strict=True):
                replies[i] = reply
            todo = [i for i in todo if isinstance(replies[i], NoScriptError)]
            if not todo:
                return replies
            self._r.script_load(_APPEND)  # a restarted or flushed server
        return replies

    def _send_all(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        if self._direct is not None:
            return self._direct.pipeline(commands)
        pipe = self._r.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        return list(pipe.execute(raise_on_error=False))

    def as_stored(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        return self._cutter.as_stored(events)  # a field past the cap cut

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        entries: Any = self._r.xrange(self._keys.run(run_id), f"0-{after_seq + 1}", "+")
        return [decode_entry(entry_id, fields) for entry_id, fields in entries]

    def overflow_pages(self, run_id: str, ref: str, first: int, count: int) -> list[str]:
        if count <= 0:
            return []
        fields = [page_field(ref, n) for n in range(first, first + count)]
        found: list[Any] = self._r.hmget(self._keys.overflow(run_id), fields)
        if any(blob is None for blob in found):
            raise InvalidEvent(f"run {run_id!r} lacks overflow pages of {ref!r}", field="overflow")
        return [blob.decode() for blob in found]

    def read_tails(self, heads: Sequence[Head], *, snapshot_version: str) -> list[Tail]:
        if self._scripted_reads:
            try:
                return self._scripted_tails(heads, snapshot_version)
            except NoPermissionError:  # a user with no scripts (ops): plain reads from now on
                self._scripted_reads = False
        replies = plain_tails.read_tails(self._r, self._keys, heads, snapshot_version)
        return [_tail(reply, snapshot_version) for reply in replies]

    def _scripted_tails(self, heads: Sequence[Head], snapshot_version: str) -> list[Tail]:
        if len(heads) == 1:
            head = heads[0]
            replies = [
                self._tail(keys=self._tail_keys(head), args=_tail_args(head, snapshot_version))
            ]
        else:
            replies = self._tails_pipelined(heads, snapshot_version)
        return [_tail(reply, snapshot_version) for reply in replies]

    def _tail_keys(self, head: Head) -> list[str]:
        return [self._keys.run(head.run_id), self._keys.snapshot(head.run_id)]

    def _tails_pipelined(self, heads: Sequence[Head], version: str) -> list[Any]:
        # EVALSHA by hand: a redis-py pipeline holding Script objects asks SCRIPT EXISTS first
        for _ in range(2):
            pipe = self._r.pipeline(transaction=False)
            for head in heads:
                # a plain command: a cluster pipeline refuses pipe.evalsha, not EVALSHA (by node)
                keys = self._tail_keys(head)
                pipe.execute_command(
                    "EVALSHA", self._tail.sha, 2, *keys, *_tail_args(head, version)
                )  # type: ignore[no-untyped-call]
            try:
                return pipe.execute()
            except NoScriptError:
                self._r.script_load(_TAIL)  # a restarted or flushed server
        raise NoScriptError("tail.lua was not loaded")

    def save_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        self._snapshot(keys=[self._keys.snapshot(run_id)], args=_snapshot_args(snapshot))

    def snapshot_pages(self, run_id: str, count: int) -> list[bytes]:
        if count == 0:
            return []
        fields = [f"page:{n}" for n in range(count)]
        found: list[Any] = self._r.hmget(self._keys.snapshot(run_id), fields)
        missing = [f for f, blob in zip(fields, found, strict=True) if blob is None]
        if missing:
            raise InvalidEvent(f"snapshot of {run_id!r} lacks {missing[0]}", field="snapshot")
        return list(found)

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        pipe = self._r.pipeline(transaction=False)
        for shard in range(self._keys.shards):
            pipe.zrevrange(self._keys.runs(shard), 0, limit - 1, withscores=True)
        found = [
            RunIndexEntry(run.decode(), score / 1000)
            for rows in pipe.execute()
            for run, score in rows
        ]
        return sorted(found, key=lambda e: e.created_at, reverse=True)[:limit]

    def idle_live_runs(
        self, *, idle_since: float, shards: Sequence[int] | None = None, limit: int = 100
    ) -> list[str]:
        pipe = self._r.pipeline(transaction=False)
        for shard in range(self._keys.shards) if shards is None else shards:
            pipe.zrangebyscore(self._keys.live(shard), "-inf", _ms(idle_since), start=0, num=limit)
        return [run.decode() for rows in pipe.execute() for run in rows][:limit]

    def touch(self, run_id: str, *, at: float, seq: int | None = None) -> None:
        live = self._keys.live(self._keys.shard(run_id))
        if seq is None:
            self._r.zadd(live, {run_id: _ms(at)}, xx=True)
        else:
            self._touch(keys=[self._keys.run(run_id), live], args=[seq, _ms(at), run_id])

    def export(self, run_id: str) -> Exported | None:
        pipe = self._r.pipeline(transaction=False)
        pipe.xrange(self._keys.run(run_id))
        pipe.hgetall(self._keys.overflow(run_id))
        entries, overflow = pipe.execute()
        if not entries:
            return None
        for n, (entry_id, fields) in enumerate(entries, 1):
            if entry_id != f"0-{n}".encode() or b"e" not in fields:
                raise InvalidEvent(
                    f"run {run_id!r}: entry {entry_id.decode()} is not event {n}", field="seq"
                )
        pages = {k.decode(): v for k, v in overflow.items()}
        return Exported(run_id, [fields[b"e"] for _, fields in entries], pages)

    def remove(self, run_id: str, *, count: int, last_id: str) -> Removed:
        shard = self._keys.shard(run_id)
        keys = [
            self._keys.run(run_id),
            self._keys.runs(shard),
            self._keys.live(shard),
            self._keys.snapshot(run_id),
            self._keys.overflow(run_id),
        ]
        return Removed(self._remove(keys=keys, args=[run_id, count, last_id]).decode())

    def created_before(
        self,
        before: float,
        *,
        shards: Sequence[int] | None = None,
        offset: int = 0,
        limit: int = 1000,
    ) -> list[RunIndexEntry]:
        pipe = self._r.pipeline(transaction=False)
        for shard in range(self._keys.shards) if shards is None else shards:
            pipe.zrangebyscore(
                self._keys.runs(shard), "-inf", f"({_ms(before)}", start=0, num=offset + limit,
                withscores=True,
            )  # fmt: skip
        # each shard's first offset + limit: the merged order's first offset + limit are among them
        found = [(s, r.decode()) for rows in pipe.execute() for r, s in rows]
        return [RunIndexEntry(r, s / 1000) for s, r in sorted(found)[offset : offset + limit]]

    def trim_feeds(self, before: float) -> None:
        pipe = self._r.pipeline(transaction=False)
        for shard in range(self._keys.shards):
            pipe.xtrim(self._keys.feed(shard), minid=f"{_ms(before)}-0", approximate=False)
        pipe.execute()


def _snapshot_args(snapshot: Snapshot) -> list[Any]:
    """keep_snapshot.lua's arguments."""
    args: list[Any] = [snapshot.version, snapshot.seq, snapshot.event_id, snapshot.state]
    args += [SNAPSHOT_TTL_MS, snapshot.spec or b""]
    for n, blob in sorted(snapshot.pages.items()):
        args += [n, blob]
    return args


def _tail_args(head: Head, version: str) -> list[Any]:
    return [head.seq, head.event_id, version]


def _tail(reply: list[Any], version: str) -> Tail:
    base, state, snap_seq, snap_id, flat, spec = reply  # flat: entry id, its 'e' field, ...
    events = [decode_raw(eid, raw) for eid, raw in zip(flat[::2], flat[1::2], strict=True)]
    snapshot = (
        None if state is None else Snapshot(int(base), snap_id.decode(), version, state, spec)
    )
    return Tail(int(base), events, snapshot, int(snap_seq))


def _landed(run_id: str, expected_seq: int, verdict: bytes, seq: Any) -> int:
    if verdict == b"conflict":
        raise ConcurrencyConflict(run_id, expected_seq, int(seq))
    return int(seq)


def _ms(at: float) -> int:
    return int(at * 1000)

"""A run's tail by plain reads, for a caller that may not run scripts (the ops
user: no EVAL/EVALSHA). The same answer as `tail.lua` — the events after the
caller's seq while the log still holds the event it folded last, else after the
run's snapshot while the log holds the snapshot's event, else the whole log —
read in up to three pipelined round trips instead of one script call. Not one
atomic read: a log only grows, and a snapshot is used only when the log still
holds its event, so what it reads is the log's, as of some moment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from agentledger.services.adapters.store.port import Head
from agentledger.services.keys import Keys


def read_tails(
    client: redis.Redis, keys: Keys, heads: Sequence[Head], version: str
) -> list[list[Any]]:
    """Per head, what tail.lua returns: [base, state, snapshot seq, its event id,
    flat (entry id, its 'e' field, ...), spec]."""
    with client.pipeline(transaction=False) as pipe:
        for head in heads:
            pipe.hmget(keys.snapshot(head.run_id), ["v", "seq", "id"])
            pipe.xrange(keys.run(head.run_id), f"0-{max(head.seq, 1)}", f"0-{max(head.seq, 1)}")
        first = pipe.execute()
    snaps = [_snap(first[2 * i], version) for i in range(len(heads))]
    held = [h.seq > 0 and _holds(first[2 * i + 1], h.event_id) for i, h in enumerate(heads)]
    with client.pipeline(transaction=False) as pipe:
        for head, (snap_seq, _) in zip(heads, snaps, strict=True):
            pipe.xrange(keys.run(head.run_id), f"0-{max(snap_seq, 1)}", f"0-{max(snap_seq, 1)}")
        second = pipe.execute()
    bases = []
    for head, (snap_seq, snap_id), holds, at_snap in zip(heads, snaps, held, second, strict=True):
        snap_ok = snap_seq > 0 and _holds(at_snap, snap_id)
        if snap_seq > head.seq and snap_ok or not holds and snap_ok:
            bases.append((snap_seq, True))
        else:
            bases.append((head.seq if holds else 0, False))
    with client.pipeline(transaction=False) as pipe:
        for head, (base, from_snapshot) in zip(heads, bases, strict=True):
            pipe.xrange(keys.run(head.run_id), f"0-{base + 1}", "+")
            if from_snapshot:
                pipe.hmget(keys.snapshot(head.run_id), ["state", "spec"])
        third = iter(pipe.execute())
    replies = []
    for (base, from_snapshot), (snap_seq, snap_id) in zip(bases, snaps, strict=True):
        entries = next(third)
        state, spec = next(third) if from_snapshot else (None, None)
        flat = [x for entry_id, fields in entries for x in (entry_id, fields.get(b"e"))]
        replies.append([base, state, snap_seq, snap_id, flat, spec])
    return replies


def _snap(fields: list[Any], version: str) -> tuple[int, bytes | None]:
    v, seq, event_id = fields
    if v is None or v.decode() != version or not seq:
        return 0, event_id
    return int(seq), event_id


def _holds(entries: list[Any], event_id: bytes | str | None) -> bool:
    if not entries or event_id is None:
        return False
    wanted = event_id.encode() if isinstance(event_id, str) else event_id
    return bool(entries[0][1].get(b"id") == wanted)

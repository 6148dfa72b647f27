"""Script calls on a connection each thread keeps to itself, on a plain Redis.

The hot path (an append per step, a ledger entry per write) is one EVALSHA
each; through redis-py's client every call checks a connection out of the pool
and back, goes through its retry wrapper and its observability hooks and looks
up a response callback — about 30 µs of CPU per call, as much again as
sending and parsing. Here a thread sends on its own connection (made with the
client's options, never shared between threads) and reads the reply as it is. A script the server does not know (a restarted Redis) is loaded and
the call sent again; any other failure closes the connection (what was in
flight on it is unknown) and is raised as it came, so the caller's outage
handling (`agentledger.services.handlers.outage`) decides what to do, as before. On Redis
Cluster (`RedisCluster`) scripts go through the client: it knows the slots.
A broker consumer reads its streams the same way (`pipeline`: its acks and
its blocking read in one round trip). With hiredis (the connection's own
packer) commands are packed by `hiredis.pack_command` directly, sparing
redis-py's per-argument pass (~3 µs a command), and a pipeline goes out as one
write (redis-py writes a packed list item by item: a syscall and a loopback TCP
segment per command); anything hiredis refuses is packed by the connection as
before (same bytes, same errors)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary

import redis
from redis.commands.core import Script
from redis.connection import HiredisRespSerializer
from redis.exceptions import NoScriptError
from redis.utils import HIREDIS_AVAILABLE

if HIREDIS_AVAILABLE:  # a dependency (redis[hiredis]); without it redis-py packs as always
    from hiredis import pack_command as _hiredis_pack

_HELD: WeakKeyDictionary[Any, threading.local] = WeakKeyDictionary()  # pool -> its threads'
_HELD_LOCK = threading.Lock()


class ThreadConnections:
    """The connections of one client's pool that its threads keep: one per thread
    (shared by every user of the client: store, ledger, locks), made with the
    pool's class and options but outside it (never checked in, not counted
    against its `max_connections`)."""

    def __init__(self, client: redis.Redis):
        pool = client.connection_pool
        self._make = partial(pool.connection_class, **pool.connection_kwargs)
        with _HELD_LOCK:
            self._local = _HELD.setdefault(pool, threading.local())

    def call(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        conn = self._connection()
        try:
            for _ in range(2):
                try:
                    _send(conn, [("EVALSHA", script.sha, len(keys), *keys, *args)])
                    return conn.read_response()
                except NoScriptError:  # the reply was read whole: the connection is fine
                    conn.send_command("SCRIPT", "LOAD", script.script)
                    conn.read_response()
        except BaseException:
            conn.disconnect()  # a reply may still be on its way: never read it as the next one's
            raise
        raise NoScriptError("the script could not be loaded")

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Commands sent together, the replies read in order, each as the server
        sent it; an error reply is returned in its command's place."""
        conn = self._connection()
        try:
            _send(conn, commands)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
            return replies
        except BaseException:
            conn.disconnect()
            raise

    def _connection(self) -> Any:  # a redis.Connection (redis-py leaves its methods untyped)
        pid, conn = getattr(self._local, "held", (0, None))
        if conn is None or pid != os.getpid():  # a forked child makes its own
            conn = self._make()
            self._local.held = (os.getpid(), conn)
        return conn


def _send(conn: Any, commands: Sequence[Sequence[Any]]) -> None:
    """As `conn.send_packed_command(conn.pack_commands(commands))`: the same bytes."""
    packed: list[bytes] | None = None
    plain = all(isinstance(c[0], str) and " " not in c[0] for c in commands)  # no "SCRIPT LOAD"
    if plain and type(getattr(conn, "_command_packer", None)) is HiredisRespSerializer:
        try:
            packed = [_hiredis_pack(tuple(c)) for c in commands]
        except TypeError:  # a bytearray, a bool…: the connection packs (or refuses) it
            packed = None
    if packed is not None and len(packed) > 1:  # one write, not one per command
        packed = [b"".join(packed)]
    conn.send_packed_command(packed if packed is not None else conn.pack_commands(commands))

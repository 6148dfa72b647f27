"""Script calls on a thread's own connection (`agentledger.services.adapters.redis.direct`),
against a private redis-server that the tests restart and flush."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.redis.direct import ThreadConnections
from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server

ECHO = "redis.call('INCR', KEYS[1]); return {KEYS[1], ARGV[1]}"


def connections(server: PrivateRedis) -> int:
    """Clients connected to the server, this probe's own left out."""
    with redis.Redis.from_url(server.url) as probe:
        return int(probe.info("clients")["connected_clients"]) - 1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    s = start_server(tmp_path / "redis")
    yield s
    s.stop()


def test_a_call_returns_the_scripts_reply_and_a_thread_keeps_its_connection(
    server: PrivateRedis,
) -> None:
    client = redis_client(server.url)
    calls, script = ThreadConnections(client), client.register_script(ECHO)
    before = connections(server)
    assert calls.call(script, ["k"], ["a"]) == [b"k", b"a"]
    assert calls.call(script, ["k"], ["b"]) == [b"k", b"b"]
    assert connections(server) == before + 1  # one connection, kept, not the pool's
    called, counted = threading.Event(), threading.Event()

    def other_thread() -> None:  # alive while counted: a thread's connection ends with it
        calls.call(script, ["k"], ["c"])
        called.set()
        counted.wait(30)

    worker = threading.Thread(target=other_thread)
    worker.start()
    try:
        assert called.wait(30)
        assert connections(server) == before + 2  # another thread, another connection
    finally:
        counted.set()
        worker.join()
    assert client.get("k") == b"3"


def test_a_script_the_server_forgot_is_loaded_again_and_the_call_made_once(
    server: PrivateRedis,
) -> None:
    client = redis_client(server.url)
    calls, script = ThreadConnections(client), client.register_script(ECHO)
    calls.call(script, ["k"], ["a"])
    client.script_flush()
    assert calls.call(script, ["k"], ["b"]) == [b"k", b"b"]
    assert client.get("k") == b"2"  # the refused EVALSHA ran nothing


def test_a_restarted_server_fails_the_call_in_flight_and_the_next_one_reconnects(
    server: PrivateRedis, tmp_path: Path
) -> None:
    client = redis_client(server.url)
    calls, script = ThreadConnections(client), client.register_script(ECHO)
    calls.call(script, ["k"], ["a"])
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    server.stop()
    with pytest.raises(redis.ConnectionError):
        calls.call(script, ["k"], ["b"])  # the caller's outage handling decides what follows
    again = start_server(tmp_path / "redis", port=port)  # from its AOF, without the script
    try:
        assert calls.call(script, ["k"], ["c"]) == [b"k", b"c"]
        assert client.get("k") == b"2"
    finally:
        again.stop()


def test_a_forked_child_uses_a_connection_of_its_own(server: PrivateRedis) -> None:
    client = redis_client(server.url)
    calls, script = ThreadConnections(client), client.register_script(ECHO)
    calls.call(script, ["k"], ["a"])
    before = connections(server)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            calls.call(script, ["k"], ["child"])
            code = 0 if connections(server) == before + 1 else 2  # its own, beside the parent's
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert calls.call(script, ["k"], ["b"]) == [b"k", b"b"]  # the parent's still works
    assert client.get("k") == b"3"
    deadline = time.monotonic() + 10  # the server notices the child's close when it reads it
    while connections(server) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections(server) == before  # the parent's connection is still its own


class _Sent:
    """A connection that only records what it is asked to send."""

    def __init__(self) -> None:
        self._command_packer = redis.Connection()._command_packer
        self.real = redis.Connection()
        self.sent: list[bytes] = []
        self.writes = 0  # the socket writes the connection would make: one per item

    def pack_commands(self, commands: list[tuple[object, ...]]) -> list[bytes]:
        return list(self.real.pack_commands(commands))

    def send_packed_command(self, packed: list[bytes]) -> None:
        self.sent.append(b"".join(packed))
        self.writes += len(packed)


@pytest.mark.parametrize(
    "commands",
    [
        [("EVALSHA", "ab" * 20, 2, "k1", "k2", 7, 1.5, "é", b"\x00\xff" * 40, "")],
        [
            ("XACK", "s", "g", "1-1"),
            ("XREADGROUP", "GROUP", "g", "c", "COUNT", 3, "STREAMS", "s", ">"),
        ],
        [("SCRIPT LOAD", "return 1")],  # a two-word command: split by the connection
        [("SET", "k", bytearray(b"v"))],  # what hiredis refuses: packed by the connection
    ],
)
def test_commands_are_sent_as_the_connection_would_pack_them(
    commands: list[tuple[object, ...]],
) -> None:
    from agentledger.services.adapters.redis.direct import _send

    conn = _Sent()
    _send(conn, commands)
    assert conn.sent == [b"".join(conn.real.pack_commands(commands))]


def test_a_pipeline_packed_by_hiredis_is_one_write() -> None:
    """redis-py writes a packed command list item by item: one syscall, and one
    loopback TCP segment, per command, where one write of the whole does."""
    from agentledger.services.adapters.redis.direct import _send

    conn = _Sent()
    acks = [("XACK", "s", "g", f"1-{i}") for i in range(5)]
    _send(conn, [*acks, ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")])
    assert conn.writes == 1

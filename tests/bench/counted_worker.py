"""A worker process for the benchmark: `agentledger workers`, plus a count of
what it costs. Every Redis command this process sends is counted (a pipeline's
commands one by one, and each pipeline or single command as one round trip),
the thread CPU time of each message is added to its pool (model, tools,
accept: with the steps it carried on, which other pools' messages would have
been; the rest of the process's CPU is the other threads: the broker,
heartbeats, loops and the threads Python tools run in), messages are counted,
and every 50 ms the counts and the process's CPU time are written to a file,
which the benchmark reads before and after a workload. Commands run inside our
Lua scripts are not sent, so they are not counted here.

Run as `python -m tests.bench.counted_worker COUNTS_FILE` (the bench's workers),
or `… COUNTS_FILE run SPEC` (any agentledger command, counted the same way)."""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from redis.connection import AbstractConnection

WRITE_EVERY_S = 0.05


class Counts:
    def __init__(self) -> None:
        self.commands: Counter[str] = Counter()
        self.pool_cpu_s: Counter[str] = Counter()  # thread CPU of the messages each pool ran
        self.messages = 0  # messages the pools ran (a step carried on is not one)
        self.round_trips = 0
        self._lock = threading.Lock()
        self._quiet = threading.local()  # counting paused on this thread

    def ran(self, pool: str, cpu_s: float) -> None:
        with self._lock:
            self.pool_cpu_s[pool] += cpu_s
            self.messages += 1

    @contextmanager
    def not_again(self) -> Iterator[None]:
        self._quiet.on = True
        try:
            yield
        finally:
            self._quiet.on = False

    def add(self, names: list[Any]) -> None:
        if getattr(self._quiet, "on", False):
            return
        with self._lock:
            self.round_trips += 1
            for name in names:
                self.commands[name.decode() if isinstance(name, bytes) else str(name)] += 1

    def snapshot(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with self._lock:
            return {
                "pid": os.getpid(),
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "round_trips": self.round_trips,
                "commands": dict(self.commands),
                "pool_cpu_s": dict(self.pool_cpu_s),
                "messages": self.messages,
            }


COUNTS = Counts()


def install() -> None:
    single, many = AbstractConnection.send_command, AbstractConnection.pack_commands

    def send_command(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
        COUNTS.add([args[0]])
        return single(self, *args, **kwargs)

    def pack_commands(self: AbstractConnection, commands: Any) -> Any:
        commands = list(commands)
        COUNTS.add([cmd[0] for cmd in commands])
        return many(self, commands)

    AbstractConnection.send_command = send_command  # type: ignore[method-assign]
    AbstractConnection.pack_commands = pack_commands  # type: ignore[method-assign]

    # our direct connections pack their commands themselves (hiredis): counted here
    from agentledger.services.adapters.redis import direct

    packed = direct._send

    def send_direct(conn: Any, commands: Any) -> None:
        COUNTS.add([cmd[0] for cmd in commands])
        with COUNTS.not_again():  # its fallback packs through pack_commands: one count
            packed(conn, commands)

    direct._send = send_direct

    from dramatiq.worker import WorkerThread

    process = WorkerThread.process_message

    def process_message(self: WorkerThread, message: Any) -> Any:
        started = time.thread_time()  # this thread's CPU: the message's own work
        try:
            return process(self, message)
        finally:  # dramatiq queue names are `<pool>.<queue>.<toolset>`
            COUNTS.ran(message.queue_name.split(".", 1)[0], time.thread_time() - started)

    WorkerThread.process_message = process_message  # type: ignore[method-assign]


def write_forever(path: Path) -> None:
    scratch = path.with_suffix(".tmp")
    while True:
        scratch.write_text(json.dumps(COUNTS.snapshot()))
        os.replace(scratch, path)
        threading.Event().wait(WRITE_EVERY_S)


def main() -> int:
    install()
    threading.Thread(target=write_forever, args=(Path(sys.argv[1]),), daemon=True).start()
    from agentledger.services.entrypoints.cli.main import main as agentledger
    from tests.bench.plan import QUEUE, TOOLS_DIR, TOOLS_MODULE

    command = sys.argv[2:] or [
        "workers", "--tools", TOOLS_MODULE, "--tool-path", TOOLS_DIR, "--queue", QUEUE
    ]  # fmt: skip
    try:
        return agentledger(command)
    finally:
        Path(sys.argv[1]).write_text(json.dumps(COUNTS.snapshot()))  # the last counts


if __name__ == "__main__":
    sys.exit(main())

"""`agentledger workers --processes N`: N worker processes kept alive. A child
that dies (a crash, the OOM killer, a SIGKILL) is started again at once, so
the pools keep their size; its runs are picked up from the event log by the
others (claims run out, the broker hands its messages on). Children live in a
session of their own and die with this process even when it is SIGKILLed."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from agentledger.services.entrypoints.cli.children import die_with_parent
from agentledger.services.settings import Settings, environ_for_children

CHECK_EVERY_S = 0.2
log = logging.getLogger(__name__)


class Supervisor:
    def __init__(
        self, settings: Settings, args: list[str], processes: int,
        *, env: dict[str, str] | None = None, on_death: Callable[[int], None] | None = None,
    ) -> None:  # fmt: skip
        self._env = {**environ_for_children(settings), **(env or {})}
        self._on_death = on_death  # told a dead child's pid (its live gauges are dropped)
        self._command = [sys.executable, "-m", "agentledger.services.entrypoints.cli.main", *args]
        self.children = [self._start() for _ in range(processes)]
        self.restarts = 0

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self._command, env=self._env, stdin=subprocess.DEVNULL, stdout=sys.stderr,
            start_new_session=True, preexec_fn=die_with_parent,
        )  # fmt: skip

    def keep_alive(self, stop: threading.Event) -> None:
        """Start again every child that ended, until `stop` is set."""
        while not stop.wait(CHECK_EVERY_S):
            for i, child in enumerate(self.children):
                code = child.poll()
                if code is None or stop.is_set():
                    continue
                if self._on_death is not None:
                    self._on_death(child.pid)
                self.children[i] = self._start()
                self.restarts += 1
                how = f"signal {-code}" if code < 0 else f"exit {code}"
                print(
                    f"agentledger workers: process {child.pid} ended ({how}); "
                    f"started {self.children[i].pid}",
                    file=sys.stderr,
                    flush=True,
                )

    def stop(self) -> None:
        stop_children(self.children)


def stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each, then SIGKILL whoever is still there after 15 s."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def wait_for_signal() -> None:
    """Until SIGTERM or SIGINT."""
    done = signalled()
    while not done.wait(0.5):
        time.sleep(0)


def signalled() -> threading.Event:
    """Set on SIGTERM or SIGINT."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    return done

"""`agentledger workers --processes N` keeps N worker processes: one killed with
SIGKILL is started again at once (and said so on stderr); SIGTERM stops them
all."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _until(what: str, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_killed_worker_process_is_started_again_and_sigterm_stops_them_all(
    cli: Cli, tmp_path: Path
) -> None:
    log = tmp_path / "workers.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*AGENTLEDGER, "workers", "--processes", "2"], cwd=cli.cwd, env=cli.env,
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _until("two workers up", lambda: log.read_bytes().count(b"workers up") == 2)
        first = _children(proc.pid)
        assert len(first) == 2
        os.kill(first[0], signal.SIGKILL)
        _until(
            "a new worker process",
            lambda: first[0] not in _children(proc.pid) and len(_children(proc.pid)) == 2,
        )
        _until("it to serve", lambda: log.read_bytes().count(b"workers up") == 3)
        assert f"process {first[0]} ended (signal 9); started".encode() in log.read_bytes()
        now = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        for pid in now:
            _until(
                f"worker {pid} to stop",
                lambda p=pid: not Path(f"/proc/{p}").exists() or _zombie(p),
                15,
            )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True

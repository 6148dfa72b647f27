"""Whether the local Redis service's process is alive (`local_service._alive`): a
daemon that died but was not reaped (a container's pid 1 may never reap it) is
dead, or a command would wait out its whole start timeout on a zombie."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from agentledger.services.adapters.redis.local_service import _alive


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_exited_process_not_yet_reaped_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 20
        while _alive(child.pid):  # running, then a zombie until we wait for it
            assert time.monotonic() < deadline, "an exited child still counts as alive"
            time.sleep(0.02)
        with open(f"/proc/{child.pid}/stat") as stat:
            assert stat.read().rpartition(")")[2].split()[0] == "Z"  # not reaped yet
    finally:
        child.wait()
    assert not _alive(child.pid)


def test_a_running_process_is_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _alive(child.pid)
    finally:
        child.kill()
        child.wait()

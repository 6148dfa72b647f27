"""A small size of the fault-injection suite (`make chaos`), each scenario on a
private redis-server of its own: worker processes SIGKILLed at random, Redis
killed and restarted from its AOF, a frozen lock holder, inbox garbage, two
users' same-named tools, and a Redis outage with the workers alive. It asserts
the issue's zeros: nothing lost, stuck, duplicated or missing, no garbage
accepted or left pending, no call run by another user's code, no run sent to a
human by an outage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "--runs", "24", "--kills", "6", "--processes", "2", "--in-flight", "6", "--kill-every", "0.4",
    "--garbage", "300", "--valid", "10", "--outage", "3",
    "--only", "kills,aof,sigstop,garbage,users,outage",  # `freeze` is left to make chaos
]  # fmt: skip


@pytest.mark.slow
def test_the_chaos_suite_at_a_small_size_keeps_every_zero(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.chaos", *SMALL, "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=480,  # ~60 s alone; far more inside the parallel suite on 2 cores
    )  # fmt: skip
    figures = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    report = "\n".join(json.dumps(f) for f in figures) + "\n" + done.stderr[-3000:]
    assert {f["scenario"] for f in figures} >= {
        "worker SIGKILLs", "Redis SIGKILL + restart from AOF", "SIGSTOPped lock holder",
        "inbox garbage", "two users, same-named tools",
        "Redis down 3s, workers alive",
    }, report  # fmt: skip
    assert len(figures) == 6, report
    for f in figures:
        assert f["failures"] == [], report
        assert (f["lost"], f["stuck"], f["duplicate"], f["missing"]) == (0, 0, 0, 0), report
        assert f["to_human"] == {}, report
    by = {f["scenario"]: f for f in figures}
    assert by["worker SIGKILLs"]["kills"] == 6 and by["worker SIGKILLs"]["ended"] == {"completed": 24}
    assert by["inbox garbage"]["rejected"] == by["inbox garbage"]["garbage"] == 300
    assert by["inbox garbage"]["pending"] == 0 and by["inbox garbage"]["duplicate_runs"] == 0
    assert by["two users, same-named tools"]["cross_executions"] == 0
    assert by["SIGSTOPped lock holder"]["stale_writes_refused"] == 1
    assert done.returncode == 0, report

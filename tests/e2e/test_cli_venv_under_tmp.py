"""`make run PYTHON=<a venv under /tmp>/bin/python`, as a fresh clone under /tmp
does it: the sandbox's own /tmp used to hide that interpreter, and every
`command:` check and `ctx.run` said "python: not found". The fix_tests example
runs pytest in the sandbox from its tool and from its acceptance check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from e2ekit import Cli, copy_example

ROOT = Path(__file__).resolve().parents[2]


def test_the_fix_tests_example_completes_with_a_venv_under_tmp(
    tmp_path: Path, make_cli: Callable[[Path], Cli]
) -> None:
    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "clone" / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True, timeout=120,
    )  # fmt: skip
    cli = make_cli(tmp_path / "work")
    (tmp_path / "work").mkdir()
    example = copy_example("fix_tests", cli.cwd)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "agentledger.services.entrypoints.cli.main", "run", "--json",
         str(example / "spec.yaml")],
        cwd=cli.cwd, env={**cli.env, "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)])}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "completed" and summary["detail"] == "1 acceptance check passed"

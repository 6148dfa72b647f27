"""The modules a sandboxed command's launcher imports run under whatever python the
host has (a root worker's check runs them as another user with the distribution's
python, tests/integration/test_sandbox_hardening.py): they must import without
pydantic, msgpack or redis. A regression there made that test skip, not fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("pydantic", "msgpack", "redis", "dramatiq", "anthropic")


def test_the_sandbox_launcher_imports_without_the_projects_dependencies() -> None:
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in BLOCKED)
        + "from agentledger.services.adapters.tools.process import run_command\n"
        + "from agentledger.services.adapters.tools.sandbox import SandboxPolicy\n"
        + "print('imported')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd="/"
    )
    assert done.stdout.strip() == "imported", done.stderr[-2000:]

"""The wheel, installed in a fresh venv beside a user's project that has its own
`services` package and its own `events` module (common names, and ours before they
became `agentledger.*`): `agentledger run` of the project's spec runs the project's
tool, and the tool imported the project's `services` and `events`, not ours.

The venv (no system site-packages) is kept under .agentledger/wheel-venv with the
dependencies pyproject.toml names, made again when they change (~25 s from a warm pip
cache); each run builds the wheel from a copy of this checkout (~6 s) and reinstalls it
(--no-deps, ~3 s) before the run (~5 s)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from agentledger.services.adapters.redis.local_server import DEFAULT_URL

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / ".agentledger" / "wheel-venv"
PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")
SOURCES = ("pyproject.toml", "README.md", ".pkg", "events", "schemas", "services")

USER_SERVICES = '''\
"""The user's own `services` package (not agentledger's)."""

MINE = "the project's services"
'''
USER_EVENTS = 'MINE = "the project\'s events"\n'
USER_TOOLS = '''\
"""The project's tools: they import the project's own `services` and `events`."""

import json
import sys
from pathlib import Path

import events
import services
from services.greeting import hello

from agentledger import ToolContext, tool


@tool(read_only=True)
def greet(name: str, ctx: ToolContext) -> dict:
    """Greets someone, saying which `services` and `events` it imported."""
    seen = {
        "services": [services.MINE, services.__file__, sys.modules["services"].__file__],
        "events": [events.MINE, events.__file__],
        "agentledger": sys.modules["agentledger"].__file__,
        "greeting": hello(name),
    }
    (Path(__file__).parent / "ran.json").write_text(json.dumps(seen))
    return {"greeting": seen["greeting"]}
'''
SPEC = """\
task: "Greet Ada."
tools: [user_tools]
principal: {id: alice, tenant: t1, scopes: []}
budgets: {max_turns: 3}
model:
  scripted:
    - tool_use: [{id: c1, name: greet, input: {name: Ada}}]
    - end_turn: "Greeted."
"""


def _dependencies() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def _venv() -> Path:
    """The kept venv with our dependencies (not agentledger); its python."""
    wanted = hashlib.sha256("\n".join(_dependencies()).encode()).hexdigest()
    python, ready = KEPT / "bin" / "python", KEPT / "ready"
    if not ready.exists() or ready.read_text() != wanted:
        shutil.rmtree(KEPT, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(KEPT)], check=True, timeout=120)
        subprocess.run([str(python), *PIP, *_dependencies()], check=True, timeout=600)
        ready.write_text(wanted)
    return python


def _wheel(into: Path) -> Path:
    """The wheel of this checkout, built from a copy of what it is made of (the build
    writes build/ and an egg-info beside its sources)."""
    source = into / "source"
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
         "--no-deps", "-w", str(into / "dist"), str(source)],
        check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    [wheel] = (into / "dist").glob("agentledger-*.whl")
    return wheel


def _project(folder: Path) -> Path:
    (folder / "services").mkdir(parents=True)
    (folder / "services" / "__init__.py").write_text(USER_SERVICES)
    (folder / "services" / "greeting.py").write_text(
        "def hello(name):\n    return f'hello {name}'\n"
    )
    (folder / "events.py").write_text(USER_EVENTS)
    (folder / "user_tools.py").write_text(USER_TOOLS)
    (folder / "spec.yaml").write_text(SPEC)
    return folder


@pytest.mark.slow
def test_the_wheel_runs_a_projects_tool_that_has_its_own_services_package(tmp_path: Path) -> None:
    python = _venv()
    wheel = _wheel(tmp_path / "build")
    subprocess.run(
        [str(python), *PIP, "--no-deps", "--force-reinstall", str(wheel)], check=True, timeout=300
    )
    project = _project(tmp_path / "project")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENTLEDGER_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        AGENTLEDGER_PREFIX=f"t-wheel-{uuid.uuid4().hex[:8]}", AGENTLEDGER_STATE_DIR=str(tmp_path / "state"),
        AGENTLEDGER_PROBE_URL=DEFAULT_URL, PYTHONDONTWRITEBYTECODE="1",
    )  # fmt: skip
    agentledger = str(python.with_name("agentledger"))
    try:
        done = subprocess.run(
            [agentledger, "run", "spec.yaml"],
            cwd=project, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:  # the local Redis service the run may have started in the test's state folder
        subprocess.run([agentledger, "local", "stop"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    seen = json.loads((project / "ran.json").read_text())
    mine = str(project / "services" / "__init__.py")
    assert seen["services"] == ["the project's services", mine, mine]
    assert seen["events"] == ["the project's events", str(project / "events.py")]
    assert seen["greeting"] == "hello Ada"
    installed = Path(seen["agentledger"])  # ours is the wheel's, in the venv, not this checkout
    assert KEPT in installed.parents and ROOT / ".pkg" not in installed.parents
    assert "hello Ada" in done.stdout  # the run printed the tool's result
    # the deprecated `agentledger` of the wheel is a namespace portion, never a package
    # that could stand in for the project's: it has no __init__.py
    site = installed.parents[1]
    assert sorted(p.name for p in (site / "services").iterdir() if p.suffix == ".py") == [
        "tools.py"
    ]

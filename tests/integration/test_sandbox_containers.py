"""The sandbox where it cannot work, and where the interpreter lives somewhere
odd: a worker that runs commands tries its sandbox once at start and refuses to
start with one line naming the setting to change; a command check whose
sandbox broke says it was the sandbox, not the command; a venv under /tmp works.

A container's masked /proc is emulated: an outer mount namespace (made as root)
covers one /proc file, then a user namespace whose root is ours runs the
worker. Its copy of that mount is locked, so the kernel refuses it a fresh
/proc — bwrap's "Can't mount proc", as under Docker's and Kubernetes' defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from checkkit import check_app, check_state

from agentledger.schemas.spec import CommandCheck
from agentledger.services.adapters.tools import sandbox, sandbox_probe, usernet
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.checks import run_check
from agentledger.services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MASKABLE = [n for n in ("kcore", "keys", "timer_list") if os.path.exists(f"/proc/{n}")]
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not MASKABLE, reason="the emulation needs root"
)

INSIDE = """
import json, sys
from checkkit import check_app, check_state
from agentledger.schemas.spec import CommandCheck
from agentledger.services.adapters.tools import sandbox_probe
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.checks import run_check
from agentledger.services.settings import Settings
try:
    sandbox_probe.ready(Settings())
    print(json.dumps({"probe": "ready"}))
except ConfigError as exc:
    print(json.dumps({"probe": str(exc), "variable": exc.name}))
verdict = run_check(check_app(), check_state(None), CommandCheck(command="true"))
print(json.dumps({"passed": verdict.passed, "evidence": verdict.evidence}))
"""


def masked_proc(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` run where /proc is masked as a container masks it (see the module's doc)."""
    cover = f'mount --bind /dev/null /proc/{MASKABLE[0]} && exec unshare --user --map-root-user --mount -- "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", cover, "sh", *argv],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT), str(ROOT / "tests" / "integration")]), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
    )  # fmt: skip


@needs_root
def test_under_a_masked_proc_the_probe_refuses_naming_the_setting_and_a_check_blames_the_sandbox() -> (
    None
):
    done = masked_proc(sys.executable, "-c", INSIDE)
    probe, check = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert probe["variable"] == "AGENTLEDGER_SANDBOX"
    assert "Can't mount proc" in probe["probe"] and "procMount: Unmasked" in probe["probe"]
    assert (
        "systempaths=unconfined" in probe["probe"] and "AGENTLEDGER_SANDBOX=off" in probe["probe"]
    )
    assert check["passed"] is False and check["evidence"]["sandbox_failed"] is True
    assert check["evidence"]["reason"].startswith("not run: the sandbox failed, not the command")
    assert "exit_code" not in check["evidence"]  # no exit of the command is made up


@needs_root
@pytest.mark.parametrize("processes", ["1", "2"])  # a supervisor refuses too, not a restart loop
def test_under_a_masked_proc_a_workers_process_refuses_to_start(
    client: redis.Redis, prefix: str, tmp_path: Path, processes: str
) -> None:
    env = {"REDIS_URL": "redis://127.0.0.1:6379/0", "AGENTLEDGER_PREFIX": prefix,
           "AGENTLEDGER_STATE_DIR": str(tmp_path / "state"), "AGENTLEDGER_PROBE_URL": "off"}  # fmt: skip
    done = masked_proc(
        sys.executable, "-m", "agentledger.services.entrypoints.cli.main", "workers", "--pools", "accept",
        "--queue", "q", "--processes", processes, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if "AGENTLEDGER_SANDBOX" in ln]
    assert "bad configuration" in line and "procMount: Unmasked" in line
    assert "Traceback" not in done.stderr


VENV_CHECK = """
import json, sys
from checkkit import check_app, check_state
from agentledger.schemas.spec import CommandCheck
from agentledger.services.adapters.tools import sandbox_probe
from agentledger.services.handlers.checks import run_check
from agentledger.services.settings import Settings
sandbox_probe.ready(Settings())
check = CommandCheck(command="python -c 'import sys; print(sys.prefix)' && python -m pytest --version")
verdict = run_check(check_app(), check_state(sys.argv[1]), check)
print(json.dumps({"passed": verdict.passed, "evidence": verdict.evidence}))
"""


def test_a_venv_under_tmp_runs_a_command_check_with_its_python(tmp_path: Path) -> None:
    assert str(tmp_path).startswith("/tmp/")  # where the sandbox has a /tmp of its own
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True, timeout=120,
    )  # fmt: skip
    ws = tmp_path / "ws"
    ws.mkdir()
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", VENV_CHECK, str(ws)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT), str(ROOT / "tests" / "integration")]), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["passed"] is True, verdict
    assert verdict["evidence"]["stdout_tail"].startswith(str(venv))


@pytest.fixture
def no_python_bound(monkeypatch: pytest.MonkeyPatch) -> object:
    """The interpreter's folders left out of the sandbox (as a /tmp venv was, before)."""
    monkeypatch.setattr(sandbox, "python_paths", lambda: ())
    sandbox_probe._probe.cache_clear()
    yield None
    sandbox_probe._probe.cache_clear()


def test_a_missing_interpreter_is_named_by_the_probe_and_by_a_failing_check(
    no_python_bound: object, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        sandbox_probe.ready(Settings())
    assert caught.value.name == "AGENTLEDGER_SANDBOX"
    assert repr(sys.executable) in str(caught.value) and "exit 127" in str(caught.value)
    verdict = run_check(
        check_app(), check_state(str(tmp_path)), CommandCheck(command="python -c pass")
    )
    assert verdict.passed is False and verdict.evidence["exit_code"] == 127  # type: ignore[attr-defined]
    assert f"this worker's interpreter {sys.executable}" in verdict.evidence["stderr_tail"]  # type: ignore[attr-defined]


def test_network_tools_without_slirp4netns_are_refused_at_start_naming_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = usernet.shutil.which
    monkeypatch.setattr(
        usernet.shutil, "which", lambda name: None if name == "slirp4netns" else real(name)
    )
    with pytest.raises(ConfigError) as caught:
        sandbox_probe.ready(Settings(), network_tools=["fetch_page"])
    message = str(caught.value)
    assert caught.value.name == "AGENTLEDGER_SANDBOX" and "fetch_page" in message
    assert "apt-get install -y slirp4netns" in message
    sandbox_probe.ready(Settings(sandbox="off"), network_tools=["fetch_page"])  # opted out: fine
    sandbox_probe.ready(Settings())  # no network tool: slirp4netns is not needed


def test_the_probe_passes_here_with_and_without_a_network() -> None:
    sandbox_probe.ready(Settings())
    if usernet.missing() is None:
        sandbox_probe.ready(Settings(), network_tools=["fetch_page"])

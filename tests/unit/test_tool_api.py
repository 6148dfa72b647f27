"""The tool author's API: `from agentledger import tool, ToolContext, ToolFailure,
WorkspaceFiles` (and the rest of what `agentledger` exported), imported lazily; the
old path `agentledger` still works for one release, warns, and hands on the very same
objects — in a checkout (where `services/` is our code folder) and from the wheel's
namespace portion (`.pkg/services/`, where no `services/__init__.py` of ours exists)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentledger
from agentledger.services.adapters.tools import context, registry, workspace_files

ROOT = Path(__file__).resolve().parents[2]
API = {
    "Lookup": context, "ToolCancelled": context, "ToolContext": context, "ToolFailure": context,
    "WorkspaceFiles": workspace_files, "check": registry, "file_resource": workspace_files,
    "tool": registry,
}  # fmt: skip


def test_agentledger_exports_the_tool_api_from_the_registry() -> None:
    from agentledger import ToolContext, ToolFailure, WorkspaceFiles, tool

    assert (tool, ToolContext, ToolFailure, WorkspaceFiles) == (
        registry.tool, context.ToolContext, context.ToolFailure, workspace_files.WorkspaceFiles,
    )  # fmt: skip
    assert sorted(agentledger.__all__) == sorted(API)
    for name, home in API.items():
        assert getattr(agentledger, name) is getattr(home, name), name


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'agentledger' has no attribute 'tools'"):
        agentledger.tools  # noqa: B018


def _python(code: str, cwd: Path, *path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # Python's own filters
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_importing_agentledger_loads_nothing_else_of_ours(tmp_path: Path) -> None:
    done = _python(
        "import sys, agentledger; print(sorted(m for m in sys.modules if m.split('.')[0] == 'agentledger'))",
        tmp_path, ROOT / ".pkg",
    )  # fmt: skip
    assert done.stdout.strip() == "['agentledger']", done.stderr


OLD_PATH_USER = """\
    from services.tools import ToolContext, tool  # rename: keep

    @tool(read_only=True)
    def ping(ctx: ToolContext) -> str:
        \"\"\"Answers pong.\"\"\"
        return "pong"
"""
CHECK_OLD_PATH = """\
    import json, sys, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import old_user
    import agentledger, services.tools  # rename: keep
    from agentledger.services.adapters.tools.registry import tool
    print(json.dumps({
        "same": all(getattr(agentledger, n) is getattr(agentledger, n) for n in agentledger.__all__),
        "registry": tool is agentledger.tool and tool is old_user.tool,
        "warnings": [(w.category.__name__, str(w.message), w.filename, w.lineno) for w in caught],
        "services": list(services.__path__),
    }))
"""


@pytest.mark.parametrize("where", ["checkout", "wheel"])
def test_the_old_path_warns_and_hands_on_the_same_objects(tmp_path: Path, where: str) -> None:
    """checkout: the repository root on the path, `services/` our code folder (a regular
    package); wheel: only `.pkg` on it, as site-packages holds it (a namespace portion)."""
    (tmp_path / "old_user.py").write_text(textwrap.dedent(OLD_PATH_USER))
    paths = [ROOT / ".pkg", tmp_path] + ([ROOT] if where == "checkout" else [])
    done = _python(CHECK_OLD_PATH, tmp_path, *paths)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert said["same"] and said["registry"]
    [(category, message, filename, lineno)] = said["warnings"]
    assert category == "DeprecationWarning"
    assert message.startswith("services.tools is deprecated")  # rename: keep
    assert "from agentledger import tool" in message
    assert (filename, lineno) == (str(tmp_path / "old_user.py"), 1)  # the importing line
    expected = ROOT / "services" if where == "checkout" else ROOT / ".pkg" / "services"
    assert said["services"] == [str(expected)]


@pytest.mark.parametrize("shown", [True, False])
def test_a_command_shows_the_old_paths_warning_where_python_would_hide_it(
    tmp_path: Path, shown: bool
) -> None:
    """Python hides a DeprecationWarning raised outside `__main__` (here: in the tool
    module importing the old path); every `agentledger` command shows this one."""
    (tmp_path / "old_user.py").write_text(textwrap.dedent(OLD_PATH_USER))
    call = "show_deprecations()" if shown else "pass"
    done = _python(
        f"from agentledger.services.entrypoints.cli.main import show_deprecations\n{call}\n"
        "import old_user",
        tmp_path, ROOT / ".pkg", tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    warned = f"{tmp_path / 'old_user.py'}:1: DeprecationWarning: services.tools is deprecated"  # rename: keep
    assert (warned in done.stderr) is shown, done.stderr


def test_the_wheels_legacy_services_holds_only_the_shim() -> None:
    legacy = ROOT / ".pkg" / "services"
    assert sorted(p.name for p in legacy.iterdir() if p.name != "__pycache__") == ["tools.py"]
    assert (legacy / "tools.py").resolve() == ROOT / "services" / "tools.py"

"""File and test tools for the fix_tests example, confined to the run's workspace.

Every path is resolved (symlinks included) against the workspace and refused
with `permission_denied` when it lands outside it. The task is to fix the code,
so `write_file` also refuses the tests and pytest's configuration: a model must
not pass the acceptance check by editing what it checks. Resource rules see the
arguments only, not the workspace, so a file is named by its normalised path as
given (`file:calc.py`); the tool body is what enforces confinement."""

import fnmatch
import hashlib
import os
import posixpath
import subprocess
import sys
import tempfile
from pathlib import Path

from services.tools import ToolContext, ToolFailure, tool

MAX_READ_CHARS = 100_000
OUTPUT_TAIL = 2_000
TESTS_TIMEOUT_S = 50.0  # under the tool's own timeout, so we report it ourselves
PROTECTED = (
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
)


def _file(path: str) -> list[str]:
    return [f"file:{posixpath.normpath(path)}"]


def _workspace(ctx: ToolContext) -> Path:
    if not ctx.workspace:
        raise ToolFailure("not_found", "this run has no workspace")
    return Path(ctx.workspace).resolve()


def _inside(ctx: ToolContext, path: str) -> tuple[Path, Path]:
    """The workspace and the resolved target; refuses anything that leaves the workspace."""
    if not path or "\x00" in path:
        raise ToolFailure("invalid_arguments", f"{path!r} is not a usable path")
    root = _workspace(ctx)
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolFailure("permission_denied", f"{path!r} is outside the workspace")
    return root, target


@tool(read_only=True, reads=lambda a: ["file:."], scope="tests:run", timeout_s=60)
def run_tests(ctx: ToolContext) -> dict:
    """Run `python -m pytest -q` in the workspace; returns its exit code and the tail of its output."""
    root = _workspace(ctx)
    # a read-only tool leaves no files behind, and plugins installed next to the
    # worker (pytest-benchmark writes .benchmarks/) are not the workspace's business
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=TESTS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ToolFailure("timeout", f"pytest did not finish in {TESTS_TIMEOUT_S:g}s") from None
    output = done.stdout + done.stderr
    return {
        "exit_code": done.returncode,
        "passed": done.returncode == 0,
        "tail": output[-OUTPUT_TAIL:],
    }


@tool(read_only=True, reads=lambda a: _file(a["path"]), scope="files:read", timeout_s=10)
def read_file(path: str, ctx: ToolContext) -> dict:
    """Read a UTF-8 text file of the workspace; `path` is relative to the workspace."""
    root, target = _inside(ctx, path)
    if not target.exists():
        raise ToolFailure("not_found", f"no file {path!r} in the workspace")
    if not target.is_file():
        raise ToolFailure("invalid_arguments", f"{path!r} is not a file")
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolFailure("invalid_arguments", f"{path!r} is not UTF-8 text") from None
    return {
        "path": target.relative_to(root).as_posix(),
        "content": text[:MAX_READ_CHARS],
        "truncated": len(text) > MAX_READ_CHARS,
    }


@tool(writes=lambda a: _file(a["path"]), scope="files:write", timeout_s=10)
def write_file(path: str, content: str, ctx: ToolContext) -> dict:
    """Replace (or create) a text file of the workspace with `content`, atomically."""
    root, target = _inside(ctx, path)
    if any(fnmatch.fnmatch(target.name, p) for p in PROTECTED):
        raise ToolFailure("permission_denied", f"{path!r} is a test or test setting: fix the code")
    if target.is_dir():
        raise ToolFailure("invalid_arguments", f"{path!r} is a folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    # write beside the target and rename: a crash never leaves a half-written file
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".write-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {
        "path": target.relative_to(root).as_posix(),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }

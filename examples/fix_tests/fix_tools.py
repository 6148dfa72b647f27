"""File and test tools for the fix_tests example, confined to the run's workspace.

Files go through `WorkspaceFiles`: a path is relative and plain, resolved
(symlinks included) inside the workspace, opened without following links;
anything else is refused with a coded error. The task is to fix the code, so
`write_file` also refuses, case-insensitively, the tests, pytest's
configuration and whatever Python would run or load in their place (compiled
files, site hooks); and a write is at most MAX_WRITE_BYTES. `run_tests` runs
pytest with `ctx.run`, in the sandbox: whatever code the model wrote runs with
the workspace (read-only: the tool is) and nothing else; `search_code` greps
there, its arguments after `--`. A file is named by the workspace's folder and
its normalised path (`file:r-…/calc.py` for a run's own copy): the same name on
every host, and two runs' copies are two resources."""

import subprocess
import sys

from agentledger import ToolContext, ToolFailure, WorkspaceFiles, file_resource, tool

MAX_READ_BYTES = 100_000
MAX_WRITE_BYTES = 256_000
OUTPUT_TAIL = 2_000
MAX_MATCHES = 200
TESTS_TIMEOUT_S = 50.0  # under the tool's own timeout, so we report it ourselves
PROTECTED = (
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "__pycache__",  # a compiled test would be run instead of its source
    "*.pyc",
    "*.pth",  # site hooks run at interpreter start
    "sitecustomize.py",
    "usercustomize.py",
)


def _file(path: str, workspace: str | None) -> list[str]:
    return [file_resource(path, workspace)]


def _files(ctx: ToolContext) -> WorkspaceFiles:
    return WorkspaceFiles.of(
        ctx,
        protected=PROTECTED,
        why_protected="tests and test settings are not to be changed; fix the code",
        max_write_bytes=MAX_WRITE_BYTES,
        max_read_bytes=MAX_READ_BYTES,
    )


@tool(read_only=True, reads=lambda a, ws: _file(".", ws), scope="tests:run", timeout_s=60)
def run_tests(ctx: ToolContext) -> dict:
    """Run `python -m pytest -q` in the workspace; returns its exit code and the tail of its output."""
    # a read-only tool leaves no files behind, and plugins installed next to the
    # worker (pytest-benchmark writes .benchmarks/) are not the workspace's business
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        done = ctx.run([sys.executable, "-m", "pytest", "-q"], env=env, timeout_s=TESTS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ToolFailure("timeout", f"pytest did not finish in {TESTS_TIMEOUT_S:g}s") from None
    output = done.stdout + done.stderr
    if done.limit is not None:
        tail = output[-OUTPUT_TAIL:]
        raise ToolFailure(
            "permission_denied", f"the sandbox stopped pytest at {done.limit}: {tail}"
        )
    return {
        "exit_code": done.returncode,
        "passed": done.returncode == 0,
        "tail": output[-OUTPUT_TAIL:],
    }


@tool(read_only=True, reads=lambda a, ws: _file(".", ws), scope="files:read", timeout_s=20)
def search_code(pattern: str, ctx: ToolContext, path: str = ".") -> dict:
    """Lines of the workspace's files (under `path`) that contain `pattern`, a
    plain string (grep -rnIF): at most MAX_MATCHES of them."""
    files = _files(ctx)
    where = "." if path in ("", ".", "./") else files.resolve(path).as_posix()
    if where != "." and not (files.root / where).exists():
        raise ToolFailure("not_found", f"no file or folder {path!r} in the workspace")
    if not pattern or len(pattern) > 1000 or "\n" in pattern or "\x00" in pattern:
        raise ToolFailure(
            "invalid_arguments", "the pattern is empty, too long or has a line break or NUL"
        )
    # `--` ends grep's options: a pattern or a path that starts with '-' is data
    done = ctx.run(["grep", "-rnIF", "--", pattern, where], timeout_s=15)
    if done.returncode not in (0, 1):
        raise ToolFailure("internal", f"grep failed ({done.returncode}): {done.stderr[-500:]}")
    lines = done.stdout.splitlines()
    return {"matches": lines[:MAX_MATCHES], "truncated": len(lines) > MAX_MATCHES}


@tool(read_only=True, reads=lambda a, ws: _file(a["path"], ws), scope="files:read", timeout_s=10)
def read_file(path: str, ctx: ToolContext) -> dict:
    """Read a UTF-8 text file of the workspace; `path` is relative to the workspace."""
    read = _files(ctx).read_text(path)
    return {"path": read.path, "content": read.text, "truncated": read.truncated}


@tool(writes=lambda a, ws: _file(a["path"], ws), scope="files:write", timeout_s=10)
def write_file(path: str, content: str, ctx: ToolContext) -> dict:
    """Replace (or create) a text file of the workspace with `content`, atomically.
    Tests and test settings are protected: fix the code."""
    written = _files(ctx).write_text(path, content)
    return {"path": written.path, "bytes": written.bytes, "sha256": written.sha256}

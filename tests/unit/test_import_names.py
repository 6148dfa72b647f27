"""Our code answers to one import name, `agentledger`. A module imported under a bare
old name (`services.x` beside `agentledger.services.x`) is a second copy of it in the
same process: a second `@tool` registry, classes that are not the same classes. So no
module of ours, and no test, names `events`, `schemas` or `services` bare: not in an
import, not in a string (a `-m` argument, a monkeypatch target); the one exception is
the deprecated shim `services/tools.py` and the test of it (lines marked `rename: keep`).
`.pkg/rename_imports.py` renames them; its `--check` says what is left."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLD = ("events", "schemas", "services")
KEEP = "rename: keep"
SHIM = ROOT / "services" / "tools.py"


def _sources() -> Iterator[Path]:
    for folder in (*OLD, "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path != SHIM and ".agentledger" not in path.parts:
                yield path


def _bare_imports(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in OLD and KEEP not in lines[node.lineno - 1]:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
    return found


def test_no_module_of_ours_imports_a_bare_old_name() -> None:
    found = [line for path in _sources() for line in _bare_imports(path)]
    assert not found, "\n".join(found)


def test_the_rename_has_nothing_left_to_rename() -> None:
    """Strings too: `-m services.x`, monkeypatch targets, pyproject's contracts, the docs."""
    done = subprocess.run(
        [sys.executable, str(ROOT / ".pkg" / "rename_imports.py"), "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"old import names in:\n{done.stdout}{done.stderr}"


def test_importing_every_module_loads_none_under_a_bare_old_name() -> None:
    """Every module of agentledger imported in one process: nothing is loaded twice."""
    code = (
        "import importlib, pkgutil, sys, agentledger\n"
        "for m in pkgutil.walk_packages(agentledger.__path__, 'agentledger.'):\n"
        "    if m.name != 'agentledger.services.tools':  # the shim: imports nothing of its own\n"
        "        importlib.import_module(m.name)\n"
        f"print(sorted(n for n in sys.modules if n.split('.')[0] in {OLD!r}))\n"
        "print(sum(n.startswith('agentledger.') for n in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    bare, loaded = done.stdout.splitlines()
    assert bare == "[]", f"loaded under a bare old name: {bare}"
    assert int(loaded) > 200  # every module was imported (the walk found them)

"""A tool set's fingerprint is the identity of its code: every module its named
modules import from the tool set's own folders counts (by name and content),
whether `fingerprint_of` computes it from the source without importing or a
worker (`load_toolset`) computes it after importing — and they agree, except
when the tools import a module by a computed name, which only the worker sees
and says. Loading happens in a child process: module names are global to a
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentledger.services.adapters.tools.toolset import (
    ToolSetError,
    computing_imports,
    fingerprint_of,
    static_code,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TOOLS = '''\
from agentledger import ToolContext, tool
{imports}


@tool(read_only=True)
def who(ctx: ToolContext) -> dict:
    """Say which helper this is."""
    return {{"who": {who}}}
'''


def tool_folder(
    base: Path, name: str, *, helper: str, imports: str = "import helper", who: str = "helper.WHO"
) -> Path:
    folder = base / name
    folder.mkdir(parents=True)
    (folder / "tools.py").write_text(TOOLS.format(imports=imports, who=who))
    (folder / "helper.py").write_text(f"WHO = {helper!r}\n")
    return folder


def loaded(modules: list[str], paths: list[Path]) -> dict[str, object]:
    """What a worker's `load_toolset` says, in a process of its own."""
    code = textwrap.dedent(f"""
        import json
        from agentledger.services.adapters.tools.toolset import load_toolset
        t = load_toolset({modules!r}, {[str(p) for p in paths]!r})
        print(json.dumps({{"fingerprint": t.fingerprint, "hashed": t.hashed, "dynamic": t.dynamic}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)]), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said: dict[str, object] = json.loads(done.stdout)
    return said


def test_two_tool_sets_that_differ_only_in_a_helper_module_have_two_fingerprints(
    tmp_path: Path,
) -> None:
    a = tool_folder(tmp_path, "a", helper="a")
    b = tool_folder(tmp_path, "b", helper="b")
    assert (a / "tools.py").read_text() == (b / "tools.py").read_text()
    assert fingerprint_of(["tools"], [str(a)]) != fingerprint_of(["tools"], [str(b)])
    assert loaded(["tools"], [a])["fingerprint"] != loaded(["tools"], [b])["fingerprint"]
    assert "helper" in static_code(["tools"], [str(a)])


def test_the_same_code_in_another_folder_has_the_same_fingerprint(tmp_path: Path) -> None:
    here = tool_folder(tmp_path, "here", helper="x")
    there = tool_folder(tmp_path / "elsewhere", "there", helper="x")
    assert fingerprint_of(["tools"], [str(here)]) == fingerprint_of(["tools"], [str(there)])


def test_relative_imports_parents_and_siblings_count_transitively(tmp_path: Path) -> None:
    entry = tmp_path / "src"
    pkg = entry / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tools.py").write_text("from . import util\nfrom .sub.deep import X\n")
    (pkg / "util.py").write_text("import shared\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("X = 1\n")
    (entry / "shared.py").write_text("from third import y\n")
    (entry / "third.py").write_text("y = 1\n")
    (entry / "unrelated.py").write_text("z = 1\n")
    counted = static_code(["pkg.util"], [str(entry)])
    assert {"pkg", "pkg.util", "shared", "third"} <= set(counted)  # a module's parents run too
    assert "unrelated" not in counted
    before = fingerprint_of(["pkg.tools"], [str(entry)])
    (entry / "third.py").write_text("y = 2\n")  # two imports away, in the same folder
    assert fingerprint_of(["pkg.tools"], [str(entry)]) != before


def test_files_the_tools_never_import_do_not_count(tmp_path: Path) -> None:
    """A workspace inside the tool folder (examples/fix_tests/ws holds Python a run
    edits) never moves the fingerprint."""
    folder = tool_folder(tmp_path, "t", helper="x")
    (folder / "ws").mkdir()
    (folder / "ws" / "calc.py").write_text("def add(a, b): return a - b\n")
    before = fingerprint_of(["tools"], [str(folder)])
    (folder / "ws" / "calc.py").write_text("def add(a, b): return a + b\n")
    (folder / "notes.py").write_text("# never imported\n")
    assert fingerprint_of(["tools"], [str(folder)]) == before


def test_modules_outside_the_tool_folders_do_not_count(tmp_path: Path) -> None:
    folder = tool_folder(
        tmp_path,
        "t",
        helper="x",
        imports="import json\nimport helper\nfrom agentledger import ToolFailure",
    )
    assert set(static_code(["tools"], [str(folder)])) == {
        "tools",
        "helper",
        "agentledger.services.adapters.tools.builtin",
    }


def test_fingerprint_of_runs_no_code_of_the_modules_or_their_packages(tmp_path: Path) -> None:
    entry = tmp_path / "src"
    (entry / "pkg").mkdir(parents=True)
    boom = tmp_path / "imported"
    (entry / "pkg" / "__init__.py").write_text(f"open({str(boom)!r}, 'w').write('pkg')\n")
    (entry / "pkg" / "tools.py").write_text(f"open({str(boom)!r}, 'w').write('tools')\n")
    fingerprint_of(["pkg.tools"], [str(entry)])
    assert not boom.exists()
    assert "pkg.tools" not in sys.modules and "pkg" not in sys.modules


def test_a_module_imported_by_a_computed_name_is_found_by_the_worker_and_said(
    tmp_path: Path,
) -> None:
    folder = tool_folder(
        tmp_path,
        "t",
        helper="x",
        imports='import importlib\nhelper = importlib.import_module("hel" + "per")',
    )
    static = fingerprint_of(["tools"], [str(folder)])
    assert "helper" not in static_code(["tools"], [str(folder)])
    assert computing_imports(["tools"], [str(folder)]) == (
        "tools",
    )  # `agentledger toolset` says so
    worker = loaded(["tools"], [folder])
    assert worker["dynamic"] == ["helper"] and "helper" in worker["hashed"]  # type: ignore[operator]
    assert worker["fingerprint"] != static


def test_an_import_by_a_constant_name_is_read_from_the_source(tmp_path: Path) -> None:
    folder = tool_folder(
        tmp_path,
        "t",
        helper="x",
        imports='import importlib\nhelper = importlib.import_module("helper")',
    )
    assert "helper" in static_code(["tools"], [str(folder)])
    assert computing_imports(["tools"], [str(folder)]) == ()
    assert loaded(["tools"], [folder])["dynamic"] == []


@pytest.mark.parametrize(
    ("folder", "module"),
    [("inventory", "inventory_tools"), ("steering", "steer_tools"), ("fix_tests", "fix_tools"),
     ("parallel", "parallel_tools")],
)  # fmt: skip
def test_fingerprint_of_is_the_workers_fingerprint_for_every_example(
    folder: str, module: str
) -> None:
    path = EXAMPLES / folder
    worker = loaded([module], [path])
    assert worker["dynamic"] == []
    assert fingerprint_of([module], [str(path)]) == worker["fingerprint"]


def test_an_installed_package_brings_only_its_own_folder(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages"
    (site / "vendor_tools").mkdir(parents=True)
    (site / "vendor_tools" / "__init__.py").write_text("import other_lib\nfrom . import extra\n")
    (site / "vendor_tools" / "extra.py").write_text("")
    (site / "other_lib.py").write_text("x = 1\n")  # another installed distribution
    counted = set(static_code(["vendor_tools"], [str(site)]))
    assert counted == {
        "vendor_tools",
        "vendor_tools.extra",
        "agentledger.services.adapters.tools.builtin",
    }


def test_a_module_that_is_not_there_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ToolSetError) as refused:
        fingerprint_of(["nowhere_tools"], [str(tmp_path)])
    assert refused.value.module == "nowhere_tools" and "cannot find module" in refused.value.reason


def test_a_library_in_a_virtualenv_inside_the_tool_folder_is_no_dynamic_module(
    tmp_path: Path,
) -> None:
    """A project with its `.venv` beside its tools: what the tools import from
    there is an installed library, not the tool set's code."""
    folder = tool_folder(tmp_path, "proj", helper="x", imports="import helper\nimport vendored_lib")
    site = folder / ".venv" / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    (site / "vendored_lib.py").write_text("x = 1\n")
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.append({str(site)!r})
        from agentledger.services.adapters.tools.toolset import load_toolset
        t = load_toolset(["tools"], [{str(folder)!r}])
        print(json.dumps({{"fingerprint": t.fingerprint, "dynamic": t.dynamic}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)]), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["dynamic"] == [] and said["fingerprint"] == fingerprint_of(["tools"], [str(folder)])

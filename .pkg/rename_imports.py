"""Rename our packages' import names to the one installed name, `agentledger`:
`events.x` -> `agentledger.events.x` (`schemas`, `services` alike), and the tool
author's `services.tools` -> `agentledger`, in every text file of the repository that
git knows (tracked, or new and not ignored): code, tests (their `-m` arguments and
monkeypatch targets too), pyproject.toml (scripts, import-linter contracts), the
Makefile, .ci/, deploy/, docs/, the README and examples/. Then import blocks are sorted
again (`ruff check --select I --fix`) in the Python files it changed, and
deploy/kubernetes/scaledobjects.yaml is rendered again (`make deploy-scalers`: the
streams it names carry the tool sets' fingerprints, which the renamed code changes).

A dotted name is renamed only when its first part after the package is one of that
package's modules or subpackages in this checkout (so `events.append(...)` on a list
stays). Lines holding `rename: keep` are left alone, and so are this folder (`.pkg/`)
and the deprecated shim `services/tools.py`. Running it twice changes nothing the second
time: a renamed name is preceded by `agentledger.` and no rule matches it again.

    python .pkg/rename_imports.py           # rename, print the files changed
    python .pkg/rename_imports.py --check   # change nothing; exit 1 naming what would change
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "schemas", "services")
NAME = "agentledger"
KEEP = "rename: keep"
SKIP_PREFIXES = (".pkg/", "services/tools.py")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".ini", ".cfg", ".txt", ".sh", ".acl"}
TEXT_NAMES = {"Makefile", "Dockerfile", "run"}  # .ci/run, deploy/Dockerfile
# made from the code: the renamed code is the tool sets' code, so their fingerprints change
SCALERS = ROOT / "deploy" / "kubernetes" / "render_scalers.py"


def submodules(package: str) -> frozenset[str]:
    """The modules and subpackages directly inside one of our packages, as on disk now."""
    folder = ROOT / package
    names = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    names |= {p.parent.name for p in folder.glob("*/__init__.py")}
    return frozenset(names)


def rules() -> list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]]:
    modules = {package: submodules(package) for package in PACKAGES}
    either = "|".join(PACKAGES)

    def dotted(m: re.Match[str]) -> str:
        package, first = m.group(1), m.group(2)
        return f"{NAME}.{package}.{first}" if first in modules[package] else m.group(0)

    return [
        # the tool author's API: `from services.tools import tool` -> `from agentledger import tool`
        (re.compile(r"(?<![\w.])services\.tools(?![\w])"), lambda m: NAME),
        # `events.fold`, `services.entrypoints.cli.main`, "services.x.y.attr" (monkeypatch), -m …
        (re.compile(rf"(?<![\w.])({either})\.([A-Za-z_]\w*)"), dotted),
        # `from events import types`
        (
            re.compile(rf"(?<![\w.])from ({either}) import\b"),
            lambda m: f"from {NAME}.{m.group(1)} import",
        ),
        # `mypy events schemas services` (the Makefile's lint, the docs)
        (re.compile(r"\bmypy events schemas services\b"), lambda m: f"mypy -p {NAME}"),
    ]


def importlinter_names(text: str) -> str:
    """pyproject.toml's import-linter sections name bare packages too: `"services"`, and
    `root_packages` lists the three."""
    out: list[str] = []
    section = ""
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[\[?([^\]]+)\]\]?\s*$", line)
        if header:
            section = header.group(1).strip()
        if section.startswith("tool.importlinter") and KEEP not in line:
            if re.match(r"\s*root_packages\s*=", line):
                line = re.sub(r"\[.*\]", f'["{NAME}"]', line)
            else:
                line = re.sub(rf'"({"|".join(PACKAGES)})"', rf'"{NAME}.\1"', line)
        out.append(line)
    return "".join(out)


def rename_text(
    text: str, compiled: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]]
) -> str:
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        if KEEP not in line:
            for pattern, replace in compiled:
                line = pattern.sub(replace, line)
        out.append(line)
    return "".join(out)


def candidates() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    files = []
    for name in sorted(set(filter(None, listed))):
        path = ROOT / name
        if name.startswith(SKIP_PREFIXES) or path.is_symlink() or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    return files


def renamed(*, write: bool) -> list[Path]:
    """The files whose text the rename changes (written when `write`)."""
    compiled = rules()
    changed: list[Path] = []
    for path in candidates():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rename_text(text, compiled)
        if path.name == "pyproject.toml":
            new = importlinter_names(new)
        if new != text:
            changed.append(path)
            if write:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: python .pkg/rename_imports.py [--check]", file=sys.stderr)
        return 2
    changed = renamed(write=not check)
    python = [str(p) for p in changed if p.suffix == ".py"]
    if python and not check:  # the renamed imports may now sort in another order
        subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--quiet", "--select", "I", "--fix", *python],
            cwd=ROOT, check=False,
        )  # fmt: skip
    if changed and not check and SCALERS.exists():  # its streams name the tool sets' fingerprints
        subprocess.run(
            [sys.executable, str(SCALERS)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL
        )
    for path in changed:
        print(path.relative_to(ROOT))
    if check and changed:
        print(f"{len(changed)} files still use the old import names", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

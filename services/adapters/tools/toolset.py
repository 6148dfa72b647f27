"""A worker's tool set: the tool modules it was started with — never a module a
message names — their tools and the built-in ones, and a fingerprint of their
code (module names and a hash of their source files; a package counts with
every `.py` file under it). Runs are bound to a fingerprint when they are
created; a worker with another fingerprint never takes their commands.

`fingerprint_of` computes the same fingerprint from the source files alone,
without importing anything, so `submit` can name the exact code a run needs."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.spec import ToolSpec
from services.adapters.tools.registry import REGISTRY, RegisteredTool
from services.errors import ServiceError

BUILTIN = "services.adapters.tools.builtin"
FINGERPRINT_CHARS = 16


class ToolSetError(ServiceError):
    """A tool module that cannot be found, read or imported, or two tools of one name."""

    def __init__(self, module: str, reason: str):
        self.module = module
        self.reason = reason
        super().__init__(f"tool module {module!r}: {reason}")


@dataclass(frozen=True)
class ToolSet:
    modules: tuple[str, ...]  # sorted; the built-in module is in every set and not listed
    fingerprint: str
    tools: Mapping[str, RegisteredTool]

    def get(self, name: str) -> RegisteredTool | None:
        return self.tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self.tools)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is offered: the modules' tools in the order they were
        defined, then the built-in ones."""
        return tuple(t.spec for t in self.tools.values())

    def offered(self, asked: tuple[str, ...] | list[str]) -> tuple[ToolSpec, ...]:
        """What a run whose spec's `tools:` are `asked` is offered (MCP tools only when asked)."""
        return tuple(t.spec for t in self.tools.values() if t.offered_to(asked))

    def manifest(self) -> dict[str, Any]:
        """What other processes may know of this tool set without its code."""
        return {
            "modules": list(self.modules),
            "tools": [
                {"name": t.spec.name, "read_only": t.spec.read_only, "scope": t.spec.scope}
                for t in self.tools.values()
            ],
        }


def load_toolset(modules: Iterable[str], paths: Sequence[str] = ()) -> ToolSet:
    """Import the modules (looking in `paths` first) and gather their tools."""
    names = _names(modules)
    _add_paths(paths)
    tools: dict[str, RegisteredTool] = {}
    for module in [*names, BUILTIN]:
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure importing user code is the module's problem
            raise ToolSetError(module, f"cannot import it: {type(exc).__name__}: {exc}") from exc
        for t in REGISTRY.of_module(module):
            other = tools.get(t.spec.name)
            if other is not None and other.module != module:
                raise ToolSetError(module, f"tool {t.spec.name!r} is defined by {other.module!r} too")
            tools[t.spec.name] = t
    files = {m: _files_of_loaded(m) for m in [*names, BUILTIN]}
    return ToolSet(names, _fingerprint(files), tools)


def fingerprint_of(modules: Iterable[str], paths: Sequence[str] = ()) -> str:
    """The fingerprint `load_toolset` would give, from the source files alone."""
    names = _names(modules)
    files = {m: _files_unloaded(m, paths) for m in names}
    importlib.import_module(BUILTIN)  # our own module: importing it runs no one else's code
    files[BUILTIN] = _files_of_loaded(BUILTIN)
    return _fingerprint(files)


def _names(modules: Iterable[str]) -> tuple[str, ...]:
    names = tuple(sorted(set(modules) - {BUILTIN}))
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ToolSetError(name, "is not a module name")
    return names


def _add_paths(paths: Sequence[str]) -> None:
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)


def _fingerprint(files: Mapping[str, list[Path]]) -> str:
    digest = hashlib.sha256()
    for module in sorted(files):
        digest.update(module.encode() + b"\0")
        root = _root(files[module])
        for path in files[module]:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def _root(files: list[Path]) -> Path:
    return files[0].parent if len(files) == 1 else Path(*_common(files))


def _common(files: list[Path]) -> tuple[str, ...]:
    parts = [f.parent.parts for f in files]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return tuple(common)


def _files_of_loaded(module: str) -> list[Path]:
    mod = sys.modules[module]
    locations = list(getattr(mod, "__path__", []) or [])
    if locations:
        return _package_files(module, locations)
    origin = getattr(mod, "__file__", None)
    if not origin:
        raise ToolSetError(module, "has no source file")
    return [Path(origin).resolve()]


def _files_unloaded(module: str, paths: Sequence[str]) -> list[Path]:
    try:
        if "." in module:
            spec = importlib.util.find_spec(module)  # imports the parent packages only
        else:
            spec = importlib.machinery.PathFinder.find_spec(module, [*paths, *sys.path])
    except (ImportError, ValueError) as exc:
        raise ToolSetError(module, f"cannot find it: {exc}") from exc
    if spec is None:
        raise ToolSetError(module, f"cannot find it in {[*paths] or 'the Python path'}")
    if spec.submodule_search_locations:
        return _package_files(module, list(spec.submodule_search_locations))
    if not spec.origin or not spec.has_location:
        raise ToolSetError(module, "has no source file")
    return [Path(spec.origin).resolve()]


def _package_files(module: str, locations: list[str]) -> list[Path]:
    found = sorted(
        p.resolve() for loc in locations for p in Path(loc).rglob("*.py") if p.is_file()
    )
    if not found:
        raise ToolSetError(module, "is a package with no source files")
    return found

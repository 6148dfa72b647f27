"""A worker's tool set: the tool modules it was started with — never a module a
message names — their tools and the built-in ones, and a fingerprint of their
code: every module of the tool set's own folders that the named modules import
(`agentledger.services.adapters.tools.closure` says which), each by its name and a hash of
its file. Runs are bound to a fingerprint when they are created; a worker with
another fingerprint never takes their commands.

`fingerprint_of` computes the fingerprint from the source files alone, without
importing anything, so `submit` can name the exact code a run needs. The worker
(`load_toolset`) computes the same, then looks at what importing the modules
loaded: a module of the tool set's folders the source did not name (an import
by a computed name) is added, and the tool set says so (`dynamic`): its
fingerprint is then not `fingerprint_of`'s (`agentledger toolset --load` prints
the worker's)."""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentledger.schemas.spec import ToolSpec
from agentledger.services.adapters.tools.closure import Code, NotFound, code_of
from agentledger.services.adapters.tools.registry import BUILTIN as REGISTRY_BUILTIN
from agentledger.services.adapters.tools.registry import REGISTRY, RegisteredTool
from agentledger.services.errors import ServiceError

BUILTIN = REGISTRY_BUILTIN  # the built-in tools' module, in every tool set
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
    hashed: tuple[str, ...] = ()  # every module the fingerprint covers, sorted
    dynamic: tuple[str, ...] = ()  # of those, the ones only importing found

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
    code = _code(names, paths)
    _add_paths(paths)
    tools: dict[str, RegisteredTool] = {}
    for module in [*names, BUILTIN]:
        _import(module)
        for t in REGISTRY.of_module(module):
            other = tools.get(t.spec.name)
            if other is not None and other.module != module:
                raise ToolSetError(
                    module, f"tool {t.spec.name!r} is defined by {other.module!r} too"
                )
            tools[t.spec.name] = t
    files = dict(code.modules)
    dynamic = _loaded_beyond(code, names)
    files.update(dynamic)
    return ToolSet(
        names,
        _fingerprint(files),
        tools,
        hashed=tuple(sorted(files)),
        dynamic=tuple(sorted(dynamic)),
    )


def fingerprint_of(modules: Iterable[str], paths: Sequence[str] = ()) -> str:
    """The fingerprint `load_toolset` gives, from the source files alone (unless
    the modules import others by computed names: see `ToolSet.dynamic`)."""
    return _fingerprint(static_code(modules, paths))


def static_code(modules: Iterable[str], paths: Sequence[str] = ()) -> dict[str, Path]:
    """The modules `fingerprint_of` covers, by name, with their files."""
    return dict(_code(_names(modules), paths).modules)


def computing_imports(modules: Iterable[str], paths: Sequence[str] = ()) -> tuple[str, ...]:
    """The modules of the tool set that import by a name they compute: what a worker
    imports then may add to its fingerprint (`load_toolset` says, `--load` shows)."""
    return _code(_names(modules), paths).computed


# for each named module, the modules of any folder that importing it loaded
# (kept: a module imported once is not imported again by a second load)
_BROUGHT: dict[str, frozenset[str]] = {}


def _import(module: str) -> None:
    before = set(sys.modules)
    try:
        importlib.import_module(module)
    except Exception as exc:  # any failure importing user code is the module's problem
        raise ToolSetError(module, f"cannot import it: {type(exc).__name__}: {exc}") from exc
    _BROUGHT[module] = _BROUGHT.get(module, frozenset()) | (set(sys.modules) - before)


def _loaded_beyond(code: Code, names: Sequence[str]) -> dict[str, Path]:
    """Modules from the tool set's folders that importing it loaded and its source does not name."""
    found: dict[str, Path] = {}
    for name in sorted(set().union(*(_BROUGHT.get(n, frozenset()) for n in names))):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if name in code.modules or not origin:
            continue
        path = Path(origin).resolve()
        if code.holds(path) and path.is_file():
            found[name] = path
    return found


def _code(names: tuple[str, ...], paths: Sequence[str]) -> Code:
    """The named modules' code, and the built-in module (our own: counted by its file)."""
    try:
        code = code_of(names, [*paths, *sys.path]) if names else Code((), {})
    except NotFound as exc:  # where it looked: the tool paths, then the Python path
        where = f"in {list(dict.fromkeys(paths))} or " if paths else "on "
        raise ToolSetError(exc.module, f"{exc.reason} {where}the Python path") from None
    builtin = Path(importlib.import_module(BUILTIN).__file__ or "").resolve()
    return Code(code.roots, {**code.modules, BUILTIN: builtin}, code.computed)


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


def _fingerprint(files: Mapping[str, Path]) -> str:
    """Over each module's name and the sha256 of its file, in name order: where the
    files are does not count, so the same code has one fingerprint on every host."""
    digest = hashlib.sha256()
    for module in sorted(files):
        digest.update(module.encode() + b"\0")
        digest.update(hashlib.sha256(files[module].read_bytes()).digest())
    return digest.hexdigest()[:FINGERPRINT_CHARS]

"""The code a tool set is made of, found without importing any of it.

The tool set's folders are where its named modules are found: the path entry
each is found in, except the standard library and site-packages, where only
the module's own top-level package folder (or its one file) counts. The code
is the named modules (a package with every `.py` file under it) and, one
after the other, every module they import that resolves to a file in those
folders: `import x`, `from x import y` (and `x.y` when it is a module),
relative imports, `importlib.import_module("x")` and `__import__("x")` with a
constant name, anywhere in a file (inside functions and `try` too: a module
that may be imported counts). Importing `a.b` runs `a/__init__.py`: parents
count too. A module is found the way the import system finds it on the
folders (`PathFinder`), so nothing here runs user code.

Our own packages (agentledger: events, schemas, services) never count: they are the
framework a worker runs, not the tool set (the built-in tools' module is
counted apart by the tool set)."""

from __future__ import annotations

import ast
import importlib.machinery
import site
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path

import agentledger

_HOME = Path(__file__).resolve().parents[3]  # the folder holding our packages
# and `agentledger` itself (in a checkout, .pkg/agentledger: its folders are symlinks to these)
OURS = (
    *(_HOME / name for name in ("events", "schemas", "services")),
    Path(agentledger.__file__).resolve().parent,
)
SOURCE = ".py"


class NotFound(Exception):
    """A named module that is not on the search path or has no file."""

    def __init__(self, module: str, reason: str):
        self.module = module
        self.reason = reason
        super().__init__(f"{module}: {reason}")


@dataclass(frozen=True)
class Root:
    """A folder of the tool set: top-level names are looked up in `entry`, and a
    module counts only when its file is inside `within` (the entry itself, or one
    installed package's folder or file)."""

    entry: Path
    within: Path

    def holds(self, path: Path) -> bool:
        return path == self.within or self.within in path.parents


@dataclass(frozen=True)
class Code:
    roots: tuple[Root, ...]
    modules: dict[str, Path]  # module name -> its file (resolved), every module counted
    computed: tuple[str, ...] = ()  # of those, the ones that import by a computed name

    def holds(self, path: Path) -> bool:
        """Whether `path` is in one of the tool set's folders (and not ours, nor an
        installed library under a folder that is a path entry: a project's `.venv`)."""
        if _ours(path):
            return False
        return any(
            r.holds(path) and (r.within != r.entry or not _installed(path)) for r in self.roots
        )


def code_of(names: Sequence[str], search: Sequence[str]) -> Code:
    """The named modules, looked up on `search` (the worker's: tool paths first,
    then sys.path), and what they import from their folders. NotFound names the
    first module that cannot be found."""
    roots: list[Root] = []
    seeds: dict[str, Path] = {}
    for name in names:
        trail = _walk(name, [str(p) for p in search])
        if not trail:
            raise NotFound(name, f"cannot find module {name!r}")
        root = _root_of(name, trail[0][1])
        if root not in roots:
            roots.append(root)
        for found, spec in trail:
            if (path := _file(spec)) is not None:
                seeds[found] = path
        last_name, last = trail[-1]
        if last.submodule_search_locations:
            seeds.update(_package_files(last_name, last.submodule_search_locations))
        elif _file(last) is None:
            raise NotFound(name, "has no source file")
    modules, computed = _closure(seeds, tuple(roots))
    return Code(tuple(roots), modules, tuple(sorted(computed)))


def _closure(seeds: dict[str, Path], roots: tuple[Root, ...]) -> tuple[dict[str, Path], set[str]]:
    found = {n: p for n, p in seeds.items() if not _ours(p)}
    computed: set[str] = set()
    todo = list(found)
    entries = [str(r.entry) for r in roots]
    while todo:
        name = todo.pop()
        path = found[name]
        names, dynamic = _scan(path, name)
        if dynamic:
            computed.add(name)
        for wanted in sorted(names):
            for sub, spec in _walk(wanted, entries):
                sub_path = _file(spec)
                if sub in found or sub_path is None:
                    continue
                if any(r.holds(sub_path) for r in roots) and not _ours(sub_path):
                    found[sub] = sub_path
                    todo.append(sub)
    return found, computed


def _scan(path: Path, module: str) -> tuple[set[str], bool]:
    """The absolute names of the modules a file may import (and `x.y` for each
    `from x import y`, which is a module or not), and whether it imports by a name
    it computes; none for a file that is not Python source or does not parse (it
    counts by its bytes all the same)."""
    if path.suffix != SOURCE:
        return set(), False
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return set(), False
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    computed = False
    for node in ast.walk(tree):
        match node:
            case ast.Import(names=aliases):
                names.update(a.name for a in aliases)
            case ast.ImportFrom(module=base, names=aliases, level=level):
                full = _absolute(base or "", level, package)
                if full:
                    names.add(full)
                    names.update(f"{full}.{a.name}" for a in aliases if a.name != "*")
            case ast.Call(func=func, args=[ast.Constant(value=str() as wanted), *rest]):
                if _is_import_call(func):
                    names.add(_absolute(wanted.lstrip("."), len(wanted) - len(wanted.lstrip(".")),
                                        _constant(rest) or package) or wanted)  # fmt: skip
            case ast.Call(func=func):
                computed = computed or _is_import_call(func)
    return {n for n in names if n and all(p.isidentifier() for p in n.split("."))}, computed


def _is_import_call(func: ast.expr) -> bool:
    match func:
        case ast.Name(id="__import__") | ast.Attribute(attr="import_module"):
            return True
    return False


def _constant(args: list[ast.expr]) -> str | None:
    match args:
        case [ast.Constant(value=str() as package), *_]:
            return package
    return None


def _absolute(name: str, level: int, package: str) -> str:
    """`from .name import …` seen from `package`: the absolute name ('' when it
    climbs above the top)."""
    if level == 0:
        return name
    parts = package.split(".") if package else []
    if level - 1 > len(parts) - 1 or not parts:
        return ""
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def _walk(name: str, search: list[str]) -> list[tuple[str, ModuleSpec]]:
    """The specs of `name` and each of its parents, top first, as the import system
    finds them on `search` (no parent is imported); as far as they are found."""
    trail: list[tuple[str, ModuleSpec]] = []
    where: list[str] | None = search
    parts = name.split(".")
    for i, part in enumerate(parts):
        if where is None:
            break
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, where)
        except (ImportError, ValueError, OSError):
            spec = None
        if spec is None:
            break
        trail.append((".".join(parts[: i + 1]), spec))
        locations = spec.submodule_search_locations
        where = list(locations) if locations is not None else None
    return trail if len(trail) == len(parts) else []


def _file(spec: ModuleSpec) -> Path | None:
    if not spec.has_location or not spec.origin:
        return None  # a namespace package: no file of its own
    return Path(spec.origin).resolve()


def _root_of(name: str, top: ModuleSpec) -> Root:
    """The folder a top-level module brings: its path entry, unless that is the
    standard library's or site-packages (then only the package itself)."""
    locations = list(top.submodule_search_locations or [])
    own = Path(locations[0]).resolve() if locations else _file(top)
    if own is None:
        raise NotFound(name, "has no source file")
    entry = own.parent
    return Root(entry, own if _is_system(entry) else entry)


def _system_dirs() -> frozenset[Path]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found.update(site.getsitepackages())
    found.add(site.getusersitepackages())
    return frozenset(Path(p).resolve() for p in found)


SYSTEM = _system_dirs()


def _is_system(entry: Path) -> bool:
    return entry in SYSTEM or entry.name in ("site-packages", "dist-packages")


def _installed(path: Path) -> bool:
    return any(p in ("site-packages", "dist-packages") for p in path.parts) or any(
        s in path.parents for s in SYSTEM
    )


def _ours(path: Path) -> bool:
    return any(o in path.parents for o in OURS)


def _package_files(name: str, locations: Iterable[str]) -> dict[str, Path]:
    """Every `.py` file under a named package, by its module name."""
    found: dict[str, Path] = {}
    for loc in locations:
        base = Path(loc)
        for p in sorted(base.rglob(f"*{SOURCE}")):
            if not p.is_file():
                continue
            rel = p.relative_to(base).with_suffix("").parts
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            found[".".join([name, *parts])] = p.resolve()
    if not found:
        raise NotFound(name, "is a package with no source files")
    return found

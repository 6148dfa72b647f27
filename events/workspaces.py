"""Where a published run may work: the workspace rule, as pure decisions over
paths the shell has already resolved (`services/adapters/workspaces/resolve.py`
looks at the disk; nothing here does).

A request names its workspace in `workspace` (absolute) or in its spec's
`workspace` (relative to `base_dir`, which must then be absolute). It is
refused, with a reason that starts with the field, when it resolves (symlinks
followed) to a system folder (/proc, /sys, /dev), outside every workspace root
its publisher may use (the operator's roots and its grant's), to the state
folder, inside it or to one of its ancestors, through a symlink that leaves
the root it had entered, or to something that is not a folder. Whether it
exists is said last, so a refusal tells a publisher nothing of the disk
outside its roots. A workspace that passes is copied for the run unless the
spec says `copy_workspace: false`."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class Asked:
    """The workspace a request asks for: the field that names it, the text it
    gives, and that text as an absolute path (not normalised: `..` and links are
    the resolver's to follow)."""

    field: str  # "workspace" or "spec.workspace"
    given: str
    path: str


@dataclass(frozen=True)
class Resolved:
    """What the shell found: the realpath of the asked path, the realpath after
    each of its components in turn, and whether it is an existing folder."""

    real: str
    steps: tuple[str, ...]
    is_dir: bool


@dataclass(frozen=True)
class Root:
    granted: str  # as the settings or the grant name it
    real: str  # its realpath


def asked_workspace(
    workspace: str | None, spec_workspace: str | None, base_dir: str | None
) -> Asked | str | None:
    """The workspace a request asks for (the request's own overrides the spec's),
    None when it asks for none, or why it cannot be told."""
    if workspace is not None:
        if not posixpath.isabs(workspace):
            return f"workspace: {workspace!r} is not an absolute path"
        return _plain(Asked("workspace", workspace, workspace))
    if spec_workspace is None:
        return None
    if posixpath.isabs(spec_workspace):
        return _plain(Asked("spec.workspace", spec_workspace, spec_workspace))
    if base_dir is None or not posixpath.isabs(base_dir):
        return (
            f"spec.workspace: {spec_workspace!r} is relative, and base_dir "
            f"{base_dir!r} is not an absolute folder to resolve it from"
        )
    joined = posixpath.join(base_dir, spec_workspace)
    return _plain(Asked("spec.workspace", spec_workspace, joined))


def _plain(asked: Asked) -> Asked | str:
    if len(asked.path) > MAX_PATH_CHARS:
        return f"{asked.field}: the path is {len(asked.path):,} characters long (at most {MAX_PATH_CHARS:,})"
    if "\x00" in asked.path:
        return f"{asked.field}: the path has a NUL character"
    return asked


def allowed_roots(settings_roots: Iterable[str], grant_roots: Iterable[str]) -> tuple[str, ...]:
    """A publisher's workspace roots: the operator's, then its grant's, each once."""
    return tuple(dict.fromkeys([*settings_roots, *grant_roots]))


def workspace_refusal(
    who: str, asked: Asked, found: Resolved, *, roots: Sequence[Root], state_dir: str
) -> str | None:
    """Why `who` may not have a run work in `asked` (None: it may). `state_dir`
    is the state folder's realpath."""
    where = f"{asked.field}: {asked.given!r}"
    real = found.real
    # on the way, too: /proc/self/cwd leads anywhere the process stands
    system = next((f for f in SYSTEM_FOLDERS for p in (*found.steps, real) if inside(p, f)), None)
    if system is not None:
        return f"{where} is in {system} ({', '.join(SYSTEM_FOLDERS)} are never workspaces)"
    holding = [r for r in roots if inside(real, r.real)]
    if not holding:
        granted = [r.granted for r in roots] or "none"
        return f"{where} is not inside a workspace root granted to {who!r} (granted: {granted})"
    if real == state_dir:
        return f"{where} is the state folder"
    if inside(real, state_dir):
        return f"{where} is inside the state folder (other runs' workspaces, keys, grants)"
    if inside(state_dir, real):
        return f"{where} holds the state folder"
    if not any(stays_inside(found.steps, r.real) for r in holding):
        return f"{where} goes through a symlink that leads outside its workspace root"
    if not found.is_dir:
        return f"{where} is not a folder"
    return None


def works_in_copy(copy_workspace: bool | None) -> bool:
    """A run works in a copy of its workspace unless its spec says false."""
    return copy_workspace is not False


def inside(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (both normalised absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def stays_inside(steps: Sequence[str], root: str) -> bool:
    """Once a step of the path has entered `root`, no later step leaves it: no
    symlink (or `..`) inside the root leads out of it and back."""
    entered = False
    for step in steps:
        if inside(step, root):
            entered = True
        elif entered:
            return False
    return entered

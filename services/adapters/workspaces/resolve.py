"""What the workspace rule needs to know of the disk: the realpath of an asked
workspace and of each of its components in turn, whether it is a folder, and
the realpaths of the roots and of the state folder. Nothing is decided here."""

from __future__ import annotations

import os
from collections.abc import Iterable

from agentledger.events.workspaces import Asked, Resolved, Root


def resolve(asked: Asked) -> Resolved:
    """The asked path resolved as the kernel would (links and `..` in order)."""
    steps: list[str] = []
    prefix = "/"
    for part in (p for p in asked.path.split("/") if p):
        prefix = os.path.join(prefix, part)
        steps.append(os.path.realpath(prefix))
    real = steps[-1] if steps else "/"
    return Resolved(real=real, steps=tuple(steps) or ("/",), is_dir=_is_folder(real))


def roots(granted: Iterable[str]) -> tuple[Root, ...]:
    """The roots as named, each with its realpath."""
    return tuple(Root(granted=g, real=os.path.realpath(g)) for g in granted)


def real_state_dir(state_dir: str) -> str:
    return os.path.realpath(state_dir)


def _is_folder(real: str) -> bool:
    try:
        return os.path.isdir(real) and not os.path.islink(real)
    except (OSError, ValueError):
        return False

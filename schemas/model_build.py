"""When the data contracts' pydantic models build their validators and serializers
(pydantic's core schemas): when each class is made (the default), or on each one's first
use. Building them is most of what importing the package costs, and a short command
(`status`, `tail`, a control) uses a handful of the hundred.

The CLI's `main` chooses the first use (`defer`) before it imports any model, and only
for a command whose process runs one thread: pydantic's first-use build is not safe
against two threads building one model at once. Every other process (a worker, the
intake, a library user) builds them as the classes are made."""

from __future__ import annotations

_LAZY = [False]


def defer() -> None:
    """Models made from now on build on first use. Call it before importing any: a class
    already made keeps the choice it was made with."""
    _LAZY[0] = True


def deferred() -> bool:
    """The `defer_build` of a model class being made now (its `model_config`)."""
    return _LAZY[0]

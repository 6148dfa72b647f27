"""One tool call's trip through the code, measured (issue 34, point 5;
docs/contributing.md "A tool call's trip"): `PYTHONPATH=$PWD python -m
tests.bench.trip` in a checkout. A run whose model proposes c17, on the memory
adapters of the unit tier (so no Redis adapter file or Lua script is counted),
once with every step queued (RequestModel, then DriveCall) and once carried (one
delivery). Prints the project files executed, the handler-layer functions
entered, and the project frames in `services/` at the lock ask and at each
append: how deep the one door is."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = os.getcwd()
LAYERS = ("events/", "schemas/", "services/")
Stacks = list[tuple[str, list[str]]]


PACKAGE = os.path.join(ROOT, ".pkg", "agentledger")  # the checkout's code, as imported


def _rel(filename: str) -> str | None:
    for top in (PACKAGE, ROOT):
        if filename.startswith(top + os.sep):
            rel = filename[len(top) + 1 :]
            return rel if rel.startswith(LAYERS) else None
    return None


def _stack() -> list[str]:
    frames = traceback.extract_stack()[:-2]
    return [f"{r}:{f.name}" for f in frames if (r := _rel(f.filename)) is not None]


def traced(trip: Callable[[], None], locks: Any, store: Any) -> tuple[set[str], set[str], Stacks]:
    files: set[str] = set()
    handler_functions: set[str] = set()
    stacks: Stacks = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        rel = _rel(frame.f_code.co_filename) if event == "call" else None
        if rel is not None:
            files.add(rel)
            if rel.startswith("services/handlers/"):
                handler_functions.add(f"{rel}:{frame.f_code.co_name}")

    enqueue, append = locks.enqueue, store.append

    def asked(*args: Any, **kwargs: Any) -> Any:
        stacks.append(("lock ask", _stack()))
        return enqueue(*args, **kwargs)

    def appended(*args: Any, **kwargs: Any) -> Any:
        stacks.append(("append", _stack()))
        return append(*args, **kwargs)

    locks.enqueue, store.append = asked, appended
    sys.setprofile(profile)
    try:
        trip()
    finally:
        sys.setprofile(None)
        locks.enqueue, store.append = enqueue, append
    return files, handler_functions, stacks


def measure(*, carried: bool) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
    from handlerkit import call, carrying, new_unit, spec

    from agentledger.events.commands import DriveCall, RequestModel

    folder = Path(tempfile.mkdtemp())
    turns = ({"tool_use": [call("c17", "kv_write", key="A1", value="1")]}, {"end_turn": "done"})
    for i in range(2):  # the first run warms imports and caches; the second is measured
        unit = new_unit(
            folder / f"ws{i}", carry=carrying() if carried else None, lock_lease_s=600.0
        )
        unit.create("run-a", spec(*turns))

        def trip() -> None:
            unit.deliver(RequestModel("run-a"))  # noqa: B023 (run at once, in this iteration)
            if not carried:
                unit.take()  # noqa: B023
                unit.deliver(DriveCall("run-a", "c17"))  # noqa: B023

        files, functions, stacks = traced(trip, unit.app.locks, unit.app.runs.store)
    print("== carried (one delivery)" if carried else "== queued (RequestModel, then DriveCall)")
    layers = " ".join(f"{layer}{sum(f.startswith(layer) for f in files)}" for layer in LAYERS)
    print(f"project files executed: {len(files)} ({layers})")
    print(f"handler-layer functions entered: {len(functions)}")
    for what, stack in stacks[:4]:
        shell = [s for s in stack if s.startswith("services/")]
        print(f"  {what}: {len(shell)} frames: " + " > ".join(s.split("/")[-1] for s in shell))


if __name__ == "__main__":
    measure(carried=False)
    measure(carried=True)

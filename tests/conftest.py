"""How `make test` spreads the suite over its xdist workers (`--dist loadgroup`).

Every test is a unit of its own, handed to whichever worker is free, except the
tests sharing an expensive fixture: the tests of a module with a module-scoped
fixture go to one worker together (else each worker that gets one of them sets
the fixture up again: the hostile calls' two runs, a module's CLI runs), and so
do the tests on one session's local Redis Cluster. The tests marked `slow` are
handed out first, so that none of them starts last while the others idle."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The code under test is this checkout's: `agentledger` is .pkg/agentledger (its folders are
# symlinks to events/, schemas/, services/), first on the path of this process and of every
# child it starts, whatever agentledger an editable install elsewhere put on the path.
PACKAGE_PATH = str(Path(__file__).resolve().parents[1] / ".pkg")
if sys.path[:1] != [PACKAGE_PATH]:
    sys.path.insert(0, PACKAGE_PATH)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [
        PACKAGE_PATH,
        *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != PACKAGE_PATH),
    ]
)

SHARED_SESSION_FIXTURES = frozenset({"local_cluster"})  # six redis-servers each
# Fork bombs share the per-user process limit (RLIMIT_NPROC counts every process of
# the uid, across sandboxes): two at once on two workers can make one bomb's forks
# fail on the other's count before its own limit is reached. They run on one worker,
# with the module of the hostile calls (whose runs hold a bomb too).
FORK_BOMBS = "tests/e2e/test_hostile_calls.py"


def _group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("fork_bomb") is not None:
        return FORK_BOMBS
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.scope in ("module", "package", "class"):
                return item.nodeid.split("::")[0]
            if fixturedef.scope == "session" and name in SHARED_SESSION_FIXTURES:
                return f"{fixturedef.baseid or 'tests'}::{name}"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    grouped = set()
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            grouped.add(item.nodeid)
    # stable: a module sharing a fixture keeps its tests together and in order
    items.sort(key=lambda i: i.nodeid in grouped or i.get_closest_marker("slow") is None)

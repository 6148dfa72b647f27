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
from collections import Counter
from pathlib import Path

import pytest
from _pytest.fixtures import FuncFixtureInfo

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
# The longest units of `make test`, longest first (a module's group, or one test's node
# id), from `--durations=0` of a whole run on 2 cores (load ~8): seconds a unit beside.
LONGEST: tuple[str, ...] = (
    "tests/e2e/test_provider_suite.py::provider=0",  # ~130 (the Anthropic half)
    "tests/e2e/cluster/test_cli_on_cluster.py::local_cluster",  # 115
    "tests/e2e/test_cli_bad_inputs.py",  # 112
    "tests/e2e/test_provider_suite.py::provider=1",  # ~110 (the OpenAI half)
    "tests/e2e/test_hostile_calls.py",  # 85
    # (the three marked * from `pytest -n 2 tests/e2e --durations=0`, load ~7: not listed before)
    "tests/e2e/cluster/test_failover.py::"
    "test_a_master_killed_under_load_loses_no_run_and_repeats_no_write",  # 93 *
    "tests/e2e/test_cli_output.py",  # 80
    "tests/e2e/test_hostile_replays.py",  # 71
    "tests/e2e/test_cli_anthropic.py",  # 70
    "tests/e2e/test_cli_claude.py::"
    "test_after_a_refusal_and_a_reply_the_refused_turn_is_not_sent_again",  # 73 *
    "tests/e2e/test_cli_claude.py::"
    "test_a_60_turn_run_is_cached_on_a_stable_prefix_and_costs_less",  # 59 *
    "tests/integration/test_wheel_install.py::"
    "test_the_wheel_runs_a_projects_tool_that_has_its_own_services_package",  # 68
    "tests/e2e/cluster/test_controls_on_cluster.py::local_cluster",  # 58
    "tests/e2e/test_cli_bounds.py::"
    "test_another_tenants_run_completes_while_four_hostile_checks_hold_their_share",  # 57
    "tests/e2e/test_cli_two_users.py::"
    "test_two_state_folders_running_at_once_on_one_redis_all_complete",  # 56
    "tests/e2e/test_cli_errors.py",  # 54
    "tests/e2e/test_hostile_web.py",  # 51
)
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
                return item.nodeid.split("::")[0] + _instance(item, info)
            if fixturedef.scope == "session" and name in SHARED_SESSION_FIXTURES:
                return f"{item.nodeid.split('::')[0]}::{name}"
    return None


def _instance(item: pytest.Item, info: FuncFixtureInfo) -> str:
    """Which instance of the module's parametrised fixtures the test has: a module-scoped
    fixture with params is set up once a param, so the tests of each param are a group of
    their own (the provider suite's Anthropic and OpenAI halves go to two workers)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ""
    shared = [
        f"::{name}={callspec.indices[name]}"
        for name in info.names_closure
        if name in callspec.indices
        and any(
            d.scope in ("module", "package", "class") for d in info.name2fixturedefs.get(name, ())
        )
    ]
    return "".join(shared)  # no "]": xdist takes a node id ending in one for ungrouped


def pytest_configure(config: pytest.Config) -> None:
    # the units go out in the order of the collection (below), not by their number of tests
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False


def _order(items: list[pytest.Item], grouped: dict[str, str]) -> None:
    """Longest units first, a unit's tests together and in their order."""
    unit = {i.nodeid: grouped.get(i.nodeid, i.nodeid) for i in items}
    size = Counter(unit.values())
    groups = set(grouped.values())
    first = {u: n for n, u in reversed(list(enumerate(unit.values())))}

    def rank(item: pytest.Item) -> tuple[int, int, int]:
        u = unit[item.nodeid]
        if u in LONGEST:
            return (LONGEST.index(u), 0, first[u])
        slow = item.get_closest_marker("slow") is not None
        return (len(LONGEST), -size[u] if u in groups else int(not slow), first[u])

    items.sort(key=rank)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    grouped: dict[str, str] = {}
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            grouped[item.nodeid] = group
    _order(items, grouped)

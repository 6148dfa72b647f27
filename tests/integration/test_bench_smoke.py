"""A tiny run of the benchmark (`tests.bench`) on a private redis-server it
starts and stops: one long run on one worker process and the blocking stream
hop of the floor. Only ratios are checked, never absolute times, so a slow or
busy machine does not fail it; what it catches is a load that grows with the
log again, orchestration that stops being a small multiple of a stream hop,
or a step that starts costing many more Redis commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger.services.settings import Settings
from tests.bench import floor, ours
from tests.bench.harness import private_bench
from tests.bench.plan import WINDOW

CALLS = 3 * WINDOW
MAX_GROWTH = 2.0  # turns 41-60 / turns 1-20; a load that folds the whole log made it ~4
MAX_OVERHEAD_IN_HOPS = 150  # ms per tool call / blocking stream round trip (about 60 here)
MAX_COMMANDS_PER_CALL = 60  # about 38 sent by the worker per tool call here
MAX_ROUND_TRIPS_PER_CALL = 40  # about 24


TRIES = 3  # long runs at most: a busy machine slows some turns, never all three runs' fastest


def quick_growth(turn_ms: list[float]) -> float:
    """The last window's fast turns over the first's (the lower quartile of each): a
    load that grows with the log slows every turn of the last window, a busy
    machine only some of them."""

    def quartile(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 4]

    return quartile(turn_ms[-WINDOW:]) / quartile(turn_ms[:WINDOW])


@pytest.mark.slow
def test_a_tiny_bench_keeps_its_ratios(tmp_path: Path) -> None:
    growths: list[tuple[float, list[float]]] = []
    with private_bench(Settings(), tmp_path, "everysec") as bench:
        hop_ms = floor.stream_round_trip(bench, "smoke-floor", 200)
        for attempt in range(TRIES):
            run = ours.sequential(bench, f"smoke{attempt}", CALLS, 0)["long_run"]
            growths.append((quick_growth(run["turn_ms"]), run["turn_ms"]))
            if growths[-1][0] < MAX_GROWTH:
                break

    assert min(g for g, _ in growths) < MAX_GROWTH, growths
    assert run["ms_per_call"] / hop_ms < MAX_OVERHEAD_IN_HOPS, (run["ms_per_call"], hop_ms)
    assert run["commands"] < MAX_COMMANDS_PER_CALL, run["by_command"]
    assert run["round_trips"] < MAX_ROUND_TRIPS_PER_CALL, run["by_command"]


def test_every_bench_module_imports() -> None:
    """`make bench` runs modules the tiny bench does not: a rename elsewhere must fail here."""
    import importlib
    import pkgutil

    import tests.bench

    for info in pkgutil.iter_modules(tests.bench.__path__):
        importlib.import_module(f"tests.bench.{info.name}")

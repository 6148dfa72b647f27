"""The Grafana dashboard in deploy/grafana/ is built on what we export: every
panel's every query names only series a worker process or a scrape's Redis
reading exports (tests/e2e/test_operations.py scrapes them all from real workers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentledger.services.adapters.metrics.instruments import Instruments
from agentledger.services.adapters.metrics.scrape import Reading, RedisCollector, Served

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "agentledger.json"
NAME = re.compile(r"\bagentledger_[a-z_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


class StillReading(RedisCollector):
    """The scrape's collector with a reading in hand (no Redis)."""

    def __init__(self) -> None:
        self.fixed = Reading({"running_tools": 1, "ended": 2},
                             [(Served("default", "tools"), {"lag": 0, "pending": 0, "delayed": 0,
                                                            "dead": 0})], 0,
                             {"svc:payments": (1, 2, None)})  # fmt: skip

    def reading(self) -> Reading:
        return self.fixed


def exported() -> set[str]:
    """Every series name a scrape can show."""
    families = [*Instruments().registry.collect(), *StillReading().collect()]
    return {f.name + suffix for f in families for suffix in SUFFIXES[f.type]}


def queries() -> list[tuple[str, str]]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"] if panel["type"] != "row"
        for target in panel["targets"]
    ]  # fmt: skip


def dashboard_names() -> set[str]:
    return {name for _, expr in queries() for name in NAME.findall(expr)}


def test_every_panel_queries_only_series_we_export() -> None:
    names = exported()
    unknown = {
        (title, n) for title, expr in queries() for n in NAME.findall(expr) if n not in names
    }
    assert not unknown


def test_every_panel_has_a_query_and_the_new_families_are_all_on_the_dashboard() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    used = dashboard_names()
    for family in ("tool_call_seconds", "model_call_seconds", "model_call_tokens",
                   "lock_wait_seconds", "queue_wait_seconds", "run_seconds"):  # fmt: skip
        assert f"agentledger_{family}_bucket" in used
    assert {"agentledger_pool_threads_busy", "agentledger_pool_threads",
            "agentledger_tenant_cost_usd_total"} <= used  # fmt: skip


def test_a_name_we_do_not_export_is_caught() -> None:
    assert "agentledger_tool_call_latency_bucket" not in exported()
    assert "agentledger_tool_call_seconds_bucket" in exported()

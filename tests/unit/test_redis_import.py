"""A CLI process imports redis-py with OpenTelemetry's metrics hidden from it
(services/adapters/redis/first_import.py): what redis-py 7.2+ imports at
start-up for metrics we never turn on. Each case runs in a fresh interpreter:
this one has imported everything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentledger.services.adapters.redis.first_import import HIDDEN

FIRST = "from agentledger.services.adapters.redis.first_import import import_redis; import_redis()"


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_redis_is_imported_without_opentelemetry_metrics() -> None:
    code = f"import sys; {FIRST}; import agentledger.services.entrypoints.cli.execute, redis; "
    code += f"print(sorted(m for m in {HIDDEN!r} if m in sys.modules), redis.Redis.__name__)"
    assert _python(code) == "[] Redis"


@pytest.mark.parametrize("module", HIDDEN)
def test_the_hidden_modules_import_as_usual_afterwards(module: str) -> None:
    code = f"import importlib; {FIRST}; print(importlib.import_module({module!r}).__name__)"
    assert _python(code) == module


def test_a_process_that_imported_them_first_is_left_alone() -> None:
    code = (
        f"import sys, opentelemetry.sdk.metrics; {FIRST}; import redis.observability.metrics as m"
    )
    assert _python(code + "; print(m.OTEL_AVAILABLE)") == "True"

"""The process's first `import redis`, with OpenTelemetry's metrics hidden from it.

redis-py 7.2+ imports the OpenTelemetry metrics SDK at import time whenever it
is installed (it is: our trace export needs OpenTelemetry's trace SDK) to offer
metrics we never turn on: a tenth of a CLI command's start-up CPU. Hidden,
redis-py sees OpenTelemetry metrics as absent and keeps them off, as they were.
Nothing is poisoned: importing the hidden modules afterwards works as usual. A
process that imported either already (a host application) is left alone."""

from __future__ import annotations

import sys

HIDDEN = ("opentelemetry.metrics", "opentelemetry.sdk.metrics")


def import_redis() -> None:
    if "redis" in sys.modules or any(name in sys.modules for name in HIDDEN):
        return
    for name in HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]  # importing it raises ImportError
    try:
        import redis  # noqa: F401
    finally:
        for name in HIDDEN:
            del sys.modules[name]

"""The names users choose: task queues, publishers and run ids. Plain patterns, in one
place for the models that check them and for the CLI's argument parser, which
checks them before any model is built."""

from __future__ import annotations

QUEUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A task queue's name: it goes into stream names and dramatiq queue names."""

PUBLISHER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""A run's id (`r-<time><random>.s<shard>` when the intake makes one): it goes into key names."""

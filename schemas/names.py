"""The names users choose: task queues and publishers. Plain patterns, in one
place for the models that check them and for the CLI's argument parser, which
checks them before any model is built."""

from __future__ import annotations

QUEUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A task queue's name: it goes into stream names and dramatiq queue names."""

PUBLISHER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

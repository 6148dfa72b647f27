"""Idempotent writes on the cluster: operation keys, the ledger, late outcomes."""

from test_idempotency_on_redis import *  # noqa: F403

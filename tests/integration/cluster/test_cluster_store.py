"""The event store's contract suite and the Redis store's own tests, on the cluster."""

from test_redis_store import *  # noqa: F403
from test_store_contract import *  # noqa: F403

"""The sweeper on the cluster: idle live runs found per shard and re-driven."""

from test_sweeper_on_redis import *  # noqa: F403

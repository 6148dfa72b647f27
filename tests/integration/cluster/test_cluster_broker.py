"""The Streams broker on the cluster: its queue streams sit in several slots, so
each is read by its own blocking XREADGROUP (`SlotReads`); every message once,
dead letters, delays, takeovers of a killed worker's messages, shards moving
between processes. (The stock dramatiq broker cannot run on a cluster: its
comparison stays on the plain Redis.)"""

from collections.abc import Iterator

import pytest
import test_streams_broker
from test_streams_broker import *  # noqa: F403


@pytest.fixture(autouse=True)
def _on_the_cluster(redis_url: str) -> Iterator[None]:
    """The suite's own client (and the workers it spawns) use the cluster's address."""
    kept, test_streams_broker.URL = test_streams_broker.URL, redis_url
    yield
    test_streams_broker.URL = kept

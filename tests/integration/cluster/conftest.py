"""The integration tests on a real local Redis Cluster: 3 masters, each with a
replica, started once for the session on free ports and stopped by pid. The
fixtures of the parent folder take the cluster's address, so a test module
here that imports a suite from there runs it, unchanged, on the cluster
through the cluster client (`agentledger.services.adapters.redis.client`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from clusterkit import LocalCluster, start_cluster

from agentledger.services.adapters.redis.client import is_cluster, redis_client
from agentledger.services.adapters.redis.local_server import start_server


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"), masters=3, replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_url(local_cluster: LocalCluster) -> str:
    return local_cluster.url


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis_client(redis_url)
    assert is_cluster(c), "the client of a cluster node must be the cluster client"
    yield c
    c.close()


@pytest.fixture(scope="session")
def redis_url_plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain (not cluster) redis-server of our own, beside the cluster."""
    server = start_server(tmp_path_factory.mktemp("plain"))
    try:
        yield server.url
    finally:
        server.stop()

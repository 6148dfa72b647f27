"""The client is chosen by the server: any node of a cluster (a replica too)
gives the cluster client, a plain server the plain one (and nothing else
changes for it)."""

from __future__ import annotations

import redis
from clusterkit import LocalCluster
from redis.cluster import RedisCluster

from agentledger.services.adapters.redis.client import is_cluster, node_client, redis_client


def test_every_node_of_the_cluster_gives_the_cluster_client(local_cluster: LocalCluster) -> None:
    for node in local_cluster.nodes:
        client = redis_client(node.url)
        try:
            assert isinstance(client, RedisCluster) and is_cluster(client)
            client.set("{probe}:k", node.port)  # routed to the slot's master, wherever it is
            assert client.get("{probe}:k") == str(node.port).encode()
        finally:
            client.close()


def test_a_plain_server_gives_the_plain_client(redis_url_plain: str) -> None:
    client = redis_client(redis_url_plain)
    try:
        assert type(client) is redis.Redis and not is_cluster(client)
        assert node_client(client, "any") is client
    finally:
        client.close()

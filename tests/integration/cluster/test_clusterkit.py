"""The local cluster's own start-up (`clusterkit`): a node whose port was taken
between the free-port check and its bind is started again on other ports, and
cluster ports sit below the ephemeral range where the kernel allows."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import clusterkit


@pytest.fixture
def bus_taken() -> Iterator[int]:
    """A cluster port whose bus port (+10000) someone else listens on."""
    with socket.socket() as holder:
        port = clusterkit.free_cluster_port()
        holder.bind(("127.0.0.1", port + 10000))
        holder.listen()
        yield port


def test_a_node_that_cannot_listen_is_started_again_on_other_ports(
    tmp_path: Path, bus_taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = [bus_taken]
    free = clusterkit.free_cluster_port
    monkeypatch.setattr(
        clusterkit, "free_cluster_port", lambda: offered.pop() if offered else free()
    )

    node = clusterkit._answering_node(tmp_path / "n0", fsync="everysec")
    try:
        assert node.port != bus_taken and node.client().ping()
        assert "Address already in use" in (tmp_path / "n0" / "redis.log").read_text()
    finally:
        node.process.terminate()
        node.process.wait(timeout=10)


def test_cluster_ports_and_their_bus_ports_are_below_the_ephemeral_range() -> None:
    first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if first < 22001:
        pytest.skip(f"this kernel hands out ephemeral ports from {first}: no room below it")

    ports = [clusterkit.free_cluster_port() for _ in range(50)]

    assert all(10000 <= p and p + 10000 < first for p in ports)

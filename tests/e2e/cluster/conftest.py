"""The end-to-end tests on a real local Redis Cluster (3 masters, 3 replicas),
started once for these tests on free ports and stopped by pid. Each CLI gets
REDIS_URL = one node's address (any node works: the CLI finds the cluster)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from e2ekit import Cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "cluster"))
from clusterkit import LocalCluster, start_cluster  # noqa: E402


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("e2e-cluster"), masters=3, replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def ccli(tmp_path: Path, make_cli: Callable[[Path], Cli], local_cluster: LocalCluster) -> Cli:
    """A CLI in its own folder whose REDIS_URL is a node of the cluster."""
    made = make_cli(tmp_path)
    made.env["REDIS_URL"] = local_cluster.url
    return made

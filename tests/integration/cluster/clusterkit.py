"""A real local Redis Cluster for the tests and the bench: `masters` redis-server
processes with `--cluster-enabled yes` on free ports (plus one replica per
master when asked), joined by `redis-cli --cluster create … --cluster-yes`,
stopped by pid. Nothing here touches the shared server on 6379."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from agentledger.services.adapters.redis.local_server import redis_server_binary


@dataclass
class Node:
    port: int
    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def role(self) -> str:
        return str(self.client().info("replication")["role"])

    def restart(self) -> None:
        """Start the node again from its folder (nodes.conf, AOF): it rejoins the
        cluster, as a replica of whoever took its slots over."""
        self.process = subprocess.Popen(
            self.process.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # type: ignore[arg-type]
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class LocalCluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Any node's address works: the client finds the others."""
        return self.nodes[0].url

    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.process.poll() is None and n.role() == "master"]

    def stop(self) -> None:
        for n in self.nodes:
            if n.process.poll() is None:
                n.process.terminate()
        for n in self.nodes:
            try:
                n.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                n.process.kill()
                n.process.wait()


def _redis_cli() -> str:
    beside = Path(redis_server_binary()).with_name("redis-cli")
    found = str(beside) if beside.exists() else shutil.which("redis-cli")
    if not found:
        raise RuntimeError("no redis-cli beside redis-server or on PATH")
    return found


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port() -> int:
    """A free port whose bus port (+10000) is free too, both below the kernel's range
    of ephemeral ports where it allows: there no outgoing connection and no private
    redis-server (`free_port` binds port 0) is handed one between this check and the
    node's bind. A node that loses the race anyway is started again (`_answering_node`)."""
    low, high = _below_ephemeral()
    while True:
        port = random.randint(low, high)
        if _bindable(port) and _bindable(port + 10000):
            return port


def _below_ephemeral() -> tuple[int, int]:
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768  # Linux's default
    high = first - 10001
    return (10000, high) if high >= 12000 else (20000, 45000)


def _start_node(folder: Path, *, fsync: str) -> Node:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_cluster_port()
    args = [
        redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
        "--dir", str(folder), "--cluster-enabled", "yes",
        "--cluster-config-file", str(folder / "nodes.conf"),
        "--cluster-node-timeout", "1000", "--appendonly", "yes", "--appendfsync", fsync,
        "--save", "", "--daemonize", "no", "--logfile", str(folder / "redis.log"),
    ]  # fmt: skip
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return Node(port, process, folder)


def _answering_node(folder: Path, *, fsync: str, attempts: int = 5) -> Node:
    """A node that answers a ping. One that exits first could not listen (its port or
    bus port was taken after `free_cluster_port` looked): it is started again on
    other ports, in a folder of its own."""
    for attempt in range(attempts):
        node = _start_node(
            folder if attempt == 0 else folder.with_name(f"{folder.name}-{attempt}"), fsync=fsync
        )

        def answers(node: Node = node) -> bool:
            if node.process.poll() is not None:
                raise _Exited()
            return bool(node.client().ping())

        try:
            _wait(answers, f"node {node.port} answering")
            return node
        except _Exited:
            continue
    raise RuntimeError(f"local cluster: no node of {folder} listened in {attempts} attempts")


class _Exited(Exception):
    """The node's process ended before it answered."""


def _wait(check: object, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"local cluster: {what} within {timeout_s} s")
        time.sleep(0.05)


def start_cluster(
    folder: Path, *, masters: int = 3, replicas: int = 0, fsync: str = "everysec"
) -> LocalCluster:
    cluster = LocalCluster()
    try:
        for i in range(masters * (1 + replicas)):
            cluster.nodes.append(_answering_node(folder / f"n{i}", fsync=fsync))
        addresses = [f"127.0.0.1:{n.port}" for n in cluster.nodes]
        subprocess.run(
            [_redis_cli(), "--cluster", "create", *addresses,
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

        def ready() -> bool:
            for n in cluster.nodes:
                info = n.client().cluster("info")
                if info.get("cluster_state") != "ok":
                    return False
            if replicas:
                links = [n.client().info("replication") for n in cluster.nodes]
                up = sum(
                    1 for i in links if i["role"] == "slave" and i["master_link_status"] == "up"
                )
                return up == masters * replicas
            return True

        _wait(ready, "every node ok and every replica in sync")
        return cluster
    except BaseException:
        cluster.stop()
        raise

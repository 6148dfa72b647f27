"""The operations port (`workers --metrics-port`) listens on 127.0.0.1 unless
`--metrics-host` says otherwise: the metrics name queues, tool sets and counts,
and nothing off this machine should read them unless the operator says so."""

from __future__ import annotations

import socket

from prometheus_client import CollectorRegistry

from agentledger.services.adapters.metrics.server import OpsServer
from agentledger.services.entrypoints.cli.parser import parser


def healthy() -> str | None:
    return None


def test_the_metrics_port_listens_on_loopback_by_default() -> None:
    ops = OpsServer(CollectorRegistry(), port=0, live=healthy, ready=healthy)
    try:
        assert ops.httpd.server_address[0] == "127.0.0.1"
        assert ops.where == f"port {ops.port} of 127.0.0.1"
    finally:
        ops.httpd.server_close()


def test_the_metrics_port_listens_where_it_is_told() -> None:
    ops = OpsServer(CollectorRegistry(), port=0, live=healthy, ready=healthy, host="0.0.0.0")
    try:
        assert ops.httpd.server_address[0] == "0.0.0.0"
    finally:
        ops.httpd.server_close()
    if socket.has_ipv6:
        six = OpsServer(CollectorRegistry(), port=0, live=healthy, ready=healthy, host="::1")
        six.httpd.server_close()


def test_workers_metrics_host_is_loopback_unless_said() -> None:
    args = parser().parse_args(["workers", "--metrics-port", "9100"])
    assert (args.metrics_port, args.metrics_host) == (9100, "127.0.0.1")
    args = parser().parse_args(["workers", "--metrics-port", "9100", "--metrics-host", "0.0.0.0"])
    assert args.metrics_host == "0.0.0.0"

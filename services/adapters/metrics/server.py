"""The operations port of `agentledger workers --metrics-port P`: `/metrics`
(Prometheus text), `/healthz` (liveness: the worker processes and their threads
are alive and beating) and `/readyz` (readiness: that, and Redis answers). A
small threaded HTTP server on its own daemon thread; each probe answers 200 or
503 with one line saying why. It listens on 127.0.0.1 unless told otherwise
(`--metrics-host`): the metrics name queues, tool sets and run counts."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], str | None]  # None: healthy; else what is wrong
LOOPBACK = "127.0.0.1"  # the default: this machine only; a scraper elsewhere needs it said


class OpsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        port: int,
        live: Check,
        ready: Check,
        host: str = LOOPBACK,
    ) -> None:
        handler = _handler(registry, live, ready)
        server = _Server6 if ":" in host else ThreadingHTTPServer
        self.httpd = server((host, port), handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="agentledger-metrics", daemon=True
        )

    @property
    def where(self) -> str:
        """Where it listens, as said when it starts."""
        return f"port {self.port} of {self.host}"

    def start(self) -> OpsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler(
    registry: CollectorRegistry, live: Check, ready: Check
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 -- the http.server name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = generate_latest(registry)
                except Exception as exc:  # noqa: BLE001 -- whatever a collector raised, the scrape answers 503 saying it
                    self._send(503, f"metrics unavailable: {type(exc).__name__}: {exc}\n".encode())
                    return
                self._send(200, body, CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                problem = (live if path == "/healthz" else ready)()
                self._send(503 if problem else 200, f"{problem or 'ok'}\n".encode())
            else:
                self._send(404, b"not found: /metrics, /healthz, /readyz\n")

        def _send(self, code: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # probes every few seconds are not news

    return Handler

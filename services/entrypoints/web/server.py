"""Serves the web view with uvicorn on a socket bound here (so `--port 0` takes
a free port, and the address printed is the one that answers)."""

from __future__ import annotations

import logging
import socket

import uvicorn

from services.entrypoints.cli.parser import BadOption
from services.entrypoints.cli.session import Session
from services.entrypoints.web.app import make_app


def serve(session: Session, *, host: str, port: int, publisher: str | None) -> int:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BadOption("--port", f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = sock.getsockname()[1]
    mode = f"acting as {publisher!r}" if publisher else "read-only (--as NAME to act)"
    print(f"agentledger ui on http://{host}:{bound}/ ({mode}); Ctrl-C stops it", flush=True)
    config = uvicorn.Config(
        make_app(session, publisher=publisher), log_level=logging.WARNING,
        timeout_graceful_shutdown=2, access_log=False, lifespan="off",
    )  # fmt: skip
    uvicorn.Server(config).run(sockets=[sock])
    return 0

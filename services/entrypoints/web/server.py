"""Serves the web view with uvicorn on a socket bound here (so `--port 0` takes
a free port, and the address printed is the one that answers)."""

from __future__ import annotations

import logging
import socket

import uvicorn

from services.entrypoints.cli.parser import BadOption
from services.entrypoints.cli.reply import emit
from services.entrypoints.cli.session import Session
from services.entrypoints.web.app import make_app


def serve(
    session: Session, *, host: str, port: int, publisher: str | None, as_json: bool = False
) -> int:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BadOption("--port", f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)  # connecting works from the moment the address is printed
    bound = sock.getsockname()[1]
    mode = f"acting as {publisher!r}" if publisher else "read-only (--as NAME to act)"
    url = f"http://{host}:{bound}/"
    if as_json:
        emit({"url": url, "publisher": publisher, "read_only": publisher is None})
    else:
        print(f"agentledger ui on {url} ({mode}); Ctrl-C stops it", flush=True)
    server: uvicorn.Server | None = None
    app = make_app(session, publisher=publisher, stopping=lambda: bool(server and server.should_exit))
    config = uvicorn.Config(
        app, log_level=logging.WARNING, timeout_graceful_shutdown=5, access_log=False,
        lifespan="off",
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0

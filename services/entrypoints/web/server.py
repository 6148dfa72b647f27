"""Serves the web view with uvicorn on a socket bound here (so `--port 0` takes
a free port, and the address printed is the one that answers). It listens on
127.0.0.1 unless `--host` says otherwise, answers only to the Host names it
prints, and prints its sign-in URL once: with the token in the URL's fragment
(never sent to a server, never in a log) when the token is this user's token
file; without it when the token comes from AGENTLEDGER_UI_TOKEN (a log of a
deployment is no place for it)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence

import uvicorn

from agentledger.services.entrypoints.reply import emit
from agentledger.services.entrypoints.web.access import WILDCARD, Access, allowed_hosts
from agentledger.services.entrypoints.web.app import make_app
from agentledger.services.entrypoints.web.token import VARIABLE, UiToken, ui_token
from agentledger.services.errors import BadOption
from agentledger.services.session import Session
from agentledger.services.settings import ui_allowed_hosts


def serve(
    session: Session,
    *,
    host: str,
    port: int,
    publisher: str | None,
    allow_hosts: Sequence[str] = (),
    as_json: bool = False,
) -> int:
    token = ui_token(session.settings)
    access = Access(
        token.value, allowed_hosts(host, [*allow_hosts, *ui_allowed_hosts(session.settings)])
    )
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BadOption(
            "--port", f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    sock.listen(128)  # connecting works from the moment the address is printed
    bound = sock.getsockname()[1]
    _say(host, bound, publisher, token, access, as_json)
    server: uvicorn.Server | None = None
    app = make_app(
        session, publisher=publisher, access=access,
        stopping=lambda: bool(server and server.should_exit),
    )  # fmt: skip
    config = uvicorn.Config(
        app, log_level=logging.WARNING, timeout_graceful_shutdown=5, access_log=False,
        lifespan="off", server_header=False,
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0


def _say(
    host: str, port: int, publisher: str | None, token: UiToken, access: Access, as_json: bool
) -> None:
    shown = "127.0.0.1" if host in WILDCARD else f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    signin = f"{url}signin" + (f"#token={token.value}" if token.file else "")
    hosts = sorted(access.hosts)
    where = "this machine only" if host in ("127.0.0.1", "::1", "localhost") else "every address" \
        if host in WILDCARD else host  # fmt: skip
    if as_json:
        emit({"url": url, "publisher": publisher, "read_only": publisher is None, "signin_url": signin,
              "token_file": token.file, "token_from": VARIABLE if token.file is None else "file",
              "listening_on": host, "allowed_hosts": hosts})  # fmt: skip
        return
    mode = f"acting as {publisher!r}" if publisher else "read-only (--as NAME to act)"
    print(f"agentledger ui on {url} ({mode}); Ctrl-C stops it", flush=True)
    print(
        f"  sign in: {signin}" + ("" if token.file else f" (with the token in ${VARIABLE})"),
        flush=True,
    )
    print(f"  listening on {host} ({where}; --host to change); answers to Host {', '.join(hosts)} "
          "(--allow-host to add one)", flush=True)  # fmt: skip

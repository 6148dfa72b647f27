"""Helpers of the web view's tests: start `agentledger ui` as a user does, sign
in with the token its sign-in URL carries, post to it as its page does."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from typing import Any

from e2ekit import AGENTLEDGER, Cli

TOKENS: dict[str, str] = {}  # the view's URL -> the token of its sign-in URL


def start_ui(cli: Cli, *args: str) -> tuple[subprocess.Popen[str], str]:
    """The view, once it says where it listens; its token is kept in TOKENS."""
    err = (cli.cwd / f"ui{'-as' if args else ''}.err").open("w")
    proc = subprocess.Popen(
        [*AGENTLEDGER, "ui", "--port", "0", *args], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=err,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "agentledger ui on http://" in line, (
        f"the view did not start: {line!r} (exit {proc.poll()})"
    )
    url = line.split(" on ", 1)[1].split()[0]
    signin = proc.stdout.readline()
    assert "sign in: " in signin, signin
    if "#token=" in signin:
        TOKENS[url] = signin.split("#token=", 1)[1].split()[0]
    proc.stdout.readline()  # where it listens and the Host names it answers to
    return proc, url


def token_for(url: str) -> str:
    """The token of the view `url` is a page or an API address of."""
    base = max((u for u in TOKENS if url.startswith(u)), key=len)
    return TOKENS[base]


def request(
    url: str,
    body: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    signed_in: bool = True,
) -> tuple[int, Any]:
    """GET (or POST `body` as JSON) as a script does: with `Authorization: Bearer`
    unless not `signed_in`; the status and the JSON reply (or the text)."""
    sent = {"Content-Type": "application/json"} if body is not None else {}
    if signed_in:
        sent["Authorization"] = f"Bearer {token_for(url)}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {**sent, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=20) as reply:
            return reply.status, _read(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _read(exc.read())


def _read(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def post(url: str, body: dict[str, str]) -> tuple[int, dict[str, str]]:
    code, reply = request(url, body)
    return code, reply


def sign_in(page: Any, url: str, path: str = "") -> None:
    """A browser page signed in through the sign-in URL, then at `path`."""
    page.goto(f"{url}signin?next=/{path}#token={token_for(url)}")
    page.wait_for_url(f"{url}{path}")

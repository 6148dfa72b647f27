"""Helpers of the web view's tests: start `agentledger ui` as a user does, post
to it as its page does."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

from e2ekit import AGENTLEDGER, Cli


def start_ui(cli: Cli, *args: str) -> tuple[subprocess.Popen[str], str]:
    err = (cli.cwd / f"ui{'-as' if args else ''}.err").open("w")
    proc = subprocess.Popen(
        [*AGENTLEDGER, "ui", "--port", "0", *args], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=err,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "agentledger ui on http://" in line, f"the view did not start: {line!r} (exit {proc.poll()})"
    return proc, line.split(" on ", 1)[1].split()[0]


def post(url: str, body: dict[str, str]) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())

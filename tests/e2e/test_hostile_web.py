"""The web view as an attacker meets it: a real `agentledger ui --as` on a
private redis-server, with a run waiting for a person's reply. A request naming
another Host (a page of evil.example whose name was rebound to 127.0.0.1) gets
421 and no run data, signed in or not, and its reply is never recorded; without
the token every read and every action is 401; a change that rides on a valid
session cookie but comes from another origin (another port of this host is
the same *site*: the cookie goes along) is 403. The same reply from the view's
own page is recorded: the refusals are the door's, not a broken view."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from e2ekit import Cli, clean_environ, copy_example, start_workers, stop_workers
from webkit import start_ui, token_for

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server

ACTIONS = [
    {"action": "reply", "text": "use notes.md"},
    {"action": "approve", "call_id": "r1"},
    {"action": "cancel"},
]


class View:
    """Raw HTTP to the view: every header as the test writes it (Host included)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or 80
        self.own = f"{self.host}:{self.port}"
        self.token = token_for(url)

    def ask(
        self, method: str, path: str, body: Any = None, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=20)
        sent = {"Host": self.own, **{k.replace("_", "-"): v for k, v in headers.items()}}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, data, sent)
            reply = conn.getresponse()
            return (
                reply.status,
                {k.lower(): v for k, v in reply.getheaders()},
                reply.read().decode(),
            )
        finally:
            conn.close()

    def bearer(self) -> str:
        return f"Bearer {self.token}"

    def cookie(self) -> str:
        """Signs in as the sign-in page does; the session cookie it got."""
        code, headers, _ = self.ask(
            "POST", "/api/signin", {"token": self.token}, Origin=f"http://{self.own}"
        )
        assert code == 200, code
        said = headers["set-cookie"]
        assert "HttpOnly" in said and "SameSite=strict" in said.replace("Strict", "strict")
        return said.split(";", 1)[0]


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cli, View, str]]:
    """The view, acting as a publisher, and a run waiting for a person."""
    folder = tmp_path_factory.mktemp("hostile_web")
    server: PrivateRedis = start_server(folder / "redis")
    env = clean_environ(f"hweb-{uuid.uuid4().hex[:8]}", folder / "state") | {
        "REDIS_URL": server.url
    }
    cli = Cli(cwd=folder, env=env)
    steering = copy_example("steering", folder)
    workers = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    ui, url = start_ui(cli, "--as", cli.publisher("ops"))
    try:
        done = cli("submit", "--as", "ops", steering / "repeat.yaml")
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        cli.wait_events(run_id, lambda events: any(e["type"] == "RunEscalated" for e in events), 60)
        yield cli, View(url), run_id
    finally:
        ui.terminate()
        ui.wait(timeout=15)
        stop_workers([workers])
        server.stop()


def recorded(cli: Cli, run_id: str, kind: str) -> int:
    return sum(e["type"] == kind for e in cli.events(run_id))


def test_a_foreign_host_gets_421_and_no_run_data_signed_in_or_not(
    waiting: tuple[Cli, View, str],
) -> None:
    _, view, run_id = waiting
    for path in (
        "/api/runs",
        f"/api/runs/{run_id}",
        "/api/config",
        "/",
        f"/runs/{run_id}",
        "/signin",
    ):
        for auth in ({}, {"Authorization": view.bearer()}, {"Cookie": view.cookie()}):
            code, _, body = view.ask("GET", path, Host=f"evil.example:{view.port}", **auth)
            assert code == 421 and run_id not in body, (path, auth.keys(), code, body[:200])
    code, _, body = view.ask("GET", "/api/runs", Authorization=view.bearer(), Host="")
    assert code == 400 and run_id not in body


def test_a_dns_rebinding_reply_is_refused_and_nothing_is_recorded(
    waiting: tuple[Cli, View, str],
) -> None:
    """The browser thinks evil.example:PORT is one origin; the page and the request
    agree on it, and the view answers to neither."""
    cli, view, run_id = waiting
    evil = f"evil.example:{view.port}"
    before = recorded(cli, run_id, "HumanReplied")
    for auth in ({}, {"Authorization": view.bearer()}, {"Cookie": view.cookie()}):
        code, _, body = view.ask("POST", f"/api/runs/{run_id}/control", ACTIONS[0], Host=evil,
                                 Origin=f"http://{evil}", **auth)  # fmt: skip
        assert code == 421 and run_id not in body
    assert recorded(cli, run_id, "HumanReplied") == before == 0


@pytest.mark.parametrize(
    "path",
    ["/api/runs", "/api/runs/{run}", "/api/runs/{run}/stream", "/api/runs/stream", "/api/config"],
)
def test_without_the_token_every_read_is_401(waiting: tuple[Cli, View, str], path: str) -> None:
    _, view, run_id = waiting
    for auth in (
        {},
        {"Authorization": "Bearer not-the-token"},
        {"Cookie": "agentledger_ui_00000000=1.ff"},
    ):
        code, headers, body = view.ask("GET", path.format(run=run_id), **auth)
        assert code == 401 and run_id not in body and headers["www-authenticate"] == "Bearer"


def test_a_forged_or_expired_session_cookie_is_no_session(waiting: tuple[Cli, View, str]) -> None:
    _, view, _ = waiting
    name, value = view.cookie().split("=", 1)
    issued, mac = value.split(".")
    for forged in (
        f"{int(issued) - 13 * 3600}.{mac}",
        f"{issued}.{'0' * len(mac)}",
        f"{issued}{mac}",
    ):
        assert view.ask("GET", "/api/runs", Cookie=f"{name}={forged}")[0] == 401


def test_a_page_without_a_session_sends_the_browser_to_sign_in(
    waiting: tuple[Cli, View, str],
) -> None:
    _, view, run_id = waiting
    code, headers, body = view.ask("GET", f"/runs/{run_id}")
    assert code == 303 and headers["location"] == f"/signin?next=/runs/{run_id}" and body == ""


@pytest.mark.parametrize("body", ACTIONS, ids=[a["action"] for a in ACTIONS])
def test_without_the_token_every_action_is_401_and_nothing_is_recorded(
    waiting: tuple[Cli, View, str], body: dict[str, str]
) -> None:
    cli, view, run_id = waiting
    before = len(cli.events(run_id))
    code, _, said = view.ask(
        "POST", f"/api/runs/{run_id}/control", body, Origin=f"http://{view.own}"
    )
    assert code == 401 and json.loads(said)["error"] == "not signed in"
    assert len(cli.events(run_id)) == before


@pytest.mark.parametrize(
    "came_from",
    [
        {
            "Origin": "http://127.0.0.1:9"
        },  # another port of this host: same site, the cookie goes along
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a file
        {"Referer": "http://localhost:9/attack.html"},
        {},  # nothing says where it came from
    ],
    ids=["other-port", "other-site", "null-origin", "referer-only", "unsaid"],
)
def test_a_change_with_a_valid_cookie_from_another_origin_is_refused(
    waiting: tuple[Cli, View, str], came_from: dict[str, str]
) -> None:
    cli, view, run_id = waiting
    before = recorded(cli, run_id, "HumanReplied")
    code, _, said = view.ask(
        "POST", f"/api/runs/{run_id}/control", ACTIONS[0], Cookie=view.cookie(), **came_from
    )
    assert (code, json.loads(said)["error"]) == (403, "cross-site")
    assert recorded(cli, run_id, "HumanReplied") == before


def test_signing_in_from_another_origin_is_refused(waiting: tuple[Cli, View, str]) -> None:
    _, view, _ = waiting
    code, headers, _ = view.ask(
        "POST", "/api/signin", {"token": view.token}, Origin="http://evil.example"
    )
    assert code == 403 and "set-cookie" not in headers
    code, headers, _ = view.ask(
        "POST", "/api/signin", {"token": "guess"}, Origin=f"http://{view.own}"
    )
    assert code == 401 and "set-cookie" not in headers


def test_a_view_acting_for_another_tenant_cannot_cancel_this_tenants_run(
    waiting: tuple[Cli, View, str],
) -> None:
    """The cancel button posts what the CLI's `cancel` sends, signed as the view's
    publisher: a view started `--as` a publisher granted only tenant t2 is refused
    on a run of t1 (409, the intake's words) and nothing is recorded — with the
    token, the cookie and the right origin, every door open but the grant."""
    cli, _, run_id = waiting
    added = cli("publishers", "add", "shop-2", "--principal", "*@t2", "--queues", "*")
    assert added.returncode == 0, added.stderr
    ui, url = start_ui(cli, "--as", "shop-2")
    try:
        other = View(url)
        code, _, said = other.ask("POST", f"/api/runs/{run_id}/control", {"action": "cancel"},
                                  Cookie=other.cookie(), Origin=f"http://{other.own}")  # fmt: skip
    finally:
        ui.terminate()
        ui.wait(timeout=15)
    assert code == 409, said
    assert "not granted" in json.loads(said)["message"]
    assert recorded(cli, run_id, "RunCancelRequested") == 0


def test_zz_the_same_reply_from_the_views_own_page_is_recorded(
    waiting: tuple[Cli, View, str],
) -> None:
    """Last in the module (the run moves on): what every refusal above refused works."""
    cli, view, run_id = waiting
    code, _, said = view.ask("POST", f"/api/runs/{run_id}/control", ACTIONS[0], Cookie=view.cookie(),
                             Origin=f"http://{view.own}", Referer=f"http://{view.own}/runs/{run_id}")  # fmt: skip
    assert code == 200, said
    assert "HumanReplied" in json.loads(said)["events"]
    assert recorded(cli, run_id, "HumanReplied") == 1  # this one, and none of the refused


def test_the_token_file_is_the_owners_only(waiting: tuple[Cli, View, str]) -> None:
    cli, view, _ = waiting
    token_file = Path(cli.env["AGENTLEDGER_STATE_DIR"]) / "ui-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert token_file.read_text().strip() == view.token

"""`agentledger ui`'s JSON side, as a script (or the page) calls it: bad input
gets a clear error naming what is wrong, an unknown run is 404, and a port in
use is refused by the command with exit 2 — never a traceback."""

from __future__ import annotations

import html
import json
import socket
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2ekit import AGENTLEDGER, Cli, clean_environ, copy_example
from webkit import post, request, start_ui

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cli, str]]:
    folder = tmp_path_factory.mktemp("web_api")
    server: PrivateRedis = start_server(folder / "redis")
    env = clean_environ(f"uiapi-{uuid.uuid4().hex[:8]}", folder / "state") | {
        "REDIS_URL": server.url
    }
    cli = Cli(cwd=folder, env=env)
    proc, url = start_ui(cli, "--as", "ops")
    yield cli, url
    proc.terminate()
    proc.wait(timeout=15)
    server.stop()


def get(url: str) -> tuple[int, Any]:
    return request(url)


def test_the_config_says_who_the_view_acts_as(served: tuple[Cli, str]) -> None:
    assert get(f"{served[1]}api/config") == (200, {"publisher": "ops", "read_only": False})


def test_an_unknown_status_filter_is_400_naming_the_statuses(served: tuple[Cli, str]) -> None:
    code, body = get(f"{served[1]}api/runs?status=done")
    assert code == 400 and "no status 'done'" in body["message"] and "completed" in body["message"]
    assert get(f"{served[1]}api/runs?status=completed") == (200, {"runs": [], "next": None})


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("since=yesterday", "cannot read 'yesterday' as a time"),
        ("page=nope", "is not a page token"),
    ],
)
def test_a_time_or_page_token_the_list_cannot_read_is_400_saying_why(
    served: tuple[Cli, str], query: str, said: str
) -> None:
    code, body = get(f"{served[1]}api/runs?{query}")
    assert code == 400 and said in body["message"], body


def test_an_unknown_run_is_404_for_its_page_data_stream_and_controls(
    served: tuple[Cli, str],
) -> None:
    url = served[1]
    assert get(f"{url}api/runs/r-nope")[0] == 404
    assert get(f"{url}api/runs/r-nope/stream")[0] == 404
    code, body = post(f"{url}api/runs/r-nope/control", {"action": "resume"})
    assert (code, body["error"]) == (404, "no run")


@pytest.mark.parametrize("bad", ["r-..%2F..%2Fetc", "x" * 300, "%00r", "r%20x", "-r"])
def test_a_malformed_run_id_is_404_everywhere_and_never_a_500(
    served: tuple[Cli, str], bad: str
) -> None:
    url = served[1]
    assert get(f"{url}api/runs/{bad}")[0] == 404
    assert get(f"{url}api/runs/{bad}/stream")[0] == 404
    assert post(f"{url}api/runs/{bad}/control", {"action": "resume"})[0] == 404


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"action": "launch"}, "the actions are approve, deny, reply, resume, abort, cancel"),
        ({"action": "reply", "text": "  "}, "reply needs a text"),
        ({"action": "approve", "call_id": ["c"]}, "is not accepted here"),
    ],
)
def test_a_bad_control_is_400_saying_what_is_missing(
    served: tuple[Cli, str], body: dict[str, str], says: str
) -> None:
    code, reply = post(f"{served[1]}api/runs/r-x/control", body)
    assert code == 400 and says in reply["message"]


def test_a_port_in_use_exits_2_naming_the_option(served: tuple[Cli, str]) -> None:
    cli, _ = served
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*AGENTLEDGER, "ui", "--port", str(port)], cwd=cli.cwd, env=cli.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--port: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_port_is_refused_by_the_parser(served: tuple[Cli, str]) -> None:
    done = served[0]("ui", "--port", "70000")
    assert done.returncode == 2 and "a port is at most 65535" in done.stderr


def test_a_control_from_another_site_or_not_as_json_is_refused(served: tuple[Cli, str]) -> None:
    url = f"{served[1]}api/runs/r-x/control"
    code, _ = request(url, {"action": "resume"}, headers={"Content-Type": "text/plain"})
    assert code == 415
    code, body = request(url, {"action": "resume"}, headers={"Origin": "http://evil.example"})
    assert (code, body["error"]) == (403, "cross-site")


def test_with_json_the_view_says_where_it_listens_as_one_object(served: tuple[Cli, str]) -> None:
    cli, _ = served
    proc = subprocess.Popen(
        [*AGENTLEDGER, "ui", "--port", "0", "--json"], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        said = json.loads(proc.stdout.readline())
        assert said["read_only"] is True and said["publisher"] is None
        token = said["signin_url"].split("#token=", 1)[1]
        assert said["token_from"] == "file" and said["signin_url"].startswith(said["url"])
        code, config = request(f"{said['url']}api/config", signed_in=False,
                               headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert (code, config) == (200, {"publisher": None, "read_only": True})
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(scope="module")
def failed_run(served: tuple[Cli, str]) -> str:
    """A run whose acceptance check failed (the example's model only claims success)."""
    cli, _ = served
    example = copy_example("fix_tests", cli.cwd)
    code, summary = cli.run_json(example / "spec_claims_success.yaml")
    assert code == 1 and summary["status"] == "failed", summary
    return str(summary["run_id"])


def test_the_icon_is_served_to_anyone_who_may_reach_the_view(served: tuple[Cli, str]) -> None:
    url = served[1]
    with urllib.request.urlopen(f"{url}favicon.ico", timeout=20) as reply:  # not signed in
        assert reply.status == 200 and reply.headers["Content-Type"] == "image/x-icon"
        assert reply.read(4) == b"\0\0\1\0"  # an icon file's header
    code, body = request(f"{url}favicon.ico", signed_in=False, headers={"Host": "evil.example"})
    assert (code, body["error"]) == (421, "wrong host")


def test_acceptance_evidence_is_numbered_from_1(served: tuple[Cli, str], failed_run: str) -> None:
    code, body = get(f"{served[1]}api/runs/{failed_run}")
    assert code == 200
    [check] = body["view"]["checks"]
    assert (check["index"], check["number"], check["passed"]) == (0, 1, False)
    passes = [b for b in body["picture"]["waterfall"]["bars"] if b["kind"] == "acceptance"]
    assert passes and all(b["error"] == "a check failed" for b in passes)  # the picture too


def test_without_javascript_the_pages_carry_the_runs_and_the_run_as_text(
    served: tuple[Cli, str], failed_run: str
) -> None:
    cli, url = served
    code, index = get(url)
    assert code == 200 and "<noscript>" in index
    assert f'<a href="/runs/{failed_run}">{failed_run}</a>  failed' in index
    code, page = get(f"{url}runs/{failed_run}")
    assert code == 200
    text = html.unescape(page.split("<noscript>", 2)[2].split("</noscript>", 1)[0])
    assert (
        f"run {failed_run}: failed</b> acceptance failed (1 of 1 check: command 'python -m pytest -q'"
        in text
    )
    for line in cli("tail", "--run", failed_run).stdout.splitlines():  # the lines `tail` prints
        assert line in text
    assert "1. FAIL command 'python -m pytest -q' exits 0" in text and "0. FAIL" not in text
    code, unknown = get(f"{url}runs/r-nope")
    assert code == 200 and "no run &#x27;r-nope&#x27;" in unknown
    _, door = request(f"{url}runs/{failed_run}", signed_in=False)  # sent on to the sign-in page
    assert "agentledger — sign in" in door and "acceptance failed" not in door

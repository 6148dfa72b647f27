"""`agentledger ui` as a person uses it, in a real headless Chromium (Debian's
`chromium`, driven by Playwright through `executable_path`): the run's page
shows its timeline growing live (the same lines `tail` prints) to a person
signed in through the sign-in URL the view printed, an Approve
click publishes through the inbox and the run completes on screen; the runs
list filters by status; a view started without `--as` is read-only. A private
redis-server on a free port; the screenshot is kept (its path is printed)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, clean_environ, copy_example, start_workers, stop_workers
from webkit import post, sign_in, start_ui, token_for

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".agentledger" / "artifacts"
TIMEOUT_MS = 30_000
SPEC = """\
task: "Publish a note"
workspace: ./ws
copy_workspace: true
tools: [steer_tools]
principal: {id: alice, tenant: t1}
model:
  scripted:
    - tool_use: [{id: p1, name: publish_note, input: {path: note.txt, text: "hi"}}]
      delay_s: 1.0
    - end_turn: "published"
acceptance:
  - file: note.txt
    contains: "hi"
"""

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
if CHROMIUM is None:
    pytest.skip(
        "no chromium on PATH: `apt-get install -y chromium` (make test does it as root)",
        allow_module_level=True,
    )


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = start_server(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
def cli(tmp_path: Path, redis_server: PrivateRedis) -> Cli:
    env = clean_environ(f"ui-{uuid.uuid4().hex[:8]}", tmp_path / "state") | {
        "REDIS_URL": redis_server.url
    }
    return Cli(cwd=tmp_path, env=env)


@pytest.fixture
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def test_a_person_watches_the_timeline_grow_clicks_approve_and_sees_the_run_complete(
    cli: Cli, browser: object, tmp_path: Path
) -> None:
    steering = copy_example("steering", tmp_path)
    (steering / "ui.yaml").write_text(SPEC)
    workers = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    acting, url = start_ui(cli, "--as", cli.publisher("alice"))
    watching, ro_url = start_ui(cli)
    try:
        done = cli("submit", "--as", "alice", steering / "ui.yaml")
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        page = browser.new_page()  # type: ignore[attr-defined]
        sign_in(page, url, f"runs/{run_id}")
        lines = page.locator("#timeline .line")
        lines.first.wait_for(timeout=TIMEOUT_MS)
        page.evaluate("window.__same_page = true")  # gone if the page reloaded
        first_seen = lines.count()
        approve = page.locator('.approval[data-call="p1"] button.approve')
        approve.wait_for(timeout=TIMEOUT_MS)
        assert page.locator("#status").inner_text() == "awaiting_approval"
        assert page.locator('#timeline .line[data-type="ApprovalRequested"]').count() == 1

        # the read-only view shows the same run with its buttons off, and refuses a post
        ro = browser.new_page()  # type: ignore[attr-defined]
        sign_in(ro, ro_url, f"runs/{run_id}")
        ro.locator('.approval[data-call="p1"] button.approve').wait_for(timeout=TIMEOUT_MS)
        assert ro.locator('.approval[data-call="p1"] button.approve').is_disabled()
        assert "read-only" in ro.locator("#mode").inner_text()
        code, body = post(
            f"{ro_url}api/runs/{run_id}/control", {"action": "approve", "call_id": "p1"}
        )
        assert (code, body["error"]) == (403, "read-only")

        approve.click()
        page.wait_for_function(
            "document.querySelector('#status').textContent === 'completed'", timeout=TIMEOUT_MS
        )
        assert page.evaluate("window.__same_page === true")  # it grew live, not by reloading
        assert lines.count() > first_seen
        page.wait_for_function(  # the intake's verdict, which may come after the run moved on
            "document.querySelector('#notice').textContent.includes('ApprovalGranted')",
            timeout=TIMEOUT_MS,
        )
        shown = [lines.nth(i).inner_text() for i in range(lines.count())]
        tail = cli("tail", "--run", run_id)
        assert shown == tail.stdout.splitlines()  # the very lines `tail` prints
        assert any("ApprovalGranted" in s and "by alice" in s for s in shown)
        assert page.locator("#checks tbody tr").first.inner_text().count("PASS") == 1
        assert (
            page.locator("#checks tbody tr td").first.inner_text() == "1"
        )  # evidence counts from 1
        assert page.locator('#calls tr[data-call="p1"]').inner_text().count("succeeded") == 1

        shot = tmp_path / "ui-approve.png"
        page.screenshot(path=str(shot), full_page=True)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        kept = ARTIFACTS / "ui-approve.png"
        shutil.copy(shot, kept)
        print(f"screenshot: {kept}")

        # without JavaScript the page is the same run as text, the script's parts hidden
        nojs = browser.new_context(  # type: ignore[attr-defined]
            java_script_enabled=False,
            extra_http_headers={"Authorization": f"Bearer {token_for(url)}"},
        )
        plain = nojs.new_page()
        plain.goto(f"{url}runs/{run_id}")
        said = plain.locator("body").inner_text()
        assert f"run {run_id}: completed" in said and "1 acceptance check passed" in said
        assert all(line.strip() in said for line in tail.stdout.splitlines())
        assert "1. PASS file 'note.txt' contains 'hi'" in said
        assert plain.locator("#timeline").is_hidden()
        plain.goto(url)
        assert run_id in plain.locator("body").inner_text()
        plain.goto(f"{url}signin")
        assert "Signing in here needs JavaScript" in plain.locator("body").inner_text()
        nojs.close()

        # the runs list: the run with its status, turns and cost; the status filter holds
        index = browser.new_page()  # type: ignore[attr-defined]
        sign_in(index, url)
        row = index.locator(f'#runs tr[data-run="{run_id}"]')
        row.wait_for(timeout=TIMEOUT_MS)
        assert "completed" in row.inner_text() and "$0.0000" in row.inner_text()
        index.select_option("#f-status", "failed")
        row.wait_for(state="detached", timeout=TIMEOUT_MS)
        index.select_option("#f-status", "completed")
        row.wait_for(timeout=TIMEOUT_MS)
    finally:
        for proc in (acting, watching):
            proc.terminate()
            proc.wait(timeout=15)
        stop_workers([workers])
    for name in ("ui-as.err", "ui.err"):  # stopped while its streams were open: no traceback
        said = (tmp_path / name).read_text()
        assert "Traceback" not in said and "Error" not in said, said


def test_a_run_awaiting_a_human_gets_a_reply_box_and_abort_ends_it_failed(
    cli: Cli, browser: object, tmp_path: Path
) -> None:
    steering = copy_example("steering", tmp_path)
    workers = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    acting, url = start_ui(cli, "--as", cli.publisher("bob"))
    try:
        done = cli(
            "submit", "--as", "bob", steering / "repeat.yaml"
        )  # three identical failures: a human is asked
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        page = browser.new_page()  # type: ignore[attr-defined]
        sign_in(page, url, f"runs/{run_id}")
        box = page.locator(".wait.human")
        box.wait_for(timeout=TIMEOUT_MS)
        assert "3 identical `not_found`" in box.inner_text()
        for name in ("Reply", "Resume", "Abort"):
            assert box.get_by_role("button", name=name).is_enabled()
        box.get_by_role("button", name="Reply").click()  # no text: refused, nothing sent
        page.wait_for_function(
            "document.querySelector('#notice').className === 'error'", timeout=TIMEOUT_MS
        )
        box.get_by_role("button", name="Abort").click()
        page.wait_for_function(
            "document.querySelector('#status').textContent === 'failed'", timeout=TIMEOUT_MS
        )
        assert (
            page.locator('#timeline .line[data-type="RunAborted"]').inner_text().endswith("by bob")
        )
        assert page.locator(".wait.human").count() == 0
    finally:
        acting.terminate()
        acting.wait(timeout=15)
        stop_workers([workers])

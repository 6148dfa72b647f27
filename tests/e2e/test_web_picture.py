"""The web view's picture of a run, in a real headless Chromium (Debian's
`chromium`, driven by Playwright through `executable_path`), on the parallel
example `reads_and_write.yaml` run by real workers: the waterfall shows three
reads side by side on three lanes and the write to `a.txt` waiting for the
lock the read of `a.txt` holds, then running after it; clicking the write's bar
opens its log entries; the conversation shows the model's tool calls and their
results. The runs list filters by tenant and tool and pages; a live run is
cancelled with the Cancel button; the model's text is shown while it streams;
archived runs stay listed and drawn. A screenshot of each page is kept under
.agentledger/artifacts (its path printed), never committed."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, clean_environ, copy_example, start_workers, stop_workers
from webkit import sign_in, start_ui

from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".agentledger" / "artifacts"
TIMEOUT_MS = 30_000
SLOW = """\
task: "Read slowly <img src=x onerror=window.__xss=1>"
workspace: ./ws
copy_workspace: true
tools: [parallel_tools]
principal: {id: bob, tenant: t2}
model:
  scripted:
    - tool_use: [{id: s1, name: par_read, input: {path: a.txt, hold_s: 6}}]
    - end_turn: "read it."
"""

TALK = """\
task: "Say it slowly"
workspace: ./ws
copy_workspace: true
tools: [parallel_tools]
principal: {id: alice, tenant: t1}
model:
  scripted:
    - end_turn: "one two three four five six seven eight nine ten eleven twelve"
      delay_s: 6
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
def cli(tmp_path: Path) -> Iterator[Cli]:
    server: PrivateRedis = start_server(tmp_path / "redis")
    env = clean_environ(f"pic-{uuid.uuid4().hex[:8]}", tmp_path / "state") | {
        "REDIS_URL": server.url
    }
    yield Cli(cwd=tmp_path, env=env)
    server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def keep(page: Any, tmp_path: Path, name: str) -> None:
    """A screenshot of the page, kept as a test artifact (not committed)."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)
    print(f"screenshot: {ARTIFACTS / name}")


def box(page: Any, selector: str) -> dict[str, float]:
    found = page.locator(selector).bounding_box()
    assert found is not None, f"{selector} is not drawn"
    return dict(found)


def submit(cli: Cli, spec: Path) -> str:
    done = cli("submit", "--as", "ops", spec)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def check_waterfall(page: Any) -> None:
    """Three reads drawn side by side on three lanes, and the write's lock wait drawn
    while they run, its run after the read of a.txt ends."""
    reads = [f'#waterfall .bar[data-call="r{n}"]' for n in (1, 2, 3)]
    runs = [box(page, f"{r} rect.running") for r in reads]
    assert len({round(r["y"]) for r in runs}) == 3  # three lanes
    assert max(r["x"] for r in runs) < min(r["x"] + r["width"] for r in runs)  # at once
    lanes = {page.locator(r).get_attribute("data-lane") for r in reads}
    assert len(lanes) == 3
    write = '#waterfall .bar[data-call="w1"]'
    wait = page.locator(f"{write} rect.lock_wait")
    assert wait.count() == 1
    assert wait.get_attribute("data-waiting-for").endswith("/a.txt")
    waited, ran = box(page, f"{write} rect.lock_wait"), box(page, f"{write} rect.running")
    r1 = runs[0]
    assert waited["x"] <= r1["x"] + r1["width"] and waited["x"] + waited["width"] >= r1["x"]
    assert ran["x"] >= r1["x"] + r1["width"] - 1  # after the read of a.txt (1 px rounding)
    assert float(page.locator(f"{write} rect.running").get_attribute("data-start")) >= float(
        page.locator(f"{reads[0]} rect.running").get_attribute("data-end")
    )
    labels = page.locator("#waterfall .lane-name").all_text_contents()
    assert labels[0] == "model" and labels[-1] == "acceptance" and len(labels) == 6


def test_the_waterfall_shows_three_reads_at_once_and_a_write_waiting_for_its_lock(
    cli: Cli, browser: Any, tmp_path: Path
) -> None:
    parallel = copy_example("parallel", tmp_path)
    (parallel / "slow.yaml").write_text(SLOW)
    workers = start_workers(cli, tools=["parallel_tools"], tool_path=parallel)
    ui, url = start_ui(cli, "--as", cli.publisher("ops"))
    try:
        run_id = submit(cli, parallel / "reads_and_write.yaml")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        sign_in(page, url, f"runs/{run_id}")
        page.wait_for_function(
            "document.querySelector('#status').textContent === 'completed'", timeout=TIMEOUT_MS
        )
        page.locator('#waterfall .bar[data-kind="acceptance"]').wait_for(timeout=TIMEOUT_MS)
        check_waterfall(page)
        assert page.locator("#cancel").is_hidden()  # nothing to cancel on an ended run

        page.locator('#waterfall .bar[data-call="w1"]').click()
        detail = page.locator("#bar-detail")
        detail.wait_for(timeout=TIMEOUT_MS)
        said = detail.inner_text()
        assert "par_append w1" in said and "lock_wait" in said and "waiting for file:" in said
        assert "ToolCallWaiting" in said and "ToolCallSucceeded" in said
        turn = page.locator('#turns .turn[data-turn="1"]')
        assert turn.locator(".tool-use").count() == 4
        assert "read by three" in turn.inner_text()
        assert "file a" in turn.locator('.result[data-call="r1"]').inner_text()
        keep(page, tmp_path, "ui-waterfall.png")

        # a live run of another tenant: drawn while it runs, then cancelled by the button
        slow = submit(cli, parallel / "slow.yaml")
        live = browser.new_page(viewport={"width": 1200, "height": 700})
        sign_in(live, url, f"runs/{slow}")
        live.locator('#waterfall .bar[data-call="s1"] rect.running').wait_for(timeout=TIMEOUT_MS)
        assert live.locator('#waterfall .bar[data-call="s1"]').get_attribute("data-end") == ""
        live.locator("#cancel").click()
        live.wait_for_function(
            "document.querySelector('#status').textContent === 'cancelled'", timeout=TIMEOUT_MS
        )
        assert "RunCancelRequested" in live.locator("#timeline").inner_text()
        # the task is text, never markup, wherever it is shown
        assert "<img src=x onerror=window.__xss=1>" in live.locator("#turns").inner_text()
        assert live.evaluate("window.__xss === undefined")
        assert live.locator('#waterfall .mark[data-type="RunCancelRequested"]').count() == 1
        keep(live, tmp_path, "ui-cancelled.png")

        index = browser.new_page(viewport={"width": 1200, "height": 700})
        sign_in(index, url, "?limit=1")
        rows = index.locator("#runs tbody tr")
        index.locator(f'#runs tr[data-run="{slow}"]').wait_for(timeout=TIMEOUT_MS)  # the newest
        index.locator("#older").click()
        index.locator(f'#runs tr[data-run="{run_id}"]').wait_for(timeout=TIMEOUT_MS)
        assert rows.count() == 1 and index.locator("#older").is_disabled()
        index.locator("#newer").click()
        index.locator(f'#runs tr[data-run="{slow}"]').wait_for(timeout=TIMEOUT_MS)
        index.fill("#f-tool", "par_append")
        index.press("#f-tool", "Enter")
        index.locator(f'#runs tr[data-run="{slow}"]').wait_for(state="detached", timeout=TIMEOUT_MS)
        index.locator(f'#runs tr[data-run="{run_id}"]').wait_for(timeout=TIMEOUT_MS)
        index.fill("#f-tool", "")
        index.fill("#f-tenant", "t2")
        index.press("#f-tenant", "Enter")
        index.locator(f'#runs tr[data-run="{slow}"]').wait_for(timeout=TIMEOUT_MS)
        assert "t2" in rows.first.inner_text() and "<img src=x" in rows.first.inner_text()
        assert index.evaluate("window.__xss === undefined")
        keep(index, tmp_path, "ui-runs.png")

        # the model's text while it streams (the scripted model says a word at a time)
        (parallel / "talk.yaml").write_text(TALK)
        talk = submit(cli, parallel / "talk.yaml")
        said = browser.new_page(viewport={"width": 1200, "height": 700})
        sign_in(said, url, f"runs/{talk}")
        said.wait_for_function(
            "document.querySelector('#said-text')?.textContent.startsWith('one two')",
            timeout=TIMEOUT_MS,
        )
        assert said.locator("#status").inner_text() == "requesting_model"
        assert said.locator('#waterfall .bar[data-kind="model"]').get_attribute("data-end") == ""
        assert "twelve" not in said.locator("#said-text").inner_text()  # said in part so far
        keep(said, tmp_path, "ui-streaming.png")
        said.wait_for_function(
            "document.querySelector('#status').textContent === 'completed'", timeout=TIMEOUT_MS
        )
        assert said.locator("#said").is_hidden()
        assert "eleven twelve" in said.locator('#turns .turn[data-turn="1"]').inner_text()

        # the runs leave Redis for the archive: still listed, still drawn
        archived = cli("archive", "--older-than", "0")
        assert archived.returncode == 0 and "archived 3 runs" in archived.stdout, archived.stdout
        index.goto(url)
        index.locator(f'#runs tr[data-run="{run_id}"]').wait_for(timeout=TIMEOUT_MS)
        assert rows.count() == 3
        page.goto(f"{url}runs/{run_id}")
        page.locator('#waterfall .bar[data-kind="acceptance"]').wait_for(timeout=TIMEOUT_MS)
        check_waterfall(page)
        signin = browser.new_page()
        signin.goto(f"{url}signin")
        keep(signin, tmp_path, "ui-signin.png")
    finally:
        ui.terminate()
        ui.wait(timeout=15)
        stop_workers([workers])

"""`agentledger archive` on a finished example run: `--dry-run` names it and changes
nothing; `--older-than 0` archives it and takes it out of Redis; then every read
command — status, tail --run, replay, context, trace, raw — prints what it printed
before. A second pass archives nothing; a bad duration is refused naming it."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, copy_example
from webkit import request, start_ui, token_for

READS = {
    "status": ("status", "{run}", "--json"),
    "tail": ("tail", "--run", "{run}", "--json"),
    "replay": ("replay", "{run}", "--json"),
    "replay-text": ("replay", "{run}"),
    "context": ("context", "{run}", "--turn", "2", "--json"),
    "trace": ("trace", "{run}", "--json"),
    "raw": ("raw", "{run}"),
}


def _reads(cli: Cli, run_id: str) -> dict[str, tuple[int, str]]:
    out = {}
    for name, args in READS.items():
        done = cli(*(a.format(run=run_id) for a in args))
        out[name] = (done.returncode, done.stdout)
    return out


@pytest.fixture(scope="module")
def archived(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]]:
    cli = make_cli(tmp_path_factory.mktemp("archive"))
    example = copy_example("inventory", cli.cwd)
    code, summary = cli.run_json(example / "spec.yaml")
    assert code == 0, summary
    run_id = summary["run_id"]
    before = _reads(cli, run_id)
    ui, url = start_ui(cli)
    before["web"] = _web(url, run_id)
    dry = cli("archive", "--older-than", "0", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    still = [
        k
        for k in cli.redis().scan_iter(f"{cli.env['AGENTLEDGER_PREFIX']}:*")
        if run_id.encode() in k
    ]
    assert still, "a dry run changes nothing"
    done = cli("archive", "--older-than", "0", "--json")
    assert done.returncode == 0, done.stderr
    after_web = _web(url, run_id)
    ui.terminate()
    ui.wait(timeout=15)
    assert after_web == before["web"]  # the web view's run page data, and its stream's first event
    return cli, run_id, before, json.loads(dry.stdout), json.loads(done.stdout)


def _web(url: str, run_id: str) -> tuple[int, str]:
    """The view's data of the run (JSON) and the first event its stream sends."""
    code, body = request(f"{url}api/runs/{run_id}")
    sent = urllib.request.Request(
        f"{url}api/runs/{run_id}/stream", headers={"Authorization": f"Bearer {token_for(url)}"}
    )
    with urllib.request.urlopen(sent, timeout=30) as stream:
        first = b""
        while b"\n\n" not in first:
            first += stream.read1(65536)
    event = [ln for ln in first.decode().split("\n\n")[0].splitlines() if ln.startswith("data:")]
    return code, json.dumps(body, sort_keys=True) + "".join(event)


def test_a_dry_run_names_the_finished_run_and_a_pass_archives_it(
    archived: tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]],
) -> None:
    cli, run_id, _, dry, done = archived
    assert dry["due"] == [run_id] and dry["archived"] == [] and dry["dry_run"] is True
    assert done["archived"] == [run_id] and done["failed"] == []
    assert done["archive"] == str(cli.state_dir / "archive")
    left = [
        k
        for k in cli.redis().scan_iter(f"{cli.env['AGENTLEDGER_PREFIX']}:*")
        if run_id.encode() in k
    ]
    assert left == []
    assert any((cli.state_dir / "archive").rglob("*.seg"))


@pytest.mark.parametrize("command", list(READS))
def test_every_read_command_prints_the_same_of_the_archived_run(
    archived: tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]],
    command: str,
) -> None:
    cli, run_id, before, _, _ = archived
    code, out = before[command]  # type: ignore[misc]
    assert code == 0 and out.strip(), (command, out)
    args = (a.format(run=run_id) for a in READS[command])
    after = cli(*args)
    assert (after.returncode, after.stdout) == (code, out), after.stderr


def test_a_second_pass_archives_nothing(
    archived: tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]],
) -> None:
    cli, _, _, _, _ = archived
    again = cli("archive", "--older-than", "0", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["due"] == []
    text = cli("archive")
    assert text.returncode == 0 and text.stdout.startswith("archived 0 runs to ")


def test_a_duration_that_is_not_one_is_refused_naming_the_option(
    archived: tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]],
) -> None:
    cli = archived[0]
    done = cli("archive", "--older-than", "a week")
    assert done.returncode == 2
    assert "--older-than" in done.stderr and "'a week' is not a duration" in done.stderr


def test_an_archived_run_is_rerun_on_its_recorded_replies_without_divergence(
    archived: tuple[Cli, str, dict[str, tuple[int, str]], dict[str, Any], dict[str, Any]],
) -> None:
    cli, run_id, _, _, _ = archived
    done = cli("replay", run_id, "--rerun")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"of {run_id}: completed" in done.stdout and "no divergence" in done.stdout

"""A run `agentledger run` started goes on after that command has exited, by
following only what the CLI printed: it waits for a person (the reply command,
then `agentledger run --attach RUN`), for an approval when its terminal closed,
or was stopped at once or killed. `run --attach` serves the run's private queue
with the tool set it started with and follows it to its end as `run` does; it
refuses, in one line with its exit code, what it cannot serve."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2ekit import AGENTLEDGER, Cli, copy_example, of_type, types

SERVED = 12  # exit_codes.SERVED

DEAF_TOOLS = '''
import time
from agentledger import tool

@tool(read_only=True, timeout_s=120)
def deaf_sleep(seconds: float) -> dict:
    """Sleeps, never looking at its cancel flag."""
    time.sleep(seconds)
    return {"slept": seconds}
'''


@pytest.fixture
def steering(tmp_path: Path) -> Path:
    return copy_example("steering", tmp_path)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start(cli: Cli, procs: list[subprocess.Popen[str]], *args: str | Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*AGENTLEDGER, *map(str, args)], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    procs.append(proc)
    return proc


def quoted(text: str) -> list[list[str]]:
    """The commands a line names between backticks, as argument lists."""
    return [shlex.split(c) for c in re.findall(r"`([^`]+)`", text)]


def line_with(text: str, words: str) -> str:
    (found,) = [line for line in text.splitlines() if words in line]
    return found


def typed(cli: Cli, command: list[str], **replace: str) -> subprocess.CompletedProcess[str]:
    """Run a command the CLI printed, as a person types it (placeholders filled in)."""
    assert command[0] == "agentledger", command
    return cli(*[replace.get(arg, arg) for arg in command[1:]])


def deaf_spec(tmp_path: Path, *, seconds: float, grace_s: float) -> Path:
    (tmp_path / "deaf_tools.py").write_text(DEAF_TOOLS)
    spec = {
        "task": "sleep", "tools": ["deaf_tools"], "principal": {"id": "alice", "tenant": "t1"},
        "policies": {"cancel_grace_s": grace_s},
        "model": {"scripted": [
            {"tool_use": [{"id": "d1", "name": "deaf_sleep", "input": {"seconds": seconds}}]},
            {"end_turn": "slept"},
        ]},
    }  # fmt: skip
    path = tmp_path / "deaf.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def read_until(proc: subprocess.Popen[str], words: str, timeout_s: float = 60) -> str:
    """What the process printed on stdout up to the line holding `words`."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"it ended before printing {words!r}: {''.join(seen)}"
        seen.append(line)
        if words in line:
            return "".join(seen)
    raise AssertionError(f"no {words!r} within {timeout_s:g}s")


def wait_unserved(cli: Cli, queue: str, timeout_s: float = 20) -> None:
    """Until no live worker of `queue` is left (a killed process stops counting
    after the membership ttl): the moment a person comes back to the run."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = cli("workers", "--list", "--json")
        assert done.returncode == 0, done.stderr
        if not [w for w in json.loads(done.stdout)["workers"] if w["queue"] == queue]:
            return
        assert time.monotonic() < deadline, f"queue {queue!r} still served"
        time.sleep(0.3)


def queue_of(cli: Cli, run_id: str) -> str:
    (created,) = of_type(cli.events(run_id), "RunCreated")
    return str(created["queue"])


def test_a_run_awaiting_a_person_completes_by_following_only_what_the_cli_printed(cli, steering):
    ran = cli("run", steering / "repeat.yaml")
    assert ran.returncode == 6, ran.stderr
    hint = line_with(ran.stdout, "waits for a person")
    reply, *_, attach = quoted(hint)
    assert reply[:2] == ["agentledger", "reply"] and reply[-1] == "…"
    assert attach[:3] == ["agentledger", "run", "--attach"]
    run_id = attach[3]

    replied = typed(cli, reply, **{"…": "notes.txt is not there; say you are done"})
    assert replied.returncode == 0, replied.stderr
    assert "HumanReplied" in replied.stdout
    # the reply says again how the run goes on: nothing serves it now
    assert quoted(line_with(replied.stderr, "no process serves")) == [attach]

    attached = typed(cli, attach)
    assert attached.returncode == 0, attached.stderr
    assert f"run {run_id}: completed" in attached.stdout
    # the same timeline `run` prints: the history first, then what the attach served
    assert attached.stdout.index("RunEscalated") < attached.stdout.index("HumanReplied")
    assert types(cli.events(run_id))[-1] == "RunCompleted"


def test_run_json_and_a_control_json_name_the_commands_that_go_on(cli, steering):
    code, summary = cli.run_json(steering / "repeat.yaml")
    run_id = summary["run_id"]
    assert code == 6
    assert summary["next"] == [
        f'agentledger reply {run_id} "…"',
        f"agentledger run --attach {run_id}",
    ]

    resumed = cli("resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["next"] == [f"agentledger run --attach {run_id}"]


def test_an_approval_given_after_the_run_command_exited_goes_on_when_attached(
    cli, steering, started
):
    proc = start(cli, started, "run", steering / "approval.yaml")
    printed = read_until(proc, "waiting: agentledger approve|deny")
    proc.send_signal(signal.SIGHUP)  # the terminal closed: no handler, nothing said
    proc.wait(timeout=30)
    _, _, command, run_id, call_id = line_with(printed, "waiting:").split()
    wait_unserved(cli, queue_of(cli, run_id))

    approved = cli(command.split("|")[0], run_id, call_id)
    assert approved.returncode == 0, approved.stderr
    assert "ApprovalGranted" in approved.stdout
    (attach,) = quoted(line_with(approved.stderr, "no process serves"))
    attached = typed(cli, attach)

    assert attached.returncode == 0, attached.stderr
    assert f"run {run_id}: completed" in attached.stdout
    assert "PASS file 'note.txt' contains 'hi'" in attached.stdout


def test_a_run_stopped_at_once_is_ended_by_the_attach_it_names(cli, tmp_path, started):
    proc = start(cli, started, "run", deaf_spec(tmp_path, seconds=60, grace_s=60))
    read_until(proc, "ToolCallStarted")
    proc.send_signal(signal.SIGINT)
    read_until(proc, "RunCancelRequested")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    hint = line_with(err, "stopped at once")
    assert "is left cancelling (it was asked to cancel: it ends cancelled)" in hint
    (attach,) = quoted(hint)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # the run's tool set is found from its record, not the current folder
    attached = typed(dataclasses.replace(cli, cwd=elsewhere), attach)

    assert attached.returncode == 5, attached.stderr
    run_id = attach[-1]
    assert f"run {run_id}: cancelled" in attached.stdout
    assert types(cli.events(run_id))[-1] == "RunCancelled"


def test_a_run_whose_run_command_was_killed_completes_when_attached(cli, tmp_path, started):
    proc = start(cli, started, "run", deaf_spec(tmp_path, seconds=2, grace_s=5))
    read_until(proc, "ToolCallStarted")
    proc.kill()  # SIGKILL: the run is left running_tools, its call held by a dead worker
    proc.wait()
    run_id = cli.runs()[0]
    wait_unserved(cli, queue_of(cli, run_id))

    shown = cli("status", run_id)
    assert shown.returncode == 9 and "running_tools" in shown.stdout
    (attach,) = quoted(line_with(shown.stdout, "waiting:"))
    attached = typed(cli, attach)

    assert attached.returncode == 0, attached.stderr
    assert f"run {run_id}: completed" in attached.stdout
    # the dead worker's claim was found out and the read-only call ran again
    assert "died holding it" in attached.stdout and "ToolCallSucceeded" in attached.stdout


# ---- refusals: one line on stderr, the documented exit code, nothing started


def refused(done: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("agentledger: using")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_attach_refuses_an_id_that_is_no_run(cli):
    refused(cli("run", "--attach", "r-nothing.s1"), 2, "no run 'r-nothing.s1'")


def test_attach_refuses_a_run_that_ended_with_the_exit_code_of_its_end(cli, steering):
    code, summary = cli.run_json(steering / "turns.yaml")
    assert code == 3
    line = refused(cli("run", "--attach", summary["run_id"]), 3, "already ended budget_exhausted")
    assert "turns: 2 of 2 turns used" in line


def test_attach_refuses_a_run_on_a_shared_queue(cli, steering):
    publisher = cli.publisher()
    done = cli("run", "--queue", "shared", "--as", publisher, steering / "repeat.yaml")
    assert done.returncode == 6, done.stderr
    hint = line_with(done.stdout, "waits for a person")
    reply, *_, workers = quoted(hint)
    # its controls are signed as its publisher, and the workers of its queue go on with it
    assert reply[-2:] == ["--as", publisher]
    assert workers[:4] == ["agentledger", "workers", "--queue", "shared"]
    run_id = reply[2]
    refused(cli("run", "--attach", run_id), 2, "shared task queue 'shared'", "agentledger workers")


def test_attach_refuses_a_run_published_as_another_publisher(cli, steering):
    publisher = cli.publisher()
    code = cli("run", "--as", publisher, steering / "repeat.yaml").returncode
    assert code == 6
    run_id = cli.runs()[0]
    refused(
        cli("run", "--attach", run_id), 2, f"published as {publisher!r}", "own publisher 'local-"
    )


def test_attach_refuses_a_run_another_live_process_serves(cli, steering, started):
    proc = start(cli, started, "run", steering / "approval.yaml")
    printed = read_until(proc, "waiting: agentledger approve|deny")
    run_id = line_with(printed, "waiting:").split()[-2]

    refused(cli("run", "--attach", run_id), SERVED, "served by a live process", "tail --run")

    assert cli("approve", run_id, "p1").returncode == 0  # the run goes on in its own process
    proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_attach_refuses_a_run_whose_tool_code_changed_until_it_is_put_back(cli, steering):
    code, summary = cli.run_json(steering / "repeat.yaml")
    assert code == 6
    run_id = summary["run_id"]
    (created,) = of_type(cli.events(run_id), "RunCreated")
    tools = steering / "steer_tools.py"
    original = tools.read_text()
    tools.write_text(original + "\n# changed\n")

    line = refused(cli("run", "--attach", run_id), 2, "tool set changed", created["toolset"])
    now = cli("toolset", "--tools", "steer_tools", "--tool-path", steering, "--load").stdout.strip()
    assert now != created["toolset"] and now in line

    tools.write_text(original)
    again = cli("run", "--attach", run_id)
    assert again.returncode == 6, again.stderr  # served again: it still waits for a person


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "run takes a spec file"),
        (("spec.yaml", "--attach", "r-x.s1"), "drop SPEC"),
        (("--attach", "r-x.s1", "--queue", "q"), "drop --queue"),
    ],
)
def test_run_refuses_arguments_that_do_not_go_with_attach(cli, args, words):
    refused(cli("run", *args), 2, words)

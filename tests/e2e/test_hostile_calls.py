"""The hostile suite, through the CLI as a user runs it (`agentledger run SPEC
--json`, then `tail --run RUN --json`, `raw`, `context`): at least 150 hostile
tool calls at the fix_tests tools, each answered as `hostile_calls.py` says —
refused with a coded error the model sees, contained by the sandbox, or taken
as plain data — and none acting outside the workspace or its limits, read off
the ground truth: the files outside, canary listeners on loopback, the process
table, the secrets' absence from everything the CLI prints. It prints its counts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import AGENTLEDGER, EXAMPLES, Cli, copy_example, snapshot
from hostile_calls import (
    LINKS,
    UNKNOWN_TOOLS,
    Batch,
    Ground,
    Hostile,
    first_run,
    second_run,
    spec,
    write_spec,
)

from agentledger.services.adapters.tools.sandbox import python_paths

LIMITS = {  # small, so that the limits are reached fast
    "AGENTLEDGER_SANDBOX_CPU_S": "2",
    "AGENTLEDGER_SANDBOX_MEMORY_MB": "768",
    "AGENTLEDGER_SANDBOX_FILE_MB": "1",
    "AGENTLEDGER_SANDBOX_PROCESSES": "32",
    "AGENTLEDGER_SANDBOX_TMP_MB": "64",  # /tmp and /dev/shm
}
RUN_TIMEOUT_S = 300.0


class Canaries:
    """A TCP listener on 127.0.0.1 and a unix socket in the abstract namespace,
    counting connections; and a watch of the process table for the fork bomb, while
    a workspace's calc.py is the bomb (its processes can be there only then; the
    process table read 50 times a second the whole time costs seconds of CPU)."""

    def __init__(self, bomb_mark: str, workspaces: Path):
        self.workspaces = workspaces
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp6 = socket.create_server(("::1", self.tcp.getsockname()[1]), family=socket.AF_INET6)
        self.abstract = "\0agentledger-canary-" + uuid.uuid4().hex[:8]
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.abstract)
        self.unix.listen()
        self.connections: list[str] = []
        self.bomb_mark = bomb_mark.encode()
        self.bomb_peak = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._accept, args=(s,), daemon=True)
            for s in (self.tcp, self.tcp6, self.unix)
        ] + [threading.Thread(target=self._watch, daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def _accept(self, server: socket.socket) -> None:
        server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            self.connections.append(repr(server))
            conn.close()

    def bombs(self) -> int:
        count = 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if self.bomb_mark in Path(f"/proc/{entry}/cmdline").read_bytes():
                        count += 1
                except OSError:
                    pass
        return count

    def _bomb_written(self) -> bool:
        for ws in self.workspaces.iterdir() if self.workspaces.is_dir() else ():
            try:
                if self.bomb_mark in (ws / "calc.py").read_bytes():
                    return True
            except OSError:
                pass
        return False

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            if self._bomb_written():
                self.bomb_peak = max(self.bomb_peak, self.bombs())

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for s in (self.tcp, self.tcp6, self.unix):
            s.close()


@dataclass
class Ran:
    run_id: str
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]
    printed: str  # everything the CLI printed for this run: run, tail, raw, context


@dataclass
class Suite:
    cli: Cli
    ground: Ground
    canaries: Canaries
    outside_before: dict[str, bytes]
    example_before: dict[str, bytes]
    batches: list[Batch]
    payload_of: dict[str, str]
    runs: list[Ran]

    @property
    def calls(self) -> list[tuple[Hostile, Ran]]:
        return [
            (h, ran)
            for batch, ran in zip(self.batches, self.runs, strict=True)
            for h in batch.calls
        ]


def _cli(cli: Cli, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTLEDGER, *map(str, args)],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def _run(cli: Cli, spec_path: Path) -> Ran:
    done = _cli(cli, "run", "--json", spec_path)
    assert done.stdout.strip(), f"no summary; stderr:\n{done.stderr[-3000:]}"
    summary = json.loads(done.stdout.strip().split("\n")[-1])
    run_id = summary["run_id"]
    tail = _cli(cli, "tail", "--run", run_id, "--json")
    assert tail.returncode == 0, tail.stderr
    raw = _cli(cli, "raw", run_id)
    context = _cli(cli, "context", run_id, "--turn", "2", "--json")
    # split on "\n" only: a path with U+2028 in it is a line break to str.splitlines
    events = [json.loads(line) for line in tail.stdout.split("\n") if line.strip()]
    printed = "\n".join(x.stdout + x.stderr for x in (done, tail, raw, context))
    return Ran(run_id, done.returncode, summary, events, printed)


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Suite]:
    cli = make_cli(tmp_path_factory.mktemp("hostile"))
    token = f"al-hostile-{uuid.uuid4().hex[:10]}"
    outside = cli.cwd / "outside"
    outside.mkdir()
    secret = f"canary-secret-{uuid.uuid4().hex}"
    (outside / "secret.txt").write_text(secret)
    example = copy_example("fix_tests", cli.cwd)
    for name, target in LINKS.items():
        (example / "ws" / name).symlink_to(target.format(outside=outside))
    env_name = "AL_HOSTILE_CANARY"
    cli.env.update(LIMITS)
    cli.env[env_name] = f"env-canary-{uuid.uuid4().hex}"
    home = os.path.expanduser("~")
    canaries = Canaries(
        bomb_mark=f"{60 + uuid.uuid4().int % 1000 / 1000:.3f}",
        workspaces=cli.state_dir / "workspaces",
    )
    ground = Ground(
        outside=outside,
        secret=secret,
        env_name=env_name,
        port=canaries.port,
        abstract_socket=canaries.abstract,
        bomb_mark=canaries.bomb_mark.decode(),
        token=token,
        state_dir=cli.cwd / ".agentledger",
        home=home,
        home_visible=tuple(
            {p[len(home) + 1 :].split("/")[0] for p in python_paths() if p.startswith(home + "/")}
        ),
        site_packages=next(p for p in sys.path if p.endswith("site-packages")),
    )
    outside_before = snapshot(outside)
    example_before = snapshot(EXAMPLES / "fix_tests")
    one = first_run(ground)
    two, turns, payload_of = second_run(ground)
    spec_one = write_spec(
        example / "hostile_paths.yaml",
        spec([one.calls[i : i + 40] for i in range(0, len(one.calls), 40)], acceptance=False),
    )
    spec_two = write_spec(example / "hostile_code.yaml", spec(turns, acceptance=True))
    try:
        runs = _side_by_side(cli, spec_one, spec_two)
        yield Suite(
            cli, ground, canaries, outside_before, example_before, [one, two], payload_of, runs
        )
    finally:
        canaries.close()


def _side_by_side(cli: Cli, spec_one: Path, spec_two: Path) -> list[Ran]:
    """Both runs at once (neither waits for the other's turns). The second starts once
    the first's workspace is there: its payload listing other workspaces must see one."""
    workspaces = cli.state_dir / "workspaces"
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_run, cli, spec_one)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not (workspaces.is_dir() and any(workspaces.iterdir())):
            if first.done() or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        second = pool.submit(_run, cli, spec_two)
        return [first.result(), second.result()]


def _answer(h: Hostile, events: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """How the call ended in the log: its last outcome event's type and data."""
    mine = [e for e in events if e["data"].get("call_id") == h.call_id]
    final = [
        e for e in mine if e["type"] in ("ToolCallRejected", "ToolCallFailed", "ToolCallSucceeded")
    ]
    assert final, (
        f"{h.call_id} {h.name}({h.input!r:.80}) has no outcome: {[e['type'] for e in mine]}"
    )
    return final[-1]["type"], final[-1]["data"]


def _check(h: Hostile, kind: str, data: dict[str, Any], payload: str | None) -> str | None:
    """What is wrong with the answer a call got, or None."""
    what = f"{h.call_id} {h.name}({json.dumps(h.input)[:100]})"
    if h.answer == "refused":
        if kind == "ToolCallSucceeded":
            return f"{what} succeeded: {json.dumps(data.get('output'))[:300]}"
        if data["error"]["code"] != h.code:
            return f"{what} got {data['error']['code']}, not {h.code}: {data['error']['message'][:200]}"
        return None
    if kind != "ToolCallSucceeded":
        return f"{what} failed: {data['error']}"
    output = json.dumps(data["output"])
    if "ESCAPED" in output:
        return f"{what} escaped: {output[:400]}"
    if h.answer == "harmless" and data["output"].get("matches"):
        return f"{what} matched: {output[:300]}"
    if payload is not None and payload != "kill_everything":
        if f"HOSTILE-REPORT {payload}: contained" not in output:
            return f"{what} ({payload}) did not report containment: {output[-600:]}"
    if payload == "kill_everything" and data["output"]["exit_code"] == 0:
        return f"{what} (kill_everything) exited 0"
    return None


def test_at_least_150_hostile_calls_are_each_answered_as_they_must_be(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = []
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for h, ran in suite.calls:
        kind, data = _answer(h, ran.events)
        problem = _check(h, kind, data, suite.payload_of.get(h.call_id))
        if problem:
            wrong.append(problem)
        counts[h.answer] += 1
        kinds[h.kind] += 1
    total = sum(counts.values())
    with capsys.disabled():
        print(
            f"\nhostile tool calls: {total} sent through the CLI in {len(suite.runs)} runs; "
            f"{counts['refused']} refused with a coded error, {counts['contained']} contained by the "
            f"sandbox (code written, then run by run_tests), {counts['harmless']} taken as plain data; "
            f"{len(wrong)} answered otherwise"
        )
        print("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    assert total >= 150
    assert wrong == []


def test_nothing_outside_the_workspace_was_made_or_changed(suite: Suite) -> None:
    g = suite.ground
    assert snapshot(g.outside) == suite.outside_before
    assert snapshot(EXAMPLES / "fix_tests") == suite.example_before
    made = [p for p in suite.cli.cwd.rglob(f"*{g.token}*")]
    made += [
        p
        for p in (Path("/tmp"), Path("/"), Path("/usr/lib"), Path(g.site_packages), Path(g.home))
        if any(p.glob(f"*{g.token}*"))
    ]
    assert made == []
    assert not (g.outside / "made-through-a-link.txt").exists()
    first_ws = suite.cli.workspace(suite.runs[0].run_id)
    assert sorted(p.name for p in first_ws.iterdir()) == sorted(
        ["calc.py", "pytest.ini", "test_calc.py", *LINKS]
    )


def test_the_tests_and_the_first_runs_workspace_were_not_touched_by_the_code(suite: Suite) -> None:
    second_ws = suite.cli.workspace(suite.runs[1].run_id)
    assert (second_ws / "test_calc.py").read_text() == (
        EXAMPLES / "fix_tests" / "ws" / "test_calc.py"
    ).read_text()
    assert not (second_ws / "conftest.py").exists() and not (second_ws / "leak2.txt").exists()


def test_no_connection_reached_the_canary_listeners(suite: Suite) -> None:
    assert suite.canaries.connections == []


def test_the_fork_bomb_stayed_within_the_process_limit_and_left_nothing(suite: Suite) -> None:
    limit = int(LIMITS["AGENTLEDGER_SANDBOX_PROCESSES"])
    assert 0 < suite.canaries.bomb_peak <= limit
    assert suite.canaries.bombs() == 0
    [bomb] = [c for c, name in suite.payload_of.items() if name == "fork_bomb"]
    _, data = _answer(next(h for h, _ in suite.calls if h.call_id == bomb), suite.runs[1].events)
    assert f"the limit of {limit} processes" in data["error"]["message"]


def test_the_cpu_limit_stopped_the_spinning_code(suite: Suite) -> None:
    [spin] = [c for c, name in suite.payload_of.items() if name == "spin_the_cpu"]
    h = next(h for h, _ in suite.calls if h.call_id == spin)
    _, data = _answer(h, suite.runs[1].events)
    assert "the CPU limit of 2 s" in data["error"]["message"]
    # 2 CPU seconds take a busy machine longer on the wall; run_tests gives up at 50 s
    assert data["finished_at"] - data["started_at"] < 45


def test_the_secrets_appear_nowhere_the_cli_prints(suite: Suite) -> None:
    g = suite.ground
    for ran in suite.runs:
        assert g.secret not in ran.printed
        assert suite.cli.env[g.env_name] not in ran.printed


def test_the_model_sees_each_refusal_as_a_coded_error(suite: Suite) -> None:
    """The first run's second request carries the results of its first turn."""
    ran = suite.runs[0]
    done = _cli(suite.cli, "context", ran.run_id, "--turn", "2", "--json")
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)
    results = {
        b["tool_use_id"]: b
        for m in context["request"]["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    }
    first_turn = suite.batches[0].calls[:40]
    for h in first_turn:
        if h.answer != "refused":
            continue
        block = results[h.call_id]
        assert block["is_error"] is True
        assert json.loads(block["content"])["error"]["code"] == h.code


def test_the_code_run_ends_completed_on_the_sandboxed_acceptance_check(suite: Suite) -> None:
    ran = suite.runs[1]
    assert ran.code == 0, ran.summary
    [check] = [
        e["data"]
        for e in ran.events
        if e["type"] == "AcceptanceChecked" and e["data"]["index"] == 0
    ]
    assert check["passed"] is True and check["evidence"]["exit_code"] == 0


def test_an_acceptance_command_cannot_write_core_pattern_nor_run_as_host_root(suite: Suite) -> None:
    """The safe probe (its own value written back) from publisher text: refused."""
    [check] = [
        e["data"] for e in suite.runs[1].events
        if e["type"] == "AcceptanceChecked" and e["data"]["index"] == 1
    ]  # fmt: skip
    assert check["passed"] is True, check["evidence"]
    assert "Read-only file system" in check["evidence"]["stderr_tail"]
    assert check["evidence"]["stdout_tail"].strip() == "contained"


def test_calls_to_tools_the_run_does_not_have_are_refused_before_it_starts(
    suite: Suite, tmp_path: Path
) -> None:
    """A scripted model proposing tools outside its tool set is caught at submit time,
    each by name; a live model's proposal of one is rejected as `unknown_tool`."""
    for i, name in enumerate(UNKNOWN_TOOLS):
        calls = [
            [Hostile(f"u{i}", name, {"command": "cat /etc/shadow"}, "refused", "unknown_tool")]
        ]
        path = write_spec(
            suite.cli.cwd / "fix_tests" / f"unknown{i}.yaml", spec(calls, acceptance=False)
        )
        done = _cli(suite.cli, "run", path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "model.scripted.0.tool_use.0.name" in done.stderr and repr(name) in done.stderr
        assert "Traceback" not in done.stderr

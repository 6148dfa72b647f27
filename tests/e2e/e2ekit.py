"""The `agentledger` command line as a user runs it: a child process in a
folder of its own, with its own key prefix. Helpers to read what it printed."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from agentledger.services.adapters.redis.local_server import DEFAULT_URL, answers
from agentledger.services.adapters.redis.local_service import LocalService

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMAND_TIMEOUT_S = 60.0

_script = Path(sys.executable).with_name("agentledger")
# the installed console script when it belongs to this interpreter, else the module
AGENTLEDGER = (
    [str(_script)]
    if _script.exists()
    else [sys.executable, "-m", "agentledger.services.entrypoints.cli.main"]
)


def clean_environ(prefix: str, state_dir: Path) -> dict[str, str]:
    """This process's environment without any agentledger setting but the prefix
    and a state folder of the test's own (never the user's); REDIS_URL is kept,
    so the suite runs against the Redis the user chose. The CLI probes nothing
    unless told: the suite tells it to use the machine's Redis at the default
    address when one answers there (each test with its own prefix), as a user
    may with AGENTLEDGER_PROBE_URL, else the test's own local service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env["AGENTLEDGER_PREFIX"] = prefix
    env["AGENTLEDGER_STATE_DIR"] = str(state_dir)
    env["AGENTLEDGER_PROBE_URL"] = DEFAULT_URL
    # the examples' own pytest runs need no plugins, and loading every plugin
    # installed next to this interpreter costs over a second per acceptance check
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["AGENTLEDGER_SANDBOX_ENV"] = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"  # into the sandbox, too
    return env


@dataclass
class Cli:
    cwd: Path
    env: dict[str, str]
    filed: set[tuple[str, str]] = field(default_factory=set, repr=False)  # by `publisher`

    def __call__(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AGENTLEDGER, *map(str, args)],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )

    def run_json(self, spec: Path) -> tuple[int, dict[str, Any]]:
        """`run --json SPEC`: its exit code and the summary it printed."""
        done = self("run", "--json", spec)
        assert done.stdout.strip(), f"no summary; stderr:\n{done.stderr}"
        return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's envelopes, as `tail --run RUN --json` prints them."""
        done = self("tail", "--run", run_id, "--json")
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def wait_events(
        self, run_id: str, until: Callable[[list[dict[str, Any]]], bool], timeout_s: float
    ) -> list[dict[str, Any]]:
        """The run's envelopes, as `tail --run RUN --json` prints them, once `until`
        holds of them: if not at once, of what one `tail --run RUN --follow --json`
        printed so far (one CLI process waits, instead of one per poll: each costs
        half a second of CPU), then the whole log again."""
        deadline = time.monotonic() + timeout_s
        done = self("tail", "--run", run_id, "--json")  # exit 2: no such run (yet)
        if done.returncode == 0:
            now = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
            if until(now):
                return now
        # a run not created yet (its request still in the inbox): one follower of every run's
        # events from the start waits for it, not a `tail --run` that ends at once, asked again
        args = ["--run", run_id] if done.returncode == 0 else ["--from-start"]

        def of_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [e for e in events if e["run_id"] == run_id]

        seen: list[dict[str, Any]] = []
        while not until(seen):
            if time.monotonic() > deadline:
                raise AssertionError(f"{run_id}: not within {timeout_s:g}s: {types(seen)}")
            seen = of_run(self.follow(args, lambda got: until(of_run(got)), deadline))
        return self.events(run_id)

    def wait_ended(self, run_ids: list[str], timeout_s: float) -> None:
        """Until each run has ended or waits for a person, as one `tail --follow
        --from-start --json` of every run shows it (or the time is up)."""
        want = set(run_ids)

        def ended(seen: list[dict[str, Any]]) -> bool:
            return want <= {e["run_id"] for e in seen if e["type"] in SETTLING}

        deadline = time.monotonic() + timeout_s
        seen: list[dict[str, Any]] = []
        while not ended(seen) and time.monotonic() < deadline:
            seen = self.follow(["--from-start"], ended, deadline)

    def follow(
        self, args: list[str], until: Callable[[list[dict[str, Any]]], bool], deadline: float
    ) -> list[dict[str, Any]]:
        """What `tail ARGS --follow --json` printed until `until` held, the deadline
        passed or it ended (with --run, of a run not created yet: it is asked again)."""
        proc = subprocess.Popen(
            [*AGENTLEDGER, "tail", *args, "--follow", "--json"], cwd=self.cwd,
            env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for text in proc.stdout:
                lines.put(text)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        seen: list[dict[str, Any]] = []
        try:
            while not until(seen):
                try:
                    text = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if text is None:
                    time.sleep(0.2)  # no such run yet
                    break
                if text.strip():
                    seen.append(json.loads(text))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return seen

    def runs(self) -> list[str]:
        done = self("runs")
        assert done.returncode == 0, done.stderr
        return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]

    def publisher(self, name: str = "e2e") -> str:
        """A publisher granted every principal, scope and queue, and workspaces in
        the test's folder, filed (once) with `publishers add` as a user files one;
        its name, for `submit --as`. Asked of the CLI once per name (one `publishers add`,
        which refuses a name the file holds already: filed either way): a run's every
        `submit` needs no more processes."""
        where = (self.env.get("AGENTLEDGER_STATE_DIR", ""), name)  # the file is the state's
        if where in self.filed:
            return name
        added = self(
            "publishers", "add", name, "--principal", "*@*", "--scopes", "*", "--queues", "*",
            "--workspaces", str(self.cwd),
        )  # fmt: skip
        # filed before (by another Cli on this state folder, or another thread of the test)
        assert added.returncode == 0 or "already" in added.stderr, added.stderr
        self.filed.add(where)
        return name

    def redis(self) -> redis.Redis:
        """A client of the Redis this CLI uses (as it finds one: REDIS_URL, the
        probe address when it is set and answers, else its local service, started
        if need be)."""
        url = self.env.get("REDIS_URL")
        probe = self.env.get("AGENTLEDGER_PROBE_URL", "off")
        if url is None and probe != "off":
            url = probe if answers(probe) else None
        if url is None:
            url, _ = LocalService(self.state_dir).start()
        return redis.Redis.from_url(url)

    @property
    def state_dir(self) -> Path:
        return Path(self.env["AGENTLEDGER_STATE_DIR"])

    def workspace(self, run_id: str) -> Path:
        return self.state_dir / "workspaces" / run_id

    def stop_local_service(self) -> None:
        """Stop the local Redis service of this CLI's state folder, if one started."""
        LocalService(self.state_dir).stop(force=True)


# the events after which a run does nothing more by itself: it ended, or waits for a person
SETTLING = frozenset(
    {
        "RunCompleted",
        "RunFailed",
        "RunCancelled",
        "RunBudgetExhausted",
        "RunTimedOut",
        "RunEscalated",
    }
)


def copy_example(name: str, into: Path) -> Path:
    target = into / name
    shutil.copytree(
        EXAMPLES / name, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
    )
    return target


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# Events whose presence depends on scheduling, not on what the run did: a call
# waits for a lock when the previous call's release has not landed yet, and a
# model claim a busy machine let expire is claimed again (attempt 2).
INCIDENTAL = frozenset({"ToolCallWaiting"})


def essential(events: list[dict[str, Any]]) -> list[str]:
    """The event types that must be there, in order, however the steps were scheduled."""
    return [
        e["type"]
        for e in events
        if e["type"] not in INCIDENTAL
        and not (e["type"] == "ModelRequested" and e["data"]["attempt"] > 1)
    ]


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == type_]


def by_call(events: list[dict[str, Any]], call_id: str) -> list[str]:
    """The types of the events about one tool call, in order."""
    return [e["type"] for e in events if e["data"].get("call_id") == call_id]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes, to show that nothing changed."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def delete_prefix(url: str, pattern: str) -> None:
    """Delete our own keys (SCAN + DEL); a shared server is never flushed."""
    client = redis.Redis.from_url(url)
    try:
        batch = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
    finally:
        client.close()


def start_intake(cli: Cli, *extra: str) -> subprocess.Popen[str]:
    """`agentledger intake` as an operator starts it, in the test's folder (its
    publishers file the state folder's), returned once it is up."""
    proc = subprocess.Popen(
        [*AGENTLEDGER, "intake", *extra],
        cwd=cli.cwd,
        env=cli.env,
        text=True,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "intake up" not in line:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the intake did not start: {line!r} (exit {proc.returncode})")
    return proc


class Started:
    """`agentledger workers` and the `agentledger intake` beside them, stopped together
    (as `subprocess.Popen` is by `stop_workers`): the workers run no intake."""

    def __init__(self, workers: subprocess.Popen[str], intake: subprocess.Popen[str]):
        self.workers, self.intake = workers, intake
        self.stdout, self.pid = workers.stdout, workers.pid

    def poll(self) -> int | None:
        return self.workers.poll()

    def terminate(self) -> None:
        self.workers.terminate()
        self.intake.terminate()

    def kill(self) -> None:
        self.workers.kill()
        self.intake.kill()

    def wait(self, timeout: float | None = None) -> int:
        self.intake.wait(timeout)
        return self.workers.wait(timeout)


def start_workers(cli: Cli, *, tools: list[str], tool_path: Path) -> Started:
    """`agentledger workers` serving these tool modules, as an operator starts them:
    in the test's folder, returned once its tool set is registered ("workers up"),
    with an `agentledger intake` beside them (the workers run none)."""
    args = [*AGENTLEDGER, "workers", "--tools", *tools, "--tool-path", str(tool_path)]
    proc = subprocess.Popen(args, cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "workers up" in line, f"the workers did not start: {line!r} (exit {proc.poll()})"
    try:
        return Started(proc, start_intake(cli))
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def stop_workers(procs: Sequence[subprocess.Popen[str] | Started]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""Run one document's shell blocks as a reader would, in order, in a folder of
their own: a copy of the repository's `examples/` (the reader's clone), a state
folder and a key prefix of its own, `agentledger` on PATH (this checkout's code),
the Redis REDIS_URL names, else the shared 127.0.0.1:6379, else a private
redis-server. Shell variables and the working folder carry from one command to
the next; background commands (`… &`) live until the document is done.

Printed paths, the prefix and the user are shown as a reader's would be
(`/home/you/agentledger`, `al`, `you`), so refreshed samples read naturally; run
ids a document names are mapped to the ones this session's runs got."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.blocks import Block, Command, blocks_of, shown_path
from tests.docs.normalise import difference, matches
from tests.docs.reference import ROOT

COMMAND_TIMEOUT_S = 180.0
SETTLE_S = 30.0  # a read command is asked again, this long at most, until it prints what is shown
READ_ONLY = re.compile(
    r"^agentledger (status|runs|trace|context|toolset|workers --list|local status|publishers list"
    r"|tail(?!.*--follow)|replay(?!.*--rerun)|dead-letters(?!.*--redrive))\b"
)
STARTUP_TIMEOUT_S = 60.0
RUN_ID = re.compile(r"\br-[0-9a-f]{8,}(?:\.s\d+)?")
PROJECT_SHOWN = "/home/you/agentledger"
STATE_SHOWN = "/home/you/.local/state/agentledger"
PREFIX_SHOWN = "al"
USER_SHOWN = "you"


@dataclass
class Report:
    """What running one document found."""

    path: Path
    ran: int = 0  # blocks run
    commands: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    problems: list[str] = field(default_factory=list)
    unfixable: int = 0  # problems writing the printed outputs cannot mend (a command that failed)
    refreshed: str | None = None  # the document with the printed outputs, when they differ


def redis_url_for_docs(workdir: Path) -> tuple[str, object | None]:
    """REDIS_URL, else the shared server when it answers, else a private one (and
    its handle, to stop)."""
    from agentledger.services.adapters.redis.local_server import DEFAULT_URL, answers, start_server

    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None
    if answers(DEFAULT_URL):
        return DEFAULT_URL, None
    server = start_server(workdir / "redis")
    return server.url, server


class DocSession:
    def __init__(self, workdir: Path, redis_url: str, prefix: str | None = None):
        self.workdir = workdir
        self.project = workdir / "agentledger"
        self.state = workdir / "state"
        self.prefix = prefix or f"docs-{uuid.uuid4().hex[:12]}"
        self.redis_url = redis_url
        self.envfile = workdir / ".env"
        self.cwdfile = workdir / ".cwd"
        self.background: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.ids: dict[str, str] = {}  # a run id the document shows -> this session's
        self._setup()

    def _setup(self) -> None:
        self.project.mkdir(parents=True)
        shutil.copytree(
            ROOT / "examples", self.project / "examples",
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
        )  # fmt: skip
        bin_dir = self.workdir / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "agentledger"
        shim.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -m agentledger.services.entrypoints.cli.main "$@"\n'
        )
        shim.chmod(0o755)
        self.envfile.write_text("")
        self.cwdfile.write_text(str(self.project))
        env = {
            k: v for k, v in os.environ.items()
            if not k.startswith(("AGENTLEDGER_", "ANTHROPIC_", "OTEL_", "PYTEST_"))
        }  # fmt: skip
        env.update(
            AGENTLEDGER_PREFIX=self.prefix,
            AGENTLEDGER_STATE_DIR=str(self.state),
            REDIS_URL=self.redis_url,
            PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]),
            PYTHONPATH=os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)]),
            PYTHONUNBUFFERED="1",  # stdout and stderr interleave as on a terminal
            PYTHONDONTWRITEBYTECODE="1",
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
            AGENTLEDGER_SANDBOX_ENV="PYTEST_DISABLE_PLUGIN_AUTOLOAD",
            LOGNAME=USER_SHOWN, USER=USER_SHOWN, COLUMNS="100", TERM="dumb", NO_COLOR="1",
        )  # fmt: skip
        self.env = env

    # ------------------------------------------------------------ running

    def _script(self, command: str) -> str:
        # `$?` is the previous command's exit code, as in one shell
        return (
            f'set -a; . "{self.envfile}" 2>/dev/null; cd "$(cat "{self.cwdfile}")" || exit 97\n'
            f"(exit ${{DOCS_LAST_EXIT:-0}})\n"
            f"{command}\n"
            f'DOCS_LAST_EXIT=$?; export -p > "{self.envfile}"; pwd > "{self.cwdfile}"; exit $DOCS_LAST_EXIT\n'
        )

    def run(self, command: str) -> tuple[int, list[str]]:
        """Run one command; its exit code and what it printed, as a reader sees it."""
        proc = subprocess.Popen(
            ["bash", "-c", self._script(command)], env=self.env, cwd=self.project,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            out, _ = proc.communicate()
            return 124, [*self.shown(out), f"[killed: no end within {COMMAND_TIMEOUT_S:g}s]"]
        return proc.returncode, self.shown(out)

    def start(self, command: str) -> str | None:
        """Start a background command; None once it printed its first line, else why not."""
        log = self.workdir / f"background-{len(self.background)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                ["bash", "-c", self._script(re.sub(r"&\s*$", "", command))], env=self.env,
                cwd=self.project, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.background.append((proc, log))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if b"\n" in log.read_bytes():
                return None
            if proc.poll() is not None:
                return f"it exited {proc.returncode} before printing a line"
            time.sleep(0.1)
        return f"no line within {STARTUP_TIMEOUT_S:g}s"

    def write(self, relative: str, lines: list[str]) -> None:
        """Write a file the document shows, as the reader would (inside the clone)."""
        target = (self.project / relative).resolve()
        if not target.is_relative_to(self.project.resolve()):
            raise ValueError(f"<!-- file: {relative} --> is outside the reader's folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        for proc, _ in self.background:
            _stop_group(proc)
        self.background.clear()

    def shown(self, out: bytes) -> list[str]:
        text = out.decode(errors="replace")
        for real, shown in (
            (str(self.state), STATE_SHOWN), (str(self.project), PROJECT_SHOWN),
            (os.path.realpath(self.state), STATE_SHOWN), (os.path.realpath(self.project), PROJECT_SHOWN),
            (self.prefix, PREFIX_SHOWN),
        ):  # fmt: skip
            text = text.replace(real, shown)
        return [line.rstrip() for line in text.splitlines()]

    # ------------------------------------------------------------ run ids

    def mapped(self, text: str) -> str:
        """`text` with the run ids the document showed in an output before replaced
        by this session's (an id it never showed, e.g. one that names no run, stays)."""
        return RUN_ID.sub(lambda m: self.ids.get(m[0], m[0]), text)

    def learn(self, shown: list[str], printed: list[str]) -> None:
        want = _unique(RUN_ID.findall("\n".join(shown)))
        got = _unique(RUN_ID.findall("\n".join(printed)))
        for doc_id, real in zip(want, got, strict=False):
            self.ids.setdefault(doc_id, real)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    # the session's other processes (a run's workers) end with it: they are its children


def run_document(path: Path, session: DocSession, *, text: str | None = None) -> Report:
    """Run every block of `path` not marked `not run`, in order; what was found."""
    source = path.read_text() if text is None else text
    report = Report(path)
    blocks = blocks_of(path, source)
    outputs: dict[int, list[tuple[Command, list[str], bool]]] = {}
    try:
        for block in blocks:
            if block.lang == "file":
                session.write(block.file or "", block.body)
                continue
            if block.not_run is not None:
                report.skipped.append((block.where, block.not_run))
                continue
            report.ran += 1
            outputs[block.start] = [_run_command(block, c, session, report) for c in block.commands]
    finally:
        session.close()
    if any(not ok for results in outputs.values() for _, _, ok in results):
        report.refreshed = _rewrite(source, blocks, outputs, session)
    return report


def _run_command(
    block: Block, command: Command, session: DocSession, report: Report
) -> tuple[Command, list[str], bool]:
    report.commands += 1
    text = session.mapped(command.text)
    where = f"{shown_path(block.path)}:{command.line}"
    if command.background:
        why = session.start(text)
        if why is not None:
            report.problems.append(f"{where}: `{text}` in the background: {why}")
            report.unfixable += 1
        return command, [], why is None
    code, printed = session.run(text)
    if block.lang == "sh":
        if code != 0:
            report.problems.append(f"{where}: `{text}` exited {code}:\n" + "\n".join(printed[-20:]))
            report.unfixable += 1
        session.learn([], printed)
        return command, printed, code == 0
    shown = [session.mapped(line) for line in command.expected]
    ok = matches(shown, printed)
    deadline = time.monotonic() + SETTLE_S
    while not ok and READ_ONLY.match(text) and time.monotonic() < deadline:
        time.sleep(0.5)  # what it reads may not have happened yet (a run on other workers)
        code, printed = session.run(text)
        ok = matches(shown, printed)
    session.learn(command.expected, printed)
    if not ok:
        report.problems.append(
            f"{where}: `{text}` (exit {code}) printed other than shown:\n"
            + difference(shown, printed)
        )
    return command, printed, ok


def _rewrite(
    source: str,
    blocks: list[Block],
    outputs: dict[int, list[tuple[Command, list[str], bool]]],
    session: DocSession,
) -> str:
    """The document with each run block's commands naming this session's run ids and
    each output that did not match replaced by what was printed."""
    lines = source.splitlines()
    for block in reversed(blocks):
        if block.start not in outputs:
            continue
        if block.lang == "sh":
            body = [session.mapped(line) for line in lines[block.start : block.end]]
        else:
            body = []
            for command, printed, ok in outputs[block.start]:
                body.append("$ " + session.mapped(command.text))
                body += [session.mapped(x) for x in command.expected] if ok else printed
            body = [block.indent + line if line else line for line in body]
        lines[block.start : block.end] = body
    return "\n".join(lines) + "\n"

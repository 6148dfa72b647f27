"""The arguments of `agentledger` and each of its commands. Every command takes
`--json` (one JSON object on stdout, or JSON lines for a stream). Each value is
checked (`arg_types`), so no bad id, number or name reaches a model, a key or Redis.
`parser(raising=True)` raises `UsageError` for arguments it refuses (the CLI
reports it: usage on stderr, or with `--json` one object on stdout); without,
argparse prints and exits 2 as usual."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from agentledger.services.entrypoints.cli import arg_types
from agentledger.services.entrypoints.cli.arg_types import (  # the names other modules import from here
    INTAKE_POOL,
    MAX_WHOLE,
    POOLS,
    max_processes,
)
from agentledger.services.entrypoints.cli.travel_parser import travel_commands
from agentledger.services.entrypoints.reply import (
    shown,  # re-exported: the commands' messages use it
)
from agentledger.services.errors import BadOption  # re-exported: the commands raise it

__all__ = [
    "CONTROLS", "INTAKE_POOL", "LOG_FORMATS", "LOG_LEVELS", "MAX_WHOLE", "POOLS", "USAGE_EXIT",
    "BadOption", "UsageError", "max_processes", "metrics_options", "package_version", "parser",
    "shown",
]  # fmt: skip

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")

# (command, help, takes a call id, name of its free-text argument)
CONTROLS = (
    ("cancel", "ask a run to stop: running tools get a cancel signal", False, "reason"),
    ("approve", "approve a call awaiting approval, or a flow's gate", True, "note"),
    ("deny", "deny a call awaiting approval (the model is told), or a flow's gate", True, "note"),
    ("reply", "guidance for a run awaiting a human, or a flow gate's answer", False, "text"),
    ("resume", "let a run awaiting a human go on", False, "note"),
    ("abort", "end a run awaiting a human as failed", False, "note"),
)


USAGE_EXIT = (
    2  # argparse's code for refused arguments; exit_codes.USAGE (the parser imports no events)
)


class UsageError(Exception):
    """Arguments the parser refused: `prog` is the command (`agentledger status`)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(f"{parser.prog}: {message}")
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, raising UsageError instead of printing and exiting: the
    caller decides how to say it (`--json` wants an object on stdout)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only `--version` asks

    try:
        return version("agentledger")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    """`--version`: the installed package's, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(f"agentledger {package_version()}")
        parser.exit()


Command = Callable[[str, str], argparse.ArgumentParser]  # adds a command: (name, help)


def parser(*, raising: bool = False) -> argparse.ArgumentParser:
    kind = _Parser if raising else argparse.ArgumentParser  # its subparsers are of its class
    p = kind(prog="agentledger", description="Tool-using AI agents on an event log.")
    p.add_argument("--version", action=_Version, help="show program's version number and exit")
    p.add_argument(
        "--log-level", choices=LOG_LEVELS, default="warning", help="of the log lines on stderr"
    )
    p.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text",
        help="of the log lines on stderr: json is one object a line with run, call, pool, worker",
    )  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_)
        c.add_argument("--json", action="store_true", help="machine output on stdout")
        _log_options(c)
        return c

    for family in FAMILIES:
        family(command)
    return p


def _run_commands(command: Command) -> None:
    """`run` (embedded) and `submit` (to a shared task queue)."""
    r = command("run", "run a spec end to end on embedded workers and follow it")
    r.add_argument("spec", nargs="?", help="the spec file (YAML); none with --attach")
    r.add_argument(
        "--attach", metavar="RUN", type=arg_types.run_id,
        help="go on with an embedded run of this state folder no process serves (its `run` exited): "
        "serve it with the tool set it started with and follow it to its end",
    )  # fmt: skip
    r.add_argument(
        "--processes", type=arg_types.processes, default=0,
        help=f"worker processes (0: threads in this process; at most {max_processes()} here)",
    )  # fmt: skip
    r.add_argument(
        "--queue", type=arg_types.queue, help="join this shared task queue (default: a private one)"
    )
    _mcp(r)
    _signer(r, "sign as this publisher (default: the embedded run's own, for private queues)")
    _threads(r)
    s = command("submit", "publish a spec to a task queue; print the run id")
    s.add_argument("spec")
    s.add_argument(
        "--queue", type=arg_types.queue, help="the task queue (default: the spec's, else 'default')"
    )
    s.add_argument(
        "--unserved", action="store_true", help="publish even if no worker ever served it"
    )
    _mcp(s)
    _signer(s, "the publisher to sign as (required; `agentledger publishers add` files one)")


def _worker_commands(command: Command) -> None:
    """The long-running roles and what they serve: `workers`, `dead-letters`, `intake`, `toolset`."""
    w = command("workers", "serve a task queue with a tool set until SIGTERM")
    _toolset(w)
    w.add_argument(
        "--queue",
        type=arg_types.queue,
        default="default",
        help="the task queue (default: 'default')",
    )
    w.add_argument(
        "--processes", type=arg_types.processes, default=1,
        help=f"worker processes, supervised (at most {max_processes()} here)",
    )  # fmt: skip
    w.add_argument(
        "--pools", type=arg_types.pools, default=list(POOLS), metavar="POOL,…",
        help="the pools to run (default: model,tools,accept); 'intake' alone: an intake, no tool code",
    )  # fmt: skip
    _mcp(w)
    w.add_argument(
        "--list", action="store_true", help="list the live workers instead; serve nothing"
    )
    dl = command("dead-letters", "messages a task queue gave up on; re-drive one")
    dl.add_argument("--queue", type=arg_types.queue, help="only this task queue")
    dl.add_argument("--redrive", metavar="HANDLE", help="put this dead letter back on its queue")
    metrics_options(w)
    _threads(w)
    i = command("intake", "read the inbox and create runs (no tool code) until SIGTERM")
    metrics_options(i)
    ts = command("toolset", "print the fingerprint of a tool set's code")
    _toolset(ts)
    _mcp(ts)
    ts.add_argument(
        "--load", action="store_true",
        help="import the modules as a worker does (their code runs here): the worker's fingerprint, "
        "which differs when they import modules by computed names (default: from the source, no import)",
    )  # fmt: skip


def _read_commands(command: Command) -> None:
    """The commands that read a run or the runs: `status`, `runs`, `tail`, `replay`,
    `context`, `trace`, `raw`."""
    st = command("status", "a run's state")
    st.add_argument("run_id", type=arg_types.run_id)
    st.add_argument(
        "--files", action="store_true", help="the files each write call changed (its snapshots)"
    )
    travel_commands(command)
    _runs(command("runs", "the runs, newest first"))
    t = command("tail", "events one a line, in time order across runs")
    t.add_argument(
        "--run",
        dest="run_id",
        type=arg_types.run_id,
        help="only this run (its whole log, then new events)",
    )
    t.add_argument(
        "--type", dest="types", action="append", metavar="TYPE",
        help="only events of this type (repeat, or comma-separated)",
    )  # fmt: skip
    t.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    t.add_argument(
        "--from-start", action="store_true", help="with --follow: print the history first"
    )
    rp = command("replay", "re-fold a run's log and check it")
    rp.add_argument("run_id", type=arg_types.run_id)
    rp.add_argument(
        "--rerun", action="store_true", help="run the spec again on the recorded replies; diff"
    )
    cx = command("context", "what the model saw at a turn, rebuilt and verified")
    cx.add_argument("run_id", type=arg_types.run_id)
    cx.add_argument("--turn", type=arg_types.count, required=True)
    cx.add_argument(
        "--attempt", type=arg_types.count, help="this claim of the turn (default: the last)"
    )
    tr = command("trace", "a run's spans from its log: invoke_agent, chat, execute_tool")
    tr.add_argument("run_id", type=arg_types.run_id)
    rw = command("raw", "the log's entries as stored (JSON lines): NOT redacted")
    rw.add_argument("run_id", type=arg_types.run_id)
    rw.add_argument("--after", type=arg_types.count, default=0, help="only entries after this seq")


def _control_commands(command: Command) -> None:
    """The controls a person sends a run (`CONTROLS`)."""
    for name, help_, needs_call, text in CONTROLS:
        c = command(name, help_)
        c.add_argument("run_id", type=arg_types.run_id)
        if needs_call:  # none at a flow's gate: `approve RUN`, `deny RUN --reason TEXT`
            c.add_argument(
                "call_id", nargs="?", type=arg_types.call_id,
                help="the call (none at a flow's gate: the gate is answered)",
            )  # fmt: skip
            c.add_argument("--reason", default="", help="a note with the answer (at a gate)")
        if text == "text":  # a reply goes to the model: it must say something
            c.add_argument(text, type=arg_types.reply_text)
        else:
            c.add_argument(text, nargs="?", default="")
        c.add_argument("--by", help="who says so (default: the user name)")
        _signer(c, "sign as this publisher (default: the embedded run's own)")


def _operator_commands(command: Command) -> None:
    """An operator's: the web view (`ui`), the local Redis service, the publishers, the
    archive, the ACL users."""
    ui = command("ui", "the web view: runs, live timelines, approvals and replies")
    ui.add_argument(
        "--port", type=arg_types.port, default=8765, help="0: a free port (default 8765)"
    )
    ui.add_argument(
        "--host", default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only)",
    )  # fmt: skip
    ui.add_argument(
        "--allow-host", dest="allow_hosts", action="append", default=[], type=arg_types.host_name, metavar="NAME",
        help="a Host name the view answers to besides localhost, 127.0.0.1, [::1] and --host "
        "(repeat; AGENTLEDGER_UI_ALLOW_HOSTS adds more): the name browsers reach it by",
    )  # fmt: skip
    ui.add_argument(
        "--as", dest="publisher", metavar="NAME",
        help="act as this publisher: approve, deny, reply, resume, abort (default: read-only)",
    )  # fmt: skip
    local = command("local", "the local Redis service of this user's state folder")
    local.add_argument("action", choices=("status", "start", "stop"))
    local.add_argument("--force", action="store_true", help="stop: even with clients connected")
    _publishers(command("publishers", "who may publish to the inbox, and what each may ask for"))
    ar = command(
        "archive", "archive finished runs past their retention age; remove them from Redis"
    )
    ar.add_argument(
        "--older-than", type=arg_types.duration, metavar="D",
        help="runs that ended at least this long ago, every tenant (seconds, or 30m, 12h, 7d; "
        "default: AGENTLEDGER_RETENTION_S and AGENTLEDGER_RETENTION_TENANTS)",
    )  # fmt: skip
    ar.add_argument("--dry-run", action="store_true", help="name the runs due; change nothing")
    a = command(
        "acl", "Redis ACL users of this prefix: one per publisher, the intake, workers, ops"
    )
    a.add_argument("--apply", action="store_true", help="run them on the Redis REDIS_URL names")


# the command families, in the order `agentledger --help` lists their commands
FAMILIES: tuple[Callable[[Command], None], ...] = (
    _run_commands,
    _worker_commands,
    _read_commands,
    _control_commands,
    _operator_commands,
)


def _signer(c: argparse.ArgumentParser, help_: str) -> None:
    c.add_argument("--as", dest="as_", metavar="PUBLISHER", help=help_)


def _publishers(c: argparse.ArgumentParser) -> None:
    actions = c.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="file a publisher with a new key; print the key once")
    add.add_argument("name", type=arg_types.publisher_name)
    add.add_argument(
        "--principal", action="append", required=True, metavar="ID@TENANT",
        help="a principal it may act for (repeat, or comma-separated; '*' matches any)",
    )  # fmt: skip
    add.add_argument(
        "--scopes", type=arg_types.names, default=[], metavar="A,B", help="scopes it may grant"
    )
    add.add_argument(
        "--queues", type=arg_types.names, default=[], metavar="Q,…", help="default: 'default'"
    )
    add.add_argument(
        "--workspaces", type=arg_types.names, default=[], metavar="/DIR,…",
        help="absolute folders its runs' workspaces may be inside (besides AGENTLEDGER_WORKSPACE_ROOTS)",
    )  # fmt: skip
    actions.add_parser("list", help="the publishers and their grants (never their keys)")
    actions.add_parser(
        "adopt", help="make this publishers file the deployment's (record its digest in Redis)"
    )
    for a in actions.choices.values():
        a.add_argument("--json", action="store_true", help="machine output on stdout")


def _toolset(c: argparse.ArgumentParser) -> None:
    c.add_argument("--tools", nargs="*", default=[], metavar="MODULE", help="the tool modules")
    c.add_argument(
        "--tool-path", action="append", default=[], metavar="DIR", help="where to find them"
    )


def metrics_options(c: argparse.ArgumentParser) -> None:
    """`--metrics-port` and `--metrics-host`: the operations port of a long-running role."""
    c.add_argument(
        "--metrics-port", type=arg_types.port, metavar="PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz on this port (0: any free one)",
    )  # fmt: skip
    c.add_argument(
        "--metrics-host", default="127.0.0.1", metavar="ADDRESS",
        help="the address the metrics port listens on (default 127.0.0.1: this machine only; "
        "0.0.0.0 for a scraper or probe from elsewhere)",
    )  # fmt: skip


def _mcp(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--mcp", metavar="FILE", help="the MCP servers file (YAML): their tools join the tool set"
    )


def _log_options(c: argparse.ArgumentParser) -> None:
    # SUPPRESS: when not given after the command, the value before it stands
    c.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="of the log lines on stderr",
    )
    c.add_argument(
        "--log-format", choices=LOG_FORMATS, default=argparse.SUPPRESS,
        help="of the log lines on stderr (text or json)",
    )  # fmt: skip


def _threads(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--threads", type=arg_types.thread_count, metavar="N",
        help=f"worker threads per process, at most {arg_types.MAX_THREADS} (default: AGENTLEDGER_WORKER_THREADS, else 8)",
    )  # fmt: skip


def _runs(c: argparse.ArgumentParser) -> None:
    c.add_argument("--status", dest="statuses", action="append", metavar="STATUS",
                   help="only runs in this status (repeat, or comma-separated)")  # fmt: skip
    c.add_argument(
        "--since", metavar="TIME", help="created at or after: ISO time, epoch, or 2h/30m/7d ago"
    )
    c.add_argument("--until", metavar="TIME", help="created before this time")
    c.add_argument(
        "--limit", type=arg_types.count, default=20, help="at most this many (default 20)"
    )
    c.add_argument("--page", metavar="TOKEN", help="the next page: the token the last page gave")

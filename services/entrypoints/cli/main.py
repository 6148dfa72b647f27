"""`agentledger`: argument parsing and the exit code; the work is in the commands."""

from __future__ import annotations

import argparse
import logging
import sys

from events.commands import Pool
from events.types import DEFAULT_QUEUE
from schemas.errors import InvalidSpec
from services.bootstrap import ALL_POOLS
from services.entrypoints.cli import (
    context_cmds,
    control_cmds,
    exit_codes,
    inspect_cmds,
    rerun_cmds,
    run_cmds,
)
from services.entrypoints.cli.session import Session, open_session
from services.entrypoints.cli.spec_file import load_spec_file
from services.errors import ConfigError, RedisUnavailable
from services.secrets import install_log_filter
from services.settings import from_env


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentledger", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a spec end to end on embedded workers and follow it")
    r.add_argument("spec")
    r.add_argument("--json", action="store_true", help="print one final JSON object")
    r.add_argument("--processes", type=int, default=0, help="worker processes (0: threads here)")
    r.add_argument("--queue", help="join this shared task queue (default: a private one)")
    s = sub.add_parser("submit", help="publish a spec to a task queue; print the run id")
    s.add_argument("spec")
    s.add_argument("--queue", help="the task queue (default: the spec's, else 'default')")
    s.add_argument(
        "--unserved", action="store_true", help="publish even if no worker ever served it"
    )
    w = sub.add_parser("workers", help="serve a task queue with a tool set until SIGTERM")
    w.add_argument("--tools", nargs="*", default=[], metavar="MODULE", help="the tool modules")
    w.add_argument(
        "--tool-path", action="append", default=[], metavar="DIR", help="where to find them"
    )
    w.add_argument("--queue", default=DEFAULT_QUEUE, help="the task queue (default: 'default')")
    w.add_argument("--processes", type=int, default=1)
    w.add_argument(
        "--pools",
        type=_pools,
        default=list(ALL_POOLS),
        help="comma-separated pools to run (default: model,tools,accept)",
    )
    ts = sub.add_parser("toolset", help="print the fingerprint of a tool set's code")
    ts.add_argument("--tools", nargs="*", default=[], metavar="MODULE")
    ts.add_argument("--tool-path", action="append", default=[], metavar="DIR")
    st = sub.add_parser("status", help="a run's state")
    st.add_argument("run_id")
    st.add_argument("--json", action="store_true")
    rs = sub.add_parser("runs", help="the newest runs")
    rs.add_argument("--limit", type=int, default=20)
    t = sub.add_parser("tail", help="events, one a line")
    t.add_argument("--run", dest="run_id")
    t.add_argument("--follow", "-f", action="store_true")
    t.add_argument("--json", action="store_true", help="print envelopes as JSON")
    rp = sub.add_parser("replay", help="re-fold a run's log and check it")
    rp.add_argument("run_id")
    rp.add_argument(
        "--rerun", action="store_true", help="run the spec again on the recorded replies; diff"
    )
    rp.add_argument("--json", action="store_true", help="with --rerun: one JSON report")
    cx = sub.add_parser("context", help="what the model saw at a turn, rebuilt and verified")
    cx.add_argument("run_id")
    cx.add_argument("--turn", type=int, required=True)
    cx.add_argument("--attempt", type=int, help="this claim of the turn (default: the last)")
    cx.add_argument("--json", action="store_true")
    rw = sub.add_parser("raw", help="the log's entries as stored: NOT redacted")
    rw.add_argument("run_id")
    rw.add_argument("--after", type=int, default=0, help="only entries after this seq")
    for name, help_, needs_call, text in _CONTROLS:
        c = sub.add_parser(name, help=help_)
        c.add_argument("run_id")
        if needs_call:
            c.add_argument("call_id")
        c.add_argument(text, nargs="?" if text != "text" else None, default="")
        c.add_argument("--by", help="who says so (default: the user name)")
    return p


# (command, help, takes a call id, name of its free-text argument)
_CONTROLS = (
    ("cancel", "ask a run to stop: running tools get a cancel signal", False, "reason"),
    ("approve", "approve a call awaiting approval", True, "note"),
    ("deny", "deny a call awaiting approval; the model is told", True, "note"),
    ("reply", "guidance for a run awaiting a human; it goes to the model", False, "text"),
    ("resume", "let a run awaiting a human go on", False, "note"),
    ("abort", "end a run awaiting a human as failed", False, "note"),
)


def _pools(text: str) -> list[Pool]:
    try:
        return [Pool(p.strip()) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: pools are {', '.join(str(p) for p in Pool)}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_filter()
    try:
        settings = from_env()
        if args.command == "toolset":
            return run_cmds.print_toolset(args.tools, args.tool_path)
        if args.command in ("run", "submit"):
            load_spec_file(args.spec)  # a bad spec is refused before any Redis is touched
        with open_session(settings) as session:
            return _dispatch(args, session)
    except InvalidSpec as exc:
        print(f"agentledger: invalid spec: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except ConfigError as exc:
        print(f"agentledger: bad configuration: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except RedisUnavailable as exc:
        print(f"agentledger: no Redis: {exc}", file=sys.stderr)
        return exit_codes.INTERNAL
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace, session: Session) -> int:
    match args.command:
        case "run":
            return run_cmds.run(
                session, args.spec, as_json=args.json, processes=args.processes, queue=args.queue
            )
        case "submit":
            return run_cmds.submit(session, args.spec, queue=args.queue, unserved_ok=args.unserved)
        case "workers":
            return run_cmds.workers(
                session,
                modules=args.tools,
                paths=args.tool_path,
                queue=args.queue,
                processes=args.processes,
                pools=args.pools,
            )
        case "status":
            return inspect_cmds.status(session, args.run_id, as_json=args.json)
        case "runs":
            return inspect_cmds.runs(session, limit=args.limit)
        case "tail":
            return inspect_cmds.tail(
                session, run_id=args.run_id, follow=args.follow, as_json=args.json
            )
        case "replay" if args.rerun:
            return rerun_cmds.rerun(session, args.run_id, as_json=args.json)
        case "replay":
            return inspect_cmds.replay(session, args.run_id)
        case "context":
            return context_cmds.context(
                session, args.run_id, turn=args.turn, attempt=args.attempt, as_json=args.json
            )
        case "raw":
            return context_cmds.raw(session, args.run_id, after_seq=args.after)
        case "cancel" | "approve" | "deny" | "reply" | "resume" | "abort":
            text = (
                getattr(args, "reason", None)
                or getattr(args, "note", None)
                or getattr(args, "text", "")
            )
            message = control_cmds.build(
                args.command,
                args.run_id,
                call_id=getattr(args, "call_id", None),
                text=text,
                by=args.by,
            )
            return control_cmds.send(session, message)
    return exit_codes.USAGE


if __name__ == "__main__":
    sys.exit(main())

"""One parsed `agentledger` command: open a session on the right Redis, hand
over to the command's module (imported only then: a read needs no worker pools,
no model SDK), and turn every failure a user can cause into a message and an
exit code (`exit_codes`) — never a traceback."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import redis
from redis.exceptions import InvalidResponse

from agentledger.schemas.errors import InvalidSpec
from agentledger.services import structured_logs
from agentledger.services.entrypoints.cli import exit_codes, interrupts
from agentledger.services.entrypoints.cli.parser import BadOption
from agentledger.services.entrypoints.cli.travel_dispatch import TRAVEL
from agentledger.services.entrypoints.reply import fail, say_loading
from agentledger.services.errors import ConfigError, ProviderUnready, RedisUnavailable, ServiceBusy
from agentledger.services.extras import MissingExtra
from agentledger.services.redis_urls import masked
from agentledger.services.secrets import install_log_filter
from agentledger.services.session import Session, open_session
from agentledger.services.settings import Settings, from_env, user_state_dir

if TYPE_CHECKING:
    from agentledger.services.entrypoints.cli.prepare import Prepared

# the commands that may start the local Redis service; submit, workers, intake and
# the controls never do (a run or a message nobody will ever read)
MAY_START = frozenset(
    {"run", "status", "runs", "tail", "replay", "context", "raw", "trace", "ui", "branch", "whatif"}
)


def execute(args: argparse.Namespace) -> int:
    """Run one parsed command; every failure a user can cause is a message and an exit code."""
    structured_logs.configure(args.log_level, args.log_format)
    install_log_filter()
    interrupts.install()
    as_json = bool(getattr(args, "json", False))
    settings: Settings | None = None
    try:
        settings = from_env()
        if getattr(args, "threads", None) is not None:  # `run`, `workers`: and their children
            settings = settings.with_(worker_threads=args.threads)
        return _command(args, settings)
    except (InvalidSpec, BadOption, ConfigError, ProviderUnready) as exc:
        return _refused(exc, as_json)
    except MissingExtra as exc:  # an optional dependency this command needs
        return fail(exit_codes.USAGE, "not installed", str(exc), as_json, extra=exc.extra)
    except (
        RedisUnavailable, ServiceBusy, redis.exceptions.NoPermissionError, redis.ConnectionError,
        redis.TimeoutError, InvalidResponse,
    ) as exc:  # fmt: skip
        return _redis_failed(exc, settings, as_json)
    except (interrupts.Interrupted, KeyboardInterrupt):
        print("agentledger: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `agentledger tail | head`: the reader left, which is fine
        sys.stdout = open("/dev/null", "w")  # noqa: SIM115 -- nothing more may reach the pipe
        return 0
    except Exception as exc:  # noqa: BLE001 -- a bug: one line here, the traceback in the state folder
        kept = _keep_traceback(settings)
        return fail(
            exit_codes.BUG, "internal error", f"{type(exc).__name__}: {exc} ({kept})", as_json
        )


RedisFailure = (
    RedisUnavailable
    | ServiceBusy
    | redis.exceptions.NoPermissionError
    | redis.ConnectionError
    | redis.TimeoutError
    | InvalidResponse
)


def _refused(exc: InvalidSpec | ConfigError | ProviderUnready, as_json: bool) -> int:
    """What the user gave cannot be done: the spec, an option, the configuration."""
    if isinstance(exc, InvalidSpec):
        return fail(exit_codes.USAGE, "invalid spec", exc.render(), as_json, problems=exc.as_list())
    if isinstance(exc, BadOption):
        return fail(exit_codes.USAGE, "bad option", str(exc), as_json, option=exc.name)
    if isinstance(exc, ConfigError):
        return fail(exit_codes.USAGE, "bad configuration", str(exc), as_json, variable=exc.name)
    # `run`'s model cannot be reached from here: no run is created
    return fail(exit_codes.USAGE, exc.what, exc.detail, as_json, variable=exc.variable)


def _redis_failed(exc: RedisFailure, settings: Settings | None, as_json: bool) -> int:
    """No Redis, the local service in use, a user without the right, a connection
    lost, or something else answering in Redis's place."""
    if isinstance(exc, RedisUnavailable):
        return fail(exit_codes.NO_REDIS, "no Redis", str(exc), as_json)
    if isinstance(exc, ServiceBusy):
        message = f"the local Redis service is in use: {exc}; `agentledger local stop --force` stops it anyway"
        return fail(exit_codes.USAGE, "in use", message, as_json)
    if isinstance(exc, redis.exceptions.NoPermissionError):
        user = urlsplit(settings.redis_url or "").username if settings else None
        message = f"the Redis user {user or 'default'!r} may not do this: {exc}"
        return fail(exit_codes.USAGE, "not permitted", message, as_json)
    where = masked(settings.redis_url) if settings and settings.redis_url else "Redis"
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return fail(
            exit_codes.NO_REDIS, "lost Redis", f"lost the connection to {where}: {exc}", as_json
        )
    # it answered PING, then not in Redis's protocol: not ours
    return fail(
        exit_codes.NO_REDIS, "not Redis", f"{where} answered in no Redis protocol: {exc}", as_json
    )


def _command(args: argparse.Namespace, settings: Settings) -> int:
    # each command imports what it needs: a read needs no worker pools (dramatiq, SDKs)
    as_json = bool(args.json)
    if (alone := _WITHOUT_A_SESSION.get(args.command)) is not None:
        return alone(args, settings, as_json)
    attach = _attach_args(args)
    # a bad spec is refused, every problem with its line, before any Redis is touched
    prepared = _prepared(args, settings) if attach is None else None
    with open_session(
        settings, may_start=args.command in MAY_START, waiting=say_loading
    ) as session:
        if args.command in ("run", "submit"):
            return _start(args, session, prepared, attach, as_json)
        return _ON_A_SESSION.get(args.command, _control)(args, session, as_json)


def _prepared(args: argparse.Namespace, settings: Settings) -> Prepared | None:
    """`run SPEC`'s and `submit`'s spec, read and checked (None: another command)."""
    if args.command not in ("run", "submit"):
        return None
    from agentledger.services.entrypoints.cli.prepare import prepare

    return prepare(args.spec, args.command, mcp=args.mcp, settings=settings)


def _start(
    args: argparse.Namespace,
    session: Session,
    prepared: Prepared | None,
    attach: str | None,
    as_json: bool,
) -> int:
    """`run SPEC`, `run --attach RUN` (the run `attach` names) and `submit`."""
    if attach is not None:
        from agentledger.services.entrypoints.cli import attach_cmds

        return attach_cmds.attach(
            session, attach, as_json=as_json, processes=args.processes, mcp=args.mcp
        )
    assert prepared is not None
    if args.command == "run":
        from agentledger.services.entrypoints.cli import run_cmds

        return run_cmds.run(
            session, prepared, as_json=as_json, processes=args.processes, queue=args.queue,
            as_=args.as_,
        )  # fmt: skip
    from agentledger.services.entrypoints.cli import submit_cmds

    return submit_cmds.submit(
        session, prepared, queue=args.queue, unserved_ok=args.unserved,
        as_json=as_json, as_=args.as_,
    )  # fmt: skip


def _attach_args(args: argparse.Namespace) -> str | None:
    """The run `run --attach` names (None: a `run SPEC`, or another command);
    BadOption for what cannot go with it."""
    if args.command != "run":
        return None
    attach: str | None = args.attach
    if attach is None and args.spec is None:
        raise BadOption("SPEC", "run takes a spec file (`agentledger run SPEC`), or --attach RUN")
    if attach is not None:
        given = [
            f for f, v in (("SPEC", args.spec), ("--queue", args.queue), ("--as", args.as_)) if v
        ]
        if given:
            raise BadOption(
                given[0], f"--attach serves the run's own queue, signed as this state folder's own "
                f"publisher, with the tool set it started with: drop {', '.join(given)}",
            )  # fmt: skip
    return attach


# The commands without a session (they open one themselves when they need it), then
# those on a session, by name: each imports its module only when it is called; a
# command of neither table is a control (`_control`).


def _local(args: argparse.Namespace, settings: Settings, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import local_cmds

    return local_cmds.local(settings, args.action, force=args.force, as_json=as_json)


def _publishers(args: argparse.Namespace, settings: Settings, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import publisher_cmds

    if args.action == "add":
        principals = [p for given in args.principal for p in given.split(",") if p.strip()]
        return publisher_cmds.add(
            settings, args.name, principals=principals, scopes=args.scopes,
            queues=args.queues, workspaces=args.workspaces, as_json=as_json,
        )  # fmt: skip
    if args.action == "adopt":
        with open_session(settings, may_start=False, waiting=say_loading) as session:
            return publisher_cmds.adopt(session, as_json=as_json)
    return publisher_cmds.list_(settings, as_json=as_json)


def _acl(args: argparse.Namespace, settings: Settings, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import acl_cmds

    if not args.apply:
        return acl_cmds.acl(settings, None, as_json=as_json)
    with open_session(settings, may_start=False, waiting=say_loading) as session:
        return acl_cmds.acl(settings, session, as_json=as_json)


def _toolset(args: argparse.Namespace, settings: Settings, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import submit_cmds

    if args.mcp:  # the servers' tools join it: started here, as a worker starts them
        return submit_cmds.print_mcp_toolset(
            args.tools, args.tool_path, args.mcp, settings, as_json=as_json
        )
    return submit_cmds.print_toolset(args.tools, args.tool_path, load=args.load, as_json=as_json)


_WITHOUT_A_SESSION: dict[str, Callable[[argparse.Namespace, Settings, bool], int]] = {
    "local": _local, "publishers": _publishers, "acl": _acl, "toolset": _toolset,
}  # fmt: skip


def _workers(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    if args.list:
        from agentledger.services.entrypoints.cli import pool_cmds

        return pool_cmds.list_workers(session, as_json=as_json)
    from agentledger.services.entrypoints.cli import workers_cmds

    return workers_cmds.workers(
        session, modules=args.tools, paths=args.tool_path, queue=args.queue,
        processes=args.processes, pools=args.pools, mcp=args.mcp,
        as_json=as_json, metrics_port=args.metrics_port, metrics_host=args.metrics_host,
    )  # fmt: skip


def _intake(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import intake_cmds

    return intake_cmds.intake(
        session, as_json=as_json, metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )  # fmt: skip


def _dead_letters(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import pool_cmds

    if args.redrive:
        return pool_cmds.redrive(session, args.redrive, as_json=as_json)
    return pool_cmds.show_dead_letters(session, queue=args.queue, as_json=as_json)


def _status(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import inspect_cmds

    if args.files:
        from agentledger.services.entrypoints.cli import travel_cmds

        return travel_cmds.files(session, args.run_id, as_json=as_json)
    return inspect_cmds.status(session, args.run_id, as_json=as_json)


def _runs(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import inspect_cmds

    return inspect_cmds.runs(session, inspect_cmds.RunsQuery.of(args), as_json=as_json)


def _tail(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import tail_cmds

    return tail_cmds.tail(
        session, run_id=args.run_id, types=args.types, follow=args.follow,
        from_start=args.from_start, as_json=as_json,
    )  # fmt: skip


def _replay(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    if args.rerun:
        from agentledger.services.entrypoints.cli import rerun_cmds

        return rerun_cmds.rerun(session, args.run_id, as_json=as_json)
    from agentledger.services.entrypoints.cli import inspect_cmds

    return inspect_cmds.replay(session, args.run_id, as_json=as_json)


def _context(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import context_cmds

    return context_cmds.context(
        session, args.run_id, turn=args.turn, attempt=args.attempt, as_json=as_json
    )


def _raw(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import context_cmds

    return context_cmds.raw(session, args.run_id, after_seq=args.after)  # JSON lines already


def _trace(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import trace_cmds

    return trace_cmds.trace(session, args.run_id, as_json=as_json)


def _archive(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.cli import archive_cmds

    return archive_cmds.archive(
        session, older_than=args.older_than, dry_run=args.dry_run, as_json=as_json
    )


def _ui(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from agentledger.services.entrypoints.web.server import serve

    return serve(
        session, host=args.host, port=args.port, publisher=args.publisher,
        allow_hosts=args.allow_hosts, as_json=as_json,
    )  # fmt: skip


def _control(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    """cancel, approve, deny, reply, resume, abort: a message to the run, through the inbox."""
    from agentledger.services.entrypoints import controls
    from agentledger.services.entrypoints.cli import control_cmds

    text = str(
        getattr(args, "reason", None) or getattr(args, "note", None) or getattr(args, "text", "")
    )
    call_id = getattr(args, "call_id", None)
    command = controls.gate_command(session, args.command, args.run_id, call_id)
    answers = command in controls.ANSWERS
    message = controls.build(
        command, args.run_id, call_id=call_id, text=text, by=args.by,
        escalation=controls.current_escalation(session, args.run_id) if answers else 0,
    )  # fmt: skip
    return control_cmds.send(session, message, as_json=as_json, publisher=args.as_)


_ON_A_SESSION: dict[str, Callable[[argparse.Namespace, Session, bool], int]] = {
    "workers": _workers, "intake": _intake, "dead-letters": _dead_letters,
    "status": _status, "runs": _runs, "tail": _tail, "replay": _replay, "context": _context,
    "raw": _raw, "trace": _trace, "ui": _ui, "archive": _archive, **TRAVEL,
}  # fmt: skip


def _keep_traceback(settings: Settings | None) -> str:
    folder = Path(settings.state_dir if settings else user_state_dir())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "last-error.txt").write_text(traceback.format_exc())
    except OSError:
        return "--log-level debug shows more"
    return f"the traceback is in {folder / 'last-error.txt'}"

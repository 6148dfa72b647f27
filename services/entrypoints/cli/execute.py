"""One parsed `agentledger` command: open a session on the right Redis, hand
over to the command's module (imported only then: a read needs no worker pools,
no model SDK), and turn every failure a user can cause into a message and an
exit code (`exit_codes`) — never a traceback."""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from urllib.parse import urlsplit

import redis
from redis.exceptions import InvalidResponse

from schemas.errors import InvalidSpec
from services import structured_logs
from services.entrypoints.cli import exit_codes, interrupts
from services.entrypoints.cli.parser import BadOption
from services.entrypoints.reply import fail, say_loading
from services.errors import ConfigError, ProviderUnready, RedisUnavailable, ServiceBusy
from services.secrets import install_log_filter
from services.session import Session, open_session
from services.settings import Settings, from_env, masked, user_state_dir

# the commands that may start the local Redis service; submit, workers, intake and
# the controls never do (a run or a message nobody will ever read)
MAY_START = frozenset({"run", "status", "runs", "tail", "replay", "context", "raw", "trace", "ui"})


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
    except InvalidSpec as exc:
        return fail(exit_codes.USAGE, "invalid spec", exc.render(), as_json, problems=exc.as_list())
    except BadOption as exc:
        return fail(exit_codes.USAGE, "bad option", str(exc), as_json, option=exc.name)
    except ConfigError as exc:
        return fail(exit_codes.USAGE, "bad configuration", str(exc), as_json, variable=exc.name)
    except ProviderUnready as exc:  # `run`'s model cannot be reached from here: no run is created
        return fail(exit_codes.USAGE, exc.what, exc.detail, as_json, variable=exc.variable)
    except RedisUnavailable as exc:
        return fail(exit_codes.NO_REDIS, "no Redis", str(exc), as_json)
    except ServiceBusy as exc:
        message = f"the local Redis service is in use: {exc}; `agentledger local stop --force` stops it anyway"
        return fail(exit_codes.USAGE, "in use", message, as_json)
    except redis.exceptions.NoPermissionError as exc:
        user = urlsplit(settings.redis_url or "").username if settings else None
        message = f"the Redis user {user or 'default'!r} may not do this: {exc}"
        return fail(exit_codes.USAGE, "not permitted", message, as_json)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        where = masked(settings.redis_url) if settings and settings.redis_url else "Redis"
        return fail(
            exit_codes.NO_REDIS, "lost Redis", f"lost the connection to {where}: {exc}", as_json
        )
    except InvalidResponse as exc:  # it answered PING, then not in Redis's protocol: not ours
        where = masked(settings.redis_url) if settings and settings.redis_url else "Redis"
        return fail(
            exit_codes.NO_REDIS, "not Redis", f"{where} answered in no Redis protocol: {exc}", as_json
        )
    except (interrupts.Interrupted, KeyboardInterrupt):
        print("agentledger: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `agentledger tail | head`: the reader left, which is fine
        sys.stdout = open("/dev/null", "w")  # noqa: SIM115 -- nothing more may reach the pipe
        return 0
    except Exception as exc:  # a bug: one line here, the traceback in the state folder
        kept = _keep_traceback(settings)
        return fail(
            exit_codes.BUG, "internal error", f"{type(exc).__name__}: {exc} ({kept})", as_json
        )


def _command(args: argparse.Namespace, settings: Settings) -> int:
    # each command imports what it needs: a read needs no worker pools (dramatiq, SDKs)
    as_json = bool(args.json)
    if args.command == "local":
        from services.entrypoints.cli import local_cmds

        return local_cmds.local(settings, args.action, force=args.force, as_json=as_json)
    if args.command == "publishers":
        from services.entrypoints.cli import publisher_cmds

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
    if args.command == "acl":
        from services.entrypoints.cli import acl_cmds

        if not args.apply:
            return acl_cmds.acl(settings, None, as_json=as_json)
        with open_session(settings, may_start=False, waiting=say_loading) as session:
            return acl_cmds.acl(settings, session, as_json=as_json)
    if args.command == "toolset":
        from services.entrypoints.cli import run_cmds

        return run_cmds.print_toolset(args.tools, args.tool_path, load=args.load, as_json=as_json)
    if args.command in ("run", "submit"):
        from services.entrypoints.cli import run_cmds
    attach = _attach_args(args)
    # a bad spec is refused, every problem with its line, before any Redis is touched
    prepared = (
        run_cmds.prepare(args.spec, args.command, mcp=args.mcp, settings=settings)
        if args.command in ("run", "submit") and attach is None
        else None
    )
    with open_session(settings, may_start=args.command in MAY_START, waiting=say_loading) as session:
        match args.command:
            case "run" if attach is not None:
                from services.entrypoints.cli import attach_cmds

                return attach_cmds.attach(
                    session, attach, as_json=as_json, processes=args.processes, mcp=args.mcp
                )
            case "run":
                assert prepared is not None
                return run_cmds.run(
                    session, prepared, as_json=as_json, processes=args.processes, queue=args.queue,
                    as_=args.as_,
                )  # fmt: skip
            case "submit":
                assert prepared is not None
                return run_cmds.submit(
                    session, prepared, queue=args.queue, unserved_ok=args.unserved,
                    as_json=as_json, as_=args.as_,
                )  # fmt: skip
            case "workers" if args.list:
                from services.entrypoints.cli import pool_cmds

                return pool_cmds.list_workers(session, as_json=as_json)
            case "intake":
                from services.entrypoints.cli import intake_cmds

                return intake_cmds.intake(
                    session, as_json=as_json, metrics_port=args.metrics_port,
                    metrics_host=args.metrics_host,
                )  # fmt: skip
            case "workers":
                from services.entrypoints.cli import workers_cmds

                return workers_cmds.workers(
                    session, modules=args.tools, paths=args.tool_path, queue=args.queue,
                    processes=args.processes, pools=args.pools, mcp=args.mcp,
                    as_json=as_json, metrics_port=args.metrics_port, metrics_host=args.metrics_host,
                )  # fmt: skip
        return _read_or_control(args, session, as_json)


def _attach_args(args: argparse.Namespace) -> str | None:
    """The run `run --attach` names (None: a `run SPEC`, or another command);
    BadOption for what cannot go with it."""
    if args.command != "run":
        return None
    attach: str | None = args.attach
    if attach is None and args.spec is None:
        raise BadOption("SPEC", "run takes a spec file (`agentledger run SPEC`), or --attach RUN")
    if attach is not None:
        given = [f for f, v in (("SPEC", args.spec), ("--queue", args.queue), ("--as", args.as_)) if v]
        if given:
            raise BadOption(
                given[0], f"--attach serves the run's own queue, signed as this state folder's own "
                f"publisher, with the tool set it started with: drop {', '.join(given)}",
            )  # fmt: skip
    return attach


def _read_or_control(args: argparse.Namespace, session: Session, as_json: bool) -> int:
    from services.entrypoints.cli import inspect_cmds

    match args.command:
        case "status":
            return inspect_cmds.status(session, args.run_id, as_json=as_json)
        case "runs":
            return inspect_cmds.runs(session, inspect_cmds.RunsQuery.of(args), as_json=as_json)
        case "tail":
            from services.entrypoints.cli import tail_cmds

            return tail_cmds.tail(
                session, run_id=args.run_id, types=args.types, follow=args.follow,
                from_start=args.from_start, as_json=as_json,
            )  # fmt: skip
        case "replay" if args.rerun:
            from services.entrypoints.cli import rerun_cmds

            return rerun_cmds.rerun(session, args.run_id, as_json=as_json)
        case "replay":
            return inspect_cmds.replay(session, args.run_id, as_json=as_json)
        case "context":
            from services.entrypoints.cli import context_cmds

            return context_cmds.context(
                session, args.run_id, turn=args.turn, attempt=args.attempt, as_json=as_json
            )
        case "dead-letters":
            from services.entrypoints.cli import pool_cmds

            if args.redrive:
                return pool_cmds.redrive(session, args.redrive, as_json=as_json)
            return pool_cmds.show_dead_letters(session, queue=args.queue, as_json=as_json)
        case "ui":
            from services.entrypoints.web.server import serve

            return serve(
                session, host=args.host, port=args.port, publisher=args.publisher,
                allow_hosts=args.allow_hosts, as_json=as_json,
            )  # fmt: skip
        case "trace":
            from services.entrypoints.cli import trace_cmds

            return trace_cmds.trace(session, args.run_id, as_json=as_json)
        case "raw":  # JSON lines already
            from services.entrypoints.cli import context_cmds

            return context_cmds.raw(session, args.run_id, after_seq=args.after)
    from services.entrypoints import controls
    from services.entrypoints.cli import control_cmds

    text = str(
        getattr(args, "reason", None) or getattr(args, "note", None) or getattr(args, "text", "")
    )
    answers = args.command in controls.ANSWERS
    message = controls.build(
        args.command, args.run_id, call_id=getattr(args, "call_id", None), text=text, by=args.by,
        escalation=controls.current_escalation(session, args.run_id) if answers else 0,
    )  # fmt: skip
    return control_cmds.send(session, message, as_json=as_json, publisher=args.as_)


def _keep_traceback(settings: Settings | None) -> str:
    folder = Path(settings.state_dir if settings else user_state_dir())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "last-error.txt").write_text(traceback.format_exc())
    except OSError:
        return "--log-level debug shows more"
    return f"the traceback is in {folder / 'last-error.txt'}"

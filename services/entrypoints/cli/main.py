"""`agentledger`: parse the arguments, then hand over to `execute`. Nothing
else is imported before the arguments are known: `--version` and `--help` (and
a mistyped option) answer at once, and each command imports what it uses. An
argument refused is usage and the error on stderr (exit 2), or, with `--json`
anywhere among the arguments, one JSON object on stdout and one line on stderr.
Then the settings are read (one a user got wrong is refused before the command's
imports); a command whose process runs one thread has its models built on first use
(`agentledger.schemas.model_build`); and what the imports made is frozen out of the
garbage collector's passes (`gc.freeze`: it lives as long as the process)."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import warnings

# Interrupted while still importing (a slow start on a busy machine): exit 130
# quietly, as the command would once running; execute installs the real handlers.
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda *_: sys.exit(130))

from agentledger.services.entrypoints.cli.parser import (  # noqa: E402 (after the handlers, on purpose)
    USAGE_EXIT,
    UsageError,
    parser,
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser(raising=True).parse_args(argv)
    except UsageError as exc:
        return _usage_error(exc, as_json=_wants_json(argv))
    show_deprecations()
    first = "agentledger.services.entrypoints.cli.execute" not in sys.modules
    if first and one_thread(args):  # before any model is imported: each builds on first use
        from agentledger.schemas.model_build import defer

        defer()
    if (refused := settings_refused(args)) is not None:
        return refused
    if first:  # the imports below make objects that live as long as the process
        gc.disable()
    try:
        from agentledger.services.adapters.redis.first_import import import_redis

        import_redis()
        from agentledger.services.entrypoints.cli.execute import execute
    finally:
        if first:
            gc.freeze()  # the modules' objects: no collection looks at them again
            gc.enable()
    return execute(args)


# The commands whose process runs one thread: their models build on first use
# (`agentledger.schemas.model_build`), the few they use. `run`, `workers`, `intake`, `ui`,
# `archive`, `replay --rerun` and `toolset --mcp` run threads: theirs build at import.
ONE_THREAD = frozenset(
    {
        "submit", "status", "runs", "tail", "replay", "context", "raw", "trace", "diff",
        "checkout", "gc", "dead-letters", "local", "publishers", "acl", "toolset",
        "cancel", "approve", "deny", "reply", "resume", "abort",
    }
)  # fmt: skip


def one_thread(args: argparse.Namespace) -> bool:
    if args.command == "replay" and args.rerun:
        return False
    if args.command == "toolset" and args.mcp:
        return False
    return args.command in ONE_THREAD


def settings_refused(args: argparse.Namespace) -> int | None:
    """A setting the environment gets wrong, refused before the command's imports: as
    `execute` refuses it (the same line, exit code and JSON), at a fraction of the cost."""
    from agentledger.services.errors import ConfigError
    from agentledger.services.settings import from_env

    try:
        from_env()
    except ConfigError as exc:
        from agentledger.services.entrypoints.cli import exit_codes
        from agentledger.services.entrypoints.reply import fail

        as_json = bool(getattr(args, "json", False))
        return fail(exit_codes.USAGE, "bad configuration", str(exc), as_json, variable=exc.name)
    except Exception:  # noqa: BLE001 -- not the user's: `execute` reads them again and says so
        return None
    return None


def show_deprecations() -> None:
    """The tool API's old path warns at the line of the tool module importing it; Python
    shows a DeprecationWarning only in `__main__` unless told, so a command tells it to
    show this one (on stderr, once a line)."""
    warnings.filterwarnings(
        "default", category=DeprecationWarning, message=r"services\.tools is deprecated"
    )


def _wants_json(argv: list[str]) -> bool:
    """`--json` among the options (not after `--`, where it would be a value)."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in options


def _usage_error(exc: UsageError, *, as_json: bool) -> int:
    """argparse's form on stderr (with `--json`, without the usage text), and with
    `--json` the error as one object on stdout."""
    if not as_json:
        exc.parser.print_usage(sys.stderr)
    print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr, flush=True)
    if as_json:
        from agentledger.services.entrypoints.reply import emit

        emit(
            {
                "error": "usage",
                "message": str(exc),
                "exit_code": USAGE_EXIT,
                "command": exc.parser.prog,
            }
        )
    return USAGE_EXIT


if __name__ == "__main__":
    sys.exit(main())

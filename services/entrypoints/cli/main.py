"""`agentledger`: parse the arguments, then hand over to `execute`. Nothing
else is imported before the arguments are known: `--version` and `--help` (and
a mistyped option) answer at once, and each command imports what it uses. An
argument refused is usage and the error on stderr (exit 2), or, with `--json`
anywhere among the arguments, one JSON object on stdout and one line on stderr."""

from __future__ import annotations

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
    from agentledger.services.adapters.redis.first_import import import_redis

    import_redis()
    from agentledger.services.entrypoints.cli.execute import execute

    return execute(args)


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

"""`agentledger`: parse the arguments, then hand over to `execute`. Nothing
else is imported before the arguments are known: `--version` and `--help` (and
a mistyped option) answer at once, and each command imports what it uses."""

from __future__ import annotations

import signal
import sys

# Interrupted while still importing (a slow start on a busy machine): exit 130
# quietly, as the command would once running; execute installs the real handlers.
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda *_: sys.exit(130))

from services.entrypoints.cli.parser import parser  # noqa: E402 (after the handlers, on purpose)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from services.adapters.redis.first_import import import_redis

    import_redis()
    from services.entrypoints.cli.execute import execute

    return execute(args)


if __name__ == "__main__":
    sys.exit(main())

"""The time-travel commands' arguments (issue 39): `diff`, `checkout`, `gc`, `branch`
and `whatif` (`status --files` is `status`'s)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agentledger.services.entrypoints.cli import arg_types

Command = Callable[[str, str], argparse.ArgumentParser]  # adds a command: (name, help)


def travel_commands(command: Command) -> None:
    df = command("diff", "the unified diff of what one write call (or command check) changed")
    df.add_argument("run_id", type=arg_types.run_id)
    df.add_argument("call_id", type=arg_types.call_id)
    co = command(
        "checkout",
        "write the workspace as it was before a turn (or before a call, or as a check judged it) "
        "into an empty folder",
    )
    co.add_argument("run_id", type=arg_types.run_id)
    at = co.add_mutually_exclusive_group(required=True)
    at.add_argument("--turn", type=arg_types.positive)
    at.add_argument(
        "--call", type=arg_types.call_id, help="a write call, or a check (check-A.I): before it ran"
    )
    co.add_argument("folder", help="an absent or empty folder")
    gc = command("gc", "remove the workspace snapshots no kept run refers to; say what was freed")
    gc.add_argument(
        "--dry-run", action="store_true", help="count what would be freed; remove nothing"
    )
    br = command(
        "branch",
        "a new run whose turns before N are RUN's (nothing runs again), from RUN's workspace "
        "before turn N, with the spec's keys in CHANGES put in",
    )
    _branching(br, required=False)
    wi = command(
        "whatif",
        "RUN's branch from turn N with CHANGES, played with RUN's recorded model replies while "
        "they apply; then the two side by side (exit 1 when something differs)",
    )
    _branching(wi, required=True)


def _branching(c: argparse.ArgumentParser, *, required: bool) -> None:
    c.add_argument("run_id", type=arg_types.run_id)
    c.add_argument("--turn", type=arg_types.positive, required=True)
    c.add_argument(
        "--spec", dest="changes", required=required, metavar="CHANGES",
        help="a YAML file of spec keys to change (tools, tool_path, policies, model, budgets, "
        "acceptance…); never principal, task or workspace",
    )  # fmt: skip
    c.add_argument("--as", dest="as_", metavar="PUBLISHER", help="the publisher to sign as")

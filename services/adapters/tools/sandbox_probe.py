"""The sandbox tried once when a worker that runs commands starts (its tools or
acceptance pool, its MCP stdio servers): one cheap sandboxed run of the
worker's own interpreter, which reports from inside what it was given. A worker
whose sandbox is on and cannot work here refuses to start with one line that
names the setting to change — never a pool that fails every command later with
what looks like the command's own error.

What it checks: bwrap starts (a masked /proc, refused namespaces, a missing
program each get their own hint: `sandbox_failures.py`); the interpreter and
its prefixes are there (a venv under /tmp included); the command is not uid 0,
has no capabilities, `no_new_privs` is set and `/proc/sys` is not writable; and,
when a tool declares `network=True`, that slirp4netns is installed and gives the
command a network of its own."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentledger.services.adapters.tools import usernet
from agentledger.services.adapters.tools.process import run_command
from agentledger.services.adapters.tools.sandbox import SandboxUnavailable, policy_for
from agentledger.services.errors import ConfigError
from agentledger.services.settings import Settings

if TYPE_CHECKING:
    from agentledger.services.adapters.tools.toolset import ToolSet

VARIABLE = "AGENTLEDGER_SANDBOX"
PROBE_TIMEOUT_S = 60.0
# run inside, standard library only; prints what is wrong, nothing when all is well
PROBE = r"""
import os
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
wrong = []
if "0" in status["Uid"].split() or "0" in status["Gid"].split():
    wrong.append("the command runs as uid/gid 0")
for cap in ("CapEff", "CapPrm", "CapBnd"):
    if int(status[cap].strip(), 16):
        wrong.append("%s is %s" % (cap, status[cap].strip()))
if status["NoNewPrivs"].strip() != "1":
    wrong.append("no_new_privs is off")
try:
    os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
    wrong.append("/proc/sys is writable")
except OSError:
    pass
print("; ".join(wrong))
"""


def ready(settings: Settings, *, network_tools: Sequence[str] = ()) -> None:
    """ConfigError (naming AGENTLEDGER_SANDBOX) unless the sandbox works here,
    with a network for `network_tools` (the names of the tools that declare it)."""
    if settings.sandbox != "on":
        return
    if network_tools:
        absent = usernet.missing()
        if absent is not None:
            raise ConfigError(
                VARIABLE,
                f"{', '.join(sorted(network_tools))} declare network=True, and {absent}: "
                + usernet.PACKAGE_HINT,
            )
    _probe(settings, bool(network_tools))


@functools.cache
def _probe(settings: Settings, network: bool) -> None:
    try:
        done = run_command(
            [sys.executable, "-I", "-c", PROBE],
            policy=policy_for(settings),
            workspace=None,
            cwd="/tmp",
            network=network,
            timeout_s=PROBE_TIMEOUT_S,
        )
    except SandboxUnavailable as exc:
        raise ConfigError(VARIABLE, str(exc)) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(
            VARIABLE, f"a sandboxed probe did not end in {PROBE_TIMEOUT_S:g}s"
        ) from None
    if done.returncode != 0:
        raise ConfigError(VARIABLE, missing_interpreter(done.returncode, done.stderr))
    if done.stdout.strip():
        raise ConfigError(VARIABLE, f"the sandbox does not hold here: {done.stdout.strip()}")


def missing_interpreter(code: int, stderr: str) -> str:
    """The one line for a sandbox that cannot run the worker's interpreter."""
    tail = " ".join(stderr.strip().splitlines()[-2:])[:300]
    where = os.path.realpath(sys.executable)
    return (
        f"the sandbox cannot run this worker's interpreter {sys.executable!r} "
        f"(really {where!r}; exit {code}: {tail or 'no message'}): its folders must be "
        "readable by the sandbox uid (AGENTLEDGER_SANDBOX_UID), or set AGENTLEDGER_SANDBOX=off"
    )


def network_tools(toolset: ToolSet) -> list[str]:
    """The names of a tool set's tools that declare network=True."""
    return [name for name, t in toolset.tools.items() if t.network]

"""Starting a sandboxed command from a command line alone: an MCP stdio server,
which the MCP client spawns itself and talks to over stdin and stdout, so no
descriptor can be handed to it the way `process.py` hands them.

`python -I -c BOOT <package root> <root: 0|1> <network: 0|1> <seccomp file> --
<command…>` opens the seccomp filter for bwrap (`{seccomp}` in the command);
without a network it then becomes the command (exec). With one it starts the
command, reads bwrap's init pid (`{info}`), gives the sandbox its user-mode
network (`usernet.py`), lets it go on (`{block}`) and waits: it passes on the
command's exit status, and the network ends with it. A launcher killed takes
the sandbox with it (bwrap's --die-with-parent) and its network (slirp4netns's
exit pipe). Standard library and `usernet` only: it starts in milliseconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from agentledger.services.adapters.tools.launch import main; sys.exit(main(sys.argv[2:]))"
)


def package_root() -> str:
    """The folder holding the `agentledger` package this worker runs (the launcher imports
    it): `.pkg` in a checkout, site-packages in an install."""
    import agentledger

    return os.path.dirname(os.path.dirname(os.path.abspath(agentledger.__file__)))


def boot_line(*, root: bool, network: bool, seccomp_file: str) -> list[str]:
    """The launcher's part of a command line; the command follows it."""
    return [
        sys.executable, "-I", "-c", BOOT, package_root(),
        "1" if root else "0", "1" if network else "0", seccomp_file, "--",
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    root, network, seccomp_file, command = argv[0] == "1", argv[1] == "1", argv[2], argv[4:]
    seccomp = os.open(seccomp_file, os.O_RDONLY)
    if not network:
        os.set_inheritable(seccomp, True)
        line = [str(seccomp) if a == "{seccomp}" else a for a in command]
        os.execv(line[0], line)
    from agentledger.services.adapters.tools import usernet

    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    fds = {"{seccomp}": seccomp, "{info}": info_w, "{block}": block_r}
    line = [str(fds[a]) if a in fds else a for a in command]
    child = subprocess.Popen(line, pass_fds=tuple(fds.values()))
    for fd in fds.values():
        os.close(fd)
    try:
        net = usernet.attach(_child_pid(info_r), root=root)
    except (usernet.NetworkUnavailable, OSError, ValueError) as exc:
        print(f"agentledger sandbox: no network: {exc}", file=sys.stderr, flush=True)
        child.kill()
        return 1
    os.write(block_w, b"1")
    try:
        return child.wait()
    finally:
        net.close()


def _child_pid(info_r: int) -> int:
    """bwrap's init pid, from its --info-fd (JSON, closed once written)."""
    data = b""
    while chunk := os.read(info_r, 4096):
        data += chunk
    os.close(info_r)
    return int(json.loads(data)["child-pid"])

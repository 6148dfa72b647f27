"""The network of a `network=True` tool's commands: a network namespace of
their own (bwrap's `--unshare-net`, like every sandbox) given a user-mode stack
by `slirp4netns`, so they reach the outside through the worker's sockets and
never the host's own services.

- `--disable-host-loopback`: 10.0.2.2, slirp's name for the host, leads nowhere
  (else it is the host's 127.0.0.1). The sandbox's own 127.0.0.1 is its own loopback.
- The host's other addresses (and link-local 169.254.0.0/16, where clouds keep
  their metadata service) get a `prohibit` route inside the namespace, set
  before the command runs, which it cannot change (it has no capability there):
  a service that listens on every address of the host is not reached either.
- slirp4netns reads every packet the command sends, so it runs confined itself:
  a seccomp filter (`--enable-seccomp`), and for a root worker its own empty root
  and no capabilities (`--enable-sandbox`; for a worker that is not root it
  cannot make one, and it runs with the worker's own rights). It ends when the
  worker closes its exit pipe (or dies).

DNS is slirp's 10.0.2.3, which asks the host's resolver (the sandbox's
`/etc/resolv.conf` says so). Other machines of the host's network stay
reachable: a firewall or a Kubernetes NetworkPolicy is the place to restrict those.

`slirp4netns` is Debian's package of that name (`apt-get install -y
slirp4netns`); the start probe refuses `network=True` tools where it is missing.
Setting the routes uses `nsenter` (util-linux) and `ip` (iproute2)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE_HINT = (
    "install slirp4netns (`apt-get install -y slirp4netns`), which gives network=True "
    "tools' commands a network of their own, or set AGENTLEDGER_SANDBOX=off"
)
TUN_HINT = (
    "slirp4netns needs /dev/net/tun (a container: compose `devices: [/dev/net/tun]`, "
    "Kubernetes a device plugin that offers it), or set AGENTLEDGER_SANDBOX=off"
)
NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: the user namespace that owns it
READY_S = 10.0
PROHIBITED_ALWAYS = ("169.254.0.0/16",)


class NetworkUnavailable(Exception):
    """The user-mode network could not be made; the command must not run."""


def hint(failure: str) -> str:
    """What to change for a network that could not be made."""
    return TUN_HINT if "/dev/net/tun" in failure else PACKAGE_HINT


def missing() -> str | None:
    """What is not installed for a user-mode network, or None."""
    for program, package in (
        ("slirp4netns", "slirp4netns"),
        ("nsenter", "util-linux"),
        ("ip", "iproute2"),
    ):
        if shutil.which(program) is None:
            return f"{program} ({package}) is not on PATH"
    return None


@dataclass
class UserNet:
    """A running slirp4netns for one sandbox; `close` ends it."""

    popen: subprocess.Popen[bytes]
    exit_w: int
    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        _close(self.exit_w, *self.fds)
        self.exit_w = -1
        self.fds = []
        try:
            self.popen.wait(2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def attach(pid: int, *, root: bool) -> UserNet:
    """Give the network namespace of the sandbox process `pid` its stack and
    routes. A worker that is not root enters the namespace through the user
    namespace that owns it (bwrap's first one: the command's is nested in it)."""
    _wait_for_loopback(pid)
    net_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    owner_fd = -1 if root else fcntl.ioctl(net_fd, NS_GET_USERNS)
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    slirp = [
        shutil.which("slirp4netns") or "slirp4netns", "--configure", "--mtu=65520",
        "--disable-host-loopback", "--enable-seccomp", *(["--enable-sandbox"] if root else []),
        f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", "--netns-type=path",
        *([] if root else [f"--userns-path=/proc/self/fd/{owner_fd}"]),
        f"/proc/self/fd/{net_fd}", "tap0",
    ]  # fmt: skip
    passed = tuple(fd for fd in (net_fd, owner_fd, ready_w, exit_r) if fd >= 0)
    try:
        popen = subprocess.Popen(
            slirp, pass_fds=passed, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        _close(net_fd, owner_fd, ready_r, ready_w, exit_r, exit_w)
        raise NetworkUnavailable(f"slirp4netns did not start: {exc}") from None
    _close(ready_w, exit_r)
    net = UserNet(popen, exit_w, [net_fd, owner_fd])
    try:
        _wait_ready(popen, ready_r)
        _prohibit(net_fd, owner_fd, host_addresses())
    except BaseException:
        net.close()
        raise
    finally:
        _close(ready_r)
    return net


def _wait_for_loopback(pid: int) -> None:
    """Until bwrap has given the namespace its 127.0.0.1: slirp4netns's --configure
    brings the loopback up too, and the kernel then adds that address itself, so
    bwrap's own request for it, coming second, would fail (EEXIST) and end the sandbox."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        try:
            if "127.0.0.1" in _local_addresses(Path(f"/proc/{pid}/net/fib_trie").read_text()):
                return
        except OSError as exc:
            raise NetworkUnavailable(
                f"the sandbox went away before its network was made: {exc}"
            ) from None
        time.sleep(0.002)
    raise NetworkUnavailable(f"the sandbox's loopback was not up within {READY_S:g}s")


def _wait_ready(popen: subprocess.Popen[bytes], ready_r: int) -> None:
    readable, _, _ = select.select([ready_r], [], [], READY_S)
    if readable and os.read(ready_r, 1) == b"1":
        return
    popen.kill()
    _, err = popen.communicate()
    why = err.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
    raise NetworkUnavailable(f"slirp4netns did not come up: {why[0]}")


def _prohibit(net_fd: int, owner_fd: int, addresses: list[str]) -> None:
    routes = "".join(f"route add prohibit {a}\n" for a in [*addresses, *PROHIBITED_ALWAYS])
    enter = [f"--net=/proc/self/fd/{net_fd}"]
    if owner_fd >= 0:
        enter = [f"--user=/proc/self/fd/{owner_fd}", "--preserve-credentials", *enter]
    done = subprocess.run(
        [shutil.which("nsenter") or "nsenter", *enter, "--", shutil.which("ip") or "ip", "-batch", "-"],
        input=routes.encode(), capture_output=True, pass_fds=tuple(fd for fd in (net_fd, owner_fd) if fd >= 0),
        timeout=READY_S,
    )  # fmt: skip
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[-300:]
        raise NetworkUnavailable(f"the routes to the host's addresses could not be closed: {why}")


def host_addresses() -> list[str]:
    """The host's own IPv4 addresses but loopback, as /32 routes (IPv6 is not
    routed into the sandbox at all: slirp4netns runs without it)."""
    try:
        text = Path("/proc/net/fib_trie").read_text()
    except OSError:
        return []
    return [f"{a}/32" for a in _local_addresses(text) if not a.startswith("127.")]


def _local_addresses(fib_trie: str) -> list[str]:
    """The local addresses a /proc/…/net/fib_trie lists."""
    found: list[str] = []
    last = ""
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|--"):
            last = text[3:].strip()
        elif text.startswith("/32 host LOCAL") and last and last not in found:
            found.append(last)
    return found


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

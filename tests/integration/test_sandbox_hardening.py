"""The sandbox as a hostile command finds it, checked from inside a real sandbox
and against the ground truth outside: never the host's root (uid, capabilities,
no_new_privs, /proc/sys and `core_pattern`, new user namespaces), /dev/shm and
/tmp capped, a workspace's sockets, FIFOs and devices unreachable, a
`network=True` command's network its own (the host's loopback and addresses
unreachable, its own loopback working), the workspace handed to the sandbox uid
without a chown outside it. Run as root (this machine, CI) they check the root
worker's flow; as another user, the unprivileged one."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from checkkit import check_app, check_state

from agentledger.schemas.spec import CommandCheck
from agentledger.services.adapters.redis.local_server import redis_server_binary
from agentledger.services.adapters.tools import handover, usernet
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.adapters.tools.process import Completed, run_command
from agentledger.services.adapters.tools.sandbox import Limits, SandboxPolicy
from agentledger.services.handlers.checks import run_check
from agentledger.services.settings import Settings

POLICY = SandboxPolicy()
ROOT = os.geteuid() == 0
CORE_PATTERN = "/proc/sys/kernel/core_pattern"


def run(ws: Path, argv: list[str], policy: SandboxPolicy = POLICY, **kw: object) -> Completed:
    return run_command(argv, policy=policy, workspace=str(ws), cwd=str(ws), **kw)  # type: ignore[arg-type]


def sh(ws: Path, script: str, *args: str, **kw: object) -> Completed:
    return run(ws, ["/bin/sh", "-c", script, "sh", *args], **kw)  # type: ignore[arg-type]


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def command_check(ws: Path, command: str, settings: Settings | None = None) -> object:
    """A `command:` acceptance check, as the acceptance worker runs it."""
    state = check_state(str(ws))
    return run_check(check_app(settings), state, CommandCheck(command=command, timeout_s=60))


def status(text: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines()) if v}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


# --- never host root ---------------------------------------------------------


def test_a_command_is_never_host_root_seen_from_inside_and_from_the_host(ws: Path) -> None:
    done = sh(ws, "cat /proc/self/status; echo made > made.txt; sleep 0.5 & echo $! > pid; wait")
    inside = status(done.stdout)
    assert "0" not in inside["Uid"].split() and "0" not in inside["Gid"].split(), inside["Uid"]
    made = (ws / "made.txt").stat()
    assert made.st_uid != 0 and made.st_gid != 0  # its owner seen from the host
    if ROOT:
        assert (made.st_uid, made.st_gid) == (POLICY.uid, POLICY.gid)
    else:
        assert made.st_uid == os.geteuid()


def test_a_commands_host_uid_is_not_0_while_it_runs(ws: Path) -> None:
    """Read off the host's /proc: the process carrying a unique argument."""
    marker = f"{40 + uuid.uuid4().int % 1000 / 1000:.3f}"
    seen: list[str] = []

    def watch() -> None:
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            for entry in os.listdir("/proc"):
                try:
                    if (
                        entry.isdigit()
                        and Path(f"/proc/{entry}/cmdline").read_bytes()
                        == f"sleep\0{marker}\0".encode()
                    ):
                        seen.append(status(Path(f"/proc/{entry}/status").read_text())["Uid"])
                except OSError:
                    pass
            time.sleep(0.02)

    t = threading.Thread(target=watch)
    t.start()
    run(ws, ["sh", "-c", f"sleep {marker} & p=$!; sleep 2; kill $p"])
    t.join()
    assert seen and "0" not in seen[0].split(), seen


def test_a_command_has_no_capabilities_and_no_new_privileges(ws: Path) -> None:
    inside = status(sh(ws, "cat /proc/self/status").stdout)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(inside[cap], 16) == 0, (cap, inside[cap])
    assert inside["NoNewPrivs"] == "1"
    assert inside["Seccomp"] == "2"  # the filter (seccomp.py) is on


def test_core_pattern_cannot_be_written_even_with_its_own_value(ws: Path) -> None:
    """The safe probe: write back what is there. Today's flags let root write it."""
    before = Path(CORE_PATTERN).read_text()
    done = sh(ws, f'printf "%s" "$1" > {CORE_PATTERN} && echo WROTE', before.rstrip("\n"))
    assert "WROTE" not in done.stdout and done.returncode != 0
    assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr
    assert Path(CORE_PATTERN).read_text() == before


def test_core_pattern_is_refused_from_a_command_check_and_a_read_only_tools_run(ws: Path) -> None:
    value = Path(CORE_PATTERN).read_text().rstrip("\n")
    probe = f"printf '%s' '{value}' > {CORE_PATTERN}"
    verdict = command_check(ws, probe)
    assert verdict.passed is False  # type: ignore[attr-defined]
    assert "Read-only file system" in verdict.evidence["stderr_tail"]  # type: ignore[attr-defined]
    ctx = ToolContext("r", "c", str(ws), "p", "t", read_only=True)
    done = ctx.run(["/bin/sh", "-c", probe])
    assert done.returncode != 0 and "Read-only file system" in done.stderr


def test_proc_sys_and_its_neighbours_are_read_only_and_dockers_masked_paths_are_empty(
    ws: Path,
) -> None:
    code = """
import os
mounts = {}
for line in open('/proc/self/mountinfo'):
    f = line.split()
    mounts[f[4]] = f[5].split(',')
for name in ('sys', 'sysrq-trigger', 'irq', 'bus'):
    if os.path.exists('/proc/' + name):
        print(name, 'ro' in mounts.get('/proc/' + name, []))
for name in ('keys', 'timer_list', 'kcore', 'sched_debug', 'latency_stats'):
    if os.path.exists('/proc/' + name):
        print(name, 'empty' if open('/proc/' + name, 'rb').read() == b'' else 'READABLE')
for name in ('acpi', 'scsi', 'asound'):
    if os.path.isdir('/proc/' + name):
        print(name, 'empty' if os.listdir('/proc/' + name) == [] else 'LISTED')
"""
    lines = dict(ln.split(" ", 1) for ln in run(ws, py(code)).stdout.splitlines())
    assert lines["sys"] == "True"
    for name in ("sysrq-trigger", "irq", "bus"):
        assert lines.get(name, "True") == "True", name
    assert lines["keys"] == "empty"  # /proc/keys is there on every kernel with keys
    assert "READABLE" not in lines.values() and "LISTED" not in lines.values(), lines


USERNS_TRIES = """
import ctypes, errno, os, platform, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
print('unshare-cmd', subprocess.run(['unshare', '-U', 'true']).returncode)
print('unshare-map-root', subprocess.run(['unshare', '-r', 'true']).returncode)
print('unshare', libc.unshare(CLONE_NEWUSER), ctypes.get_errno())
numbers = {'x86_64': (56, 435, 250), 'aarch64': (220, 435, 219)}[platform.machine()]
pid = libc.syscall(numbers[0], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
print('clone', pid, ctypes.get_errno())
print('clone3', libc.syscall(numbers[1], 0, 0), ctypes.get_errno())
print('keyctl', libc.syscall(numbers[2], 0, -3, 0), ctypes.get_errno())
if platform.machine() == 'x86_64':  # i386's unshare (310) through int 0x80: its own numbers
    import mmap
    code = bytes.fromhex('53' 'b836010000' 'bb00000010' 'cd80' '5b' 'c3')
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
    print('int80-unshare', fn(), 0)
"""


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64"), reason="filter built for these"
)
def test_a_new_user_namespace_and_the_keyrings_are_refused_every_way(ws: Path) -> None:
    done = run(ws, py(USERNS_TRIES))
    said = {ln.split()[0]: ln.split()[1:] for ln in done.stdout.splitlines()}
    assert said["unshare-cmd"] != ["0"] and said["unshare-map-root"] != ["0"], done.stderr
    assert said["unshare"] == ["-1", "1"]  # EPERM
    assert said["clone"] == ["-1", "1"]
    assert said["clone3"] == ["-1", "38"]  # ENOSYS: the C library falls back to clone
    assert said["keyctl"] == ["-1", "1"]
    if platform.machine() == "x86_64":
        assert said["int80-unshare"] == ["-1", "0"]  # -EPERM from the 32-bit table's check


# --- sizes ---------------------------------------------------------------------


def test_dev_shm_and_tmp_are_capped_and_dev_is_read_only(ws: Path) -> None:
    policy = SandboxPolicy(limits=Limits(tmp_mb=8))
    script = """
for d in /dev/shm /tmp; do
  dd if=/dev/zero of=$d/fill bs=1M count=16 2>/dev/null && echo "$d FULL-16MB" || echo "$d capped $(du -m $d/fill | cut -f1)"
done
touch /dev/made && echo DEV-WRITABLE || echo dev read-only
"""
    done = run(ws, ["/bin/sh", "-c", script], policy)
    assert "FULL-16MB" not in done.stdout and "DEV-WRITABLE" not in done.stdout, done.stdout
    for folder in ("/dev/shm", "/tmp"):
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(folder + " "))
        assert line.startswith(f"{folder} capped") and int(line.split()[-1]) <= 8, line
    assert (
        "No space left on device"
        in run(ws, py("open('/dev/shm/x', 'wb').write(b'x' * 16 * 1024 * 1024)"), policy).stderr
    )


# --- the workspace ---------------------------------------------------------------


@pytest.mark.skipif(not ROOT, reason="a worker that is not root hands nothing over")
def test_the_workspace_is_handed_to_the_sandbox_uid_and_nothing_outside_it(
    ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("root's")
    private = ws / "sub"
    private.mkdir(mode=0o700)
    (private / "secret.txt").write_text("the run's")
    os.chmod(private / "secret.txt", 0o600)
    os.symlink(outside, ws / "link-out")
    os.link(outside, ws / "hard-link")  # a name of a file outside: left alone
    done = sh(ws, "cat sub/secret.txt && echo more >> sub/secret.txt && mkdir sub/new && echo ok")
    assert done.stdout.strip().endswith("ok"), done.stderr
    for path in (ws, private, private / "secret.txt"):
        assert (path.stat().st_uid, path.stat().st_gid) == (POLICY.uid, POLICY.gid), path
    assert outside.stat().st_uid == 0 and outside.stat().st_nlink == 2  # never chowned
    assert (ws / "link-out").lstat().st_uid == POLICY.uid  # the link itself, not its target


@pytest.mark.skipif(not ROOT, reason="a worker that is not root hands nothing over")
def test_handing_over_1000_files_is_one_walk_and_the_next_walk_changes_nothing(ws: Path) -> None:
    for i in range(20):
        folder = ws / f"d{i}"
        folder.mkdir()
        for j in range(50):
            (folder / f"f{j}.py").write_text("x")
    started = time.perf_counter()
    first = handover.prepare(str(ws), owner=(POLICY.uid, POLICY.gid), limit=100_000)
    took = time.perf_counter() - started
    second = handover.prepare(str(ws), owner=(POLICY.uid, POLICY.gid), limit=100_000)
    assert (first.entries, first.handed) == (1021, 1021) and second.handed == 0
    print(f"\nhanded 1,000 files over in {took * 1000:.1f} ms")  # the cost, for the record
    with pytest.raises(Exception, match="AGENTLEDGER_SANDBOX_SCAN_MAX"):
        handover.prepare(str(ws), owner=None, limit=500)


@pytest.fixture
def redis_in_workspace(ws: Path) -> Iterator[tuple[Path, redis.Redis]]:
    """A real private redis-server whose only listener is a unix socket in the workspace."""
    sock = ws / "redis.sock"
    server = subprocess.Popen(
        [redis_server_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "777",
         "--save", "", "--appendonly", "no", "--dir", str(ws.parent)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    host = redis.Redis(unix_socket_path=str(sock))
    deadline = time.monotonic() + 10
    while True:
        try:
            host.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)
    yield sock, host
    host.close()
    server.terminate()
    server.wait(10)


def test_a_redis_socket_in_the_workspace_is_never_reachable(
    ws: Path, redis_in_workspace: tuple[Path, redis.Redis]
) -> None:
    sock, host = redis_in_workspace
    before = host.info("stats")["total_connections_received"]
    verdict = command_check(ws, "redis-cli -s ./redis.sock ping")
    assert verdict.passed is False  # type: ignore[attr-defined]
    assert "PONG" not in verdict.evidence["stdout_tail"]  # type: ignore[attr-defined]
    code = (
        "import socket\nc = socket.socket(socket.AF_UNIX)\n"
        "try:\n    c.connect('redis.sock'); c.sendall(b'PING\\r\\n'); print('GOT', c.recv(64))\n"
        "except OSError as e:\n    print('refused', e)\n"
    )
    done = run(ws, py(code))
    assert "GOT" not in done.stdout and "refused" in done.stdout, done.stdout + done.stderr
    assert host.info("stats")["total_connections_received"] == before  # nobody else came
    assert host.ping() and stat.S_ISSOCK(sock.stat().st_mode)  # still there, for the host


@pytest.mark.skipif(not ROOT, reason="mknod needs root")
def test_fifos_and_devices_in_the_workspace_are_covered(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    os.mknod(ws / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    done = sh(
        ws, "for f in pipe null; do test -p $f -o -c $f && echo $f SPECIAL || echo $f covered; done"
    )
    assert done.stdout.split("\n")[:2] == ["pipe covered", "null covered"], done.stdout


# --- the network of a network=True tool -----------------------------------------


def host_addresses() -> list[str]:
    """Every address of this host but loopback, IPv4 and IPv6 (global ones)."""
    found = [a.removesuffix("/32") for a in usernet.host_addresses()]
    for line in Path("/proc/net/if_inet6").read_text().splitlines():
        raw, scope = line.split()[0], line.split()[3]
        if scope == "00":  # global
            found.append(":".join(raw[i : i + 4] for i in range(0, 32, 4)))
    return found


@pytest.fixture
def canary() -> Iterator[tuple[int, list[object]]]:
    """A TCP listener on every address of the host, counting connections."""
    server = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            accepted.append(peer)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()[1], accepted
    stop.set()
    t.join()
    server.close()


CONNECT = """
import socket, sys
for host, port in [tuple(a.rsplit(':', 1)) for a in sys.argv[1:]]:
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print('CONNECTED', host, port)
    except OSError as e:
        print('refused', host, port, e.errno)
"""


@pytest.mark.skipif(
    usernet.missing() is not None, reason="no slirp4netns here (apt-get install slirp4netns)"
)
def test_a_network_tools_command_reaches_neither_the_hosts_loopback_nor_its_addresses(
    ws: Path, canary: tuple[int, list[object]]
) -> None:
    port, accepted = canary
    targets = [f"127.0.0.1:{port}", f"::1:{port}", "127.0.0.1:6379", "::1:6379", f"10.0.2.2:{port}"]
    targets += [f"{a}:{p}" for a in host_addresses() for p in (port, 6379)]
    ctx = ToolContext("r", "c", str(ws), "p", "t", network=True)
    done = ctx.run([sys.executable, "-c", CONNECT, *targets])
    assert "CONNECTED" not in done.stdout, done.stdout
    assert done.stdout.count("refused") == len(targets), done.stdout + done.stderr
    assert accepted == []  # the ground truth: no connection reached the host's listener


@pytest.mark.skipif(
    usernet.missing() is not None, reason="no slirp4netns here (apt-get install slirp4netns)"
)
def test_a_network_tools_command_has_a_stack_and_a_loopback_of_its_own(ws: Path) -> None:
    code = """
import socket, subprocess, threading
server = socket.create_server(('127.0.0.1', 0))
def answer():
    conn, _ = server.accept(); conn.sendall(b'pong from inside'); conn.close()
threading.Thread(target=answer).start()
print(socket.create_connection(server.getsockname(), timeout=3).recv(64).decode())
print(subprocess.run(['ip', 'route'], capture_output=True, text=True).stdout)
"""
    done = ToolContext("r", "c", str(ws), "p", "t", network=True).run(py(code))
    assert "pong from inside" in done.stdout, done.stderr
    assert "default via 10.0.2.2 dev tap0" in done.stdout  # slirp4netns's stack, not the host's


# --- MCP stdio servers: the same sandbox, started from a command line ------------


def mcp_line(ws: Path, command: list[str], *, network: bool) -> list[str]:
    from agentledger.schemas.mcp_servers import McpServer
    from agentledger.services.adapters.tools.mcp.transport import stdio_command

    config = McpServer.model_validate({"command": command, "network": network})
    return stdio_command(config, workspace=str(ws), policy=POLICY)


def test_an_mcp_stdio_server_is_never_host_root_either(ws: Path) -> None:
    line = mcp_line(
        ws,
        ["/bin/sh", "-c", "cat /proc/self/status; pwd; unshare -U true || echo refused"],
        network=False,
    )
    done = subprocess.run(line, capture_output=True, text=True, timeout=60)
    inside = status(done.stdout)
    assert "0" not in inside["Uid"].split() and int(inside["CapEff"], 16) == 0
    assert inside["NoNewPrivs"] == "1" and inside["Seccomp"] == "2"
    assert f"\n{ws}\n" in done.stdout and done.stdout.rstrip().endswith("refused")


@pytest.mark.skipif(
    usernet.missing() is not None, reason="no slirp4netns here (apt-get install slirp4netns)"
)
def test_an_mcp_server_with_network_true_gets_a_network_of_its_own(
    ws: Path, canary: tuple[int, list[object]]
) -> None:
    port, accepted = canary
    targets = [f"127.0.0.1:{port}", "127.0.0.1:6379"] + [f"{a}:{port}" for a in host_addresses()]
    code = (
        CONNECT
        + "\nimport subprocess; print(subprocess.run(['ip', 'route'], capture_output=True, text=True).stdout)"
    )
    line = mcp_line(ws, [sys.executable, "-c", code, *targets], network=True)
    done = subprocess.run(line, capture_output=True, text=True, timeout=60)
    assert "default via 10.0.2.2 dev tap0" in done.stdout, done.stdout + done.stderr
    assert "CONNECTED" not in done.stdout and done.stdout.count("refused") == len(targets)
    assert accepted == []


# --- a worker that is not root: the unprivileged flow, from this root test run -------

UNPRIVILEGED = """
import json, sys
from agentledger.services.adapters.tools.process import run_command
from agentledger.services.adapters.tools.sandbox import SandboxPolicy
ws, value, network = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
script = ('cat /proc/self/status; printf "%s" "$1" > /proc/sys/kernel/core_pattern && echo WROTE; '
          'unshare -U true && echo NESTED; echo x > made.txt; touch /dev/x && echo DEV-WRITABLE; ip route')
done = run_command(["/bin/sh", "-c", script, "sh", value], policy=SandboxPolicy(), workspace=ws,
                   cwd=ws, network=network)
print(json.dumps({"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}))
"""


def system_python() -> str | None:
    """An interpreter the sandbox uid can run that imports the sandbox's modules
    (they need the standard library only): the distribution's own."""
    for path in ("/usr/bin/python3",):
        if os.access(path, os.X_OK):
            return path
    return None


@pytest.mark.skipif(not ROOT or system_python() is None, reason="needs root to become another user")
@pytest.mark.parametrize("network", [False, True])
def test_a_worker_that_is_not_root_gets_the_same_from_inside(network: bool) -> None:
    if network and usernet.missing() is not None:
        pytest.skip("no slirp4netns here")
    outer = Path(tempfile.mkdtemp(prefix="al-unprivileged-", dir="/tmp"))  # pytest's are 0700
    outer.chmod(0o755)
    try:
        _as_another_user(outer, network)
    finally:
        shutil.rmtree(outer)


def _as_another_user(outer: Path, network: bool) -> None:
    ws = outer / "ws"
    ws.mkdir(mode=0o700)
    os.chown(ws, 65534, 65534)
    root_dir = Path(__file__).resolve().parents[2]
    value = Path(CORE_PATTERN).read_text().rstrip("\n")
    done = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", system_python(),
         "-c", UNPRIVILEGED, str(ws), value, "1" if network else "0"],  # type: ignore[list-item]
        capture_output=True, text=True, timeout=120, cwd="/",
        env={"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(root_dir / ".pkg"), str(root_dir)]), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    missing = re.search(r"ModuleNotFoundError: No module named '([^'.]+)", done.stderr)
    if missing and missing.group(1) not in ("agentledger", "events", "schemas", "services"):
        pytest.skip(  # a dependency the distribution's python lacks; our own code must import
            f"the distribution's python cannot import the sandbox's modules: {done.stderr[-200:]}"
        )
    assert done.stdout.strip(), done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    inside = status(result["stdout"])
    assert (
        int(inside["CapEff"], 16) == int(inside["CapBnd"], 16) == 0 and inside["NoNewPrivs"] == "1"
    )
    assert "WROTE" not in result["stdout"] and "Read-only file system" in result["stderr"]
    assert "NESTED" not in result["stdout"] and "DEV-WRITABLE" not in result["stdout"]
    assert (ws / "made.txt").stat().st_uid == 65534  # the worker's own uid on the host
    assert ("default via 10.0.2.2 dev tap0" in result["stdout"]) is network

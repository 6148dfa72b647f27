"""Commands in the real sandbox (bubblewrap on this machine): what they can
reach, checked against the ground truth outside — files, a canary listener on
loopback, the process table — and the limits that stop them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentledger.services.adapters.tools import pids
from agentledger.services.adapters.tools.process import Completed, Process, run_command
from agentledger.services.adapters.tools.sandbox import Limits, SandboxPolicy, python_paths

POLICY = SandboxPolicy()


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def run(ws: Path, argv: list[str], policy: SandboxPolicy = POLICY, **kw: object) -> Completed:
    return run_command(argv, policy=policy, workspace=str(ws), cwd=str(ws), **kw)  # type: ignore[arg-type]


def with_marker(marker: str) -> list[int]:
    """Host pids whose command line holds `marker`."""
    return [pid for pid, cmdline in _cmdlines() if marker.encode() in cmdline]


def running(*argv: str) -> list[int]:
    """Host pids whose command line is exactly `argv`."""
    want = "\x00".join(argv).encode() + b"\x00"
    return [pid for pid, cmdline in _cmdlines() if cmdline == want]


def _cmdlines() -> list[tuple[int, bytes]]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found.append((int(entry), Path(f"/proc/{entry}/cmdline").read_bytes()))
            except OSError:
                pass
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "other-run").mkdir()
    (tmp_path / "other-run" / "secret.txt").write_text("another run's file")
    return tmp_path / "ws"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A canary TCP listener on loopback; the list gets one entry per connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()[1], accepted
    stop.set()
    t.join()
    server.close()


def test_the_workspace_is_writable_and_nothing_else_is(ws: Path) -> None:
    prefix = python_paths()[0] if python_paths() else "/usr/lib"
    code = f"""
import os
open('made.txt', 'w').write('ok')
for path in ('/usr/pwned', {prefix!r} + '/pwned', '/etc/pwned', '/pwned', '/root/pwned'):
    try:
        open(path, 'w')
        print('WROTE', path)
    except OSError as e:
        print('refused', path, e.errno)
open({str(ws.parent)!r} + '/beside', 'w')  # its private /tmp, or refused when outside /tmp
"""
    done = run(ws, py(code))
    assert "WROTE" not in done.stdout and done.stdout.count("refused") == 5, done.stdout
    assert (ws / "made.txt").read_text() == "ok"
    for path in ("/usr/pwned", f"{prefix}/pwned", "/etc/pwned", "/pwned", "/root/pwned"):
        assert not Path(path).exists()
    assert not (ws.parent / "beside").exists()  # the ground truth: nothing beside the workspace


def test_the_home_other_workspaces_and_the_workers_environment_are_not_there(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AL_TEST_CANARY", "canary-value-123")
    home = os.path.expanduser("~")
    code = f"""
import os
print(sorted(os.environ))
print(os.path.exists({str(ws.parent / "other-run" / "secret.txt")!r}))
print(sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else [])
try:  # as the sandbox uid of a root worker, the sandbox's init is not even readable
    seen = b'canary' in open('/proc/1/environ', 'rb').read()
except PermissionError:
    seen = False
print(os.path.exists('/etc/shadow'), seen)
"""
    done = run(ws, py(code))
    env, other, listing, shadow = done.stdout.splitlines()
    assert "AL_TEST_CANARY" not in env and "canary-value-123" not in done.stdout
    assert other == "False"
    visible = {p[len(home) + 1 :].split("/")[0] for p in python_paths() if p.startswith(home + "/")}
    assert set(eval(listing)) <= visible  # only the way to the interpreter's prefix
    assert shadow == "False False"


def test_tmp_is_private_to_the_command(ws: Path) -> None:
    name = f"al-sandbox-{uuid.uuid4().hex}"
    host_file = Path("/tmp", f"al-host-{uuid.uuid4().hex}")
    host_file.write_text("the worker's")
    try:
        done = run(
            ws,
            py(
                f"open('/tmp/{name}', 'w').write('x'); print(sorted(__import__('os').listdir('/tmp')))"
            ),
        )
    finally:
        host_file.unlink()
    seen = set(eval(done.stdout))
    way_to_ws = {ws.relative_to("/tmp").parts[0]} if ws.is_relative_to("/tmp") else set()
    assert seen == {name} | way_to_ws
    assert not Path("/tmp", name).exists()


def test_no_network_unless_declared(ws: Path, listener: tuple[int, list[object]]) -> None:
    port, accepted = listener
    code = f"""
import socket
for host, p in [('127.0.0.1', {port}), ('127.0.0.1', 6379)]:
    try:
        socket.create_connection((host, p), timeout=2).close()
        print('CONNECTED', p)
    except OSError as e:
        print('refused', p, e.errno)
"""
    done = run(ws, py(code))
    assert "CONNECTED" not in done.stdout and done.stdout.count("refused") == 2
    assert accepted == []
    # a network tool's commands have a network of their own, which never leads to
    # the host's loopback either (tests/integration/test_sandbox_hardening.py)
    allowed = run(ws, py(code), network=True)
    assert "CONNECTED" not in allowed.stdout and allowed.stdout.count("refused") == 2
    assert accepted == []


def test_no_capabilities_so_no_remounting_and_no_nested_namespaces(ws: Path) -> None:
    done = run(
        ws,
        [
            "sh",
            "-c",
            "grep CapEff /proc/self/status; mount -o remount,rw,bind /usr && echo REMOUNTED; unshare -r true && echo NESTED; touch /usr/x || echo ro",
        ],
    )
    assert "CapEff:\t0000000000000000" in done.stdout
    assert "REMOUNTED" not in done.stdout and "NESTED" not in done.stdout and "ro" in done.stdout


def test_pytest_runs_in_the_sandbox(ws: Path) -> None:
    (ws / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = run(ws, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.mark.fork_bomb
def test_a_fork_bomb_is_refused_at_the_process_limit_by_the_pids_cgroup(ws: Path) -> None:
    if pids.cgroup_parent() is None:
        pytest.skip("no pids cgroup can be made here; the namespace watch is tested")
    marker = f"bomb{uuid.uuid4().hex[:8]}"
    policy = SandboxPolicy(limits=Limits(processes=32))
    started = time.monotonic()
    done = run(ws, ["bash", "-c", f"b(){{ b|b& }}; b; sleep 300 # {marker}"], policy)
    assert done.limit == "the limit of 32 processes"
    assert "[sandbox: stopped at the limit of 32 processes]" in done.stderr
    assert time.monotonic() - started < 60  # stopped at the limit, not after the sleep 300
    assert gone(marker, within_s=30), f"left behind: {with_marker(marker)}"


SPAWNER = """
import os, sys, time
for n in range(3000):
    os.posix_spawn('/bin/sleep', ['sleep', '300', sys.argv[1]], {})
    time.sleep(0.002)
print('ESCAPED', n + 1, flush=True)
time.sleep(300)
"""


@pytest.mark.fork_bomb
def test_without_a_cgroup_the_namespace_watch_stops_a_spawner_at_the_process_limit(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch is no hard bound: an exponential bomb outruns any look on a loaded
    machine (one reached 20,006 processes, and the host's other forks failed). A
    spawner capped at 3,000 processes shows the watch stopping a command at the
    limit without putting the host's process table at stake."""
    monkeypatch.setattr(pids, "cgroup_parent", lambda: None)
    marker = f"spawn{uuid.uuid4().hex[:8]}"
    policy = SandboxPolicy(limits=Limits(processes=32))
    done = run(ws, [*py(SPAWNER), marker], policy)
    assert done.limit == "the limit of 32 processes", done.stdout + done.stderr
    assert "[sandbox: stopped at the limit of 32 processes]" in done.stderr
    assert "ESCAPED" not in done.stdout
    assert gone(marker, within_s=30), f"left behind: {with_marker(marker)}"


def gone(marker: str, within_s: float = 5.0) -> bool:
    """Nothing with the marker is left, once the killed processes are reaped (a
    loaded machine may take a moment to reap a few hundred of them)."""
    return eventually(lambda: not with_marker(marker), within_s)


def eventually(holds: Callable[[], bool], within_s: float = 5.0) -> bool:
    """What must come true does, within a time a busy machine allows: the test waits
    for the outcome, not for a guess of how long the kernel takes to reap."""
    deadline = time.monotonic() + within_s
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_cpu_memory_and_file_size_are_limited(ws: Path) -> None:
    policy = SandboxPolicy(limits=Limits(cpu_s=1, memory_mb=300, file_mb=1))
    started = time.monotonic()
    spin = run(ws, py("while True: pass"), policy)
    # a CPU second can take a busy machine several seconds of wall clock; never a minute
    assert spin.returncode != 0 and time.monotonic() - started < 60
    assert spin.limit == "the CPU limit of 1 s"
    memory = run(ws, py("b = bytearray(600 * 1024 * 1024)"), policy)
    assert memory.returncode == 1 and "MemoryError" in memory.stderr
    big = run(ws, py("open('big', 'wb').write(b'x' * (2 * 1024 * 1024))"), policy)
    assert big.returncode == 1 and "File too large" in big.stderr
    assert (ws / "big").stat().st_size <= 1024 * 1024


def test_a_timeout_kills_the_whole_tree(ws: Path) -> None:
    marker = f"{31 + uuid.uuid4().int % 1000 / 1000:.3f}"
    with pytest.raises(subprocess.TimeoutExpired):
        run(ws, ["sh", "-c", f"sleep {marker} & sleep {marker}; echo done"], timeout_s=0.5)
    assert eventually(lambda: running("sleep", marker) == []), running("sleep", marker)


def test_sigterm_reaches_the_command_and_sigkill_ends_the_sandbox(ws: Path) -> None:
    procs: list[Process] = []
    box: dict[str, Completed] = {}
    script = "trap 'echo got TERM; exit 3' TERM; sleep 20 & wait"
    t = threading.Thread(
        target=lambda: box.setdefault("r", run(ws, ["sh", "-c", script], started=procs.append))
    )
    t.start()
    time.sleep(0.5)
    assert procs[0].signal(signal.SIGTERM)
    t.join(5)
    assert box["r"].returncode == 3 and "got TERM" in box["r"].stdout

    procs.clear()
    stubborn = "trap '' TERM; sleep 20.25"
    t = threading.Thread(
        target=lambda: box.update(r=run(ws, ["sh", "-c", stubborn], started=procs.append))
    )
    t.start()
    time.sleep(0.5)
    procs[0].signal(signal.SIGTERM)
    t.join(0.5)
    assert t.is_alive()  # it ignores SIGTERM
    procs[0].signal(signal.SIGKILL)
    t.join(5)
    assert not t.is_alive() and box["r"].returncode != 0
    assert running("sleep", "20.25") == []


def _worker(tmp_path: Path, ws: Path, seconds: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "worker.py"
    script.write_text(
        "from agentledger.services.adapters.tools.process import run_command\n"
        "from agentledger.services.adapters.tools.sandbox import SandboxPolicy\n"
        f"run_command(['sleep', {seconds!r}], policy=SandboxPolicy(), workspace={str(ws)!r}, cwd={str(ws)!r})\n"
    )
    return subprocess.Popen([sys.executable, str(script)])


def test_the_sandbox_dies_with_the_worker(ws: Path, tmp_path: Path) -> None:
    seconds = f"{40 + uuid.uuid4().int % 1000 / 1000:.3f}"
    worker = _worker(tmp_path, ws, seconds)
    deadline = time.monotonic() + 10
    while not running("sleep", seconds) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running("sleep", seconds), "the command never started"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert eventually(lambda: running("sleep", seconds) == []), running("sleep", seconds)
    assert eventually(lambda: with_marker(f"{pids.MARK}:{worker.pid}:") == [])


@pytest.mark.parametrize("after_s", [0.0, 0.01, 0.02, 0.05])
def test_what_a_worker_killed_while_starting_a_sandbox_left_is_reaped(
    ws: Path, tmp_path: Path, after_s: float
) -> None:
    seconds = f"{50 + uuid.uuid4().int % 1000 / 1000:.3f}"
    worker = _worker(tmp_path, ws, seconds)
    deadline = time.monotonic() + 10
    while not with_marker(f"{pids.MARK}:{worker.pid}:") and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(after_s)  # somewhere in bwrap's set-up, or once the command runs
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    # the reaper runs on every sandbox start, at most every REAP_EVERY_S: a
    # process still being made by the dead worker's bwrap is caught by the next pass
    mark = f"{pids.MARK}:{worker.pid}:"

    def reaped() -> bool:
        pids.reap_orphans(force=True)
        return not with_marker(mark) and running("sleep", seconds) == []

    assert eventually(reaped), [
        Path(f"/proc/{p}/cmdline").read_bytes()[:60] for p in with_marker(mark)
    ]


def test_output_is_bounded(ws: Path) -> None:
    done = run(ws, py("print('x' * 1_000_000)"))
    assert done.returncode == 0
    assert "characters left out" in done.stdout and len(done.stdout) < 210_000


def test_no_cgroup_is_left_behind(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if pids.cgroup_parent() is None:
        pytest.skip("no pids cgroup here")
    made: list[Path] = []  # this command's own: other tests' commands make theirs meanwhile
    real = pids.PidsCgroup.make.__func__  # type: ignore[attr-defined]

    def make(cls: type[pids.PidsCgroup], parent: Path, limit: int) -> pids.PidsCgroup | None:
        group = real(cls, parent, limit)
        if group is not None:
            made.append(group.path)
        return group

    monkeypatch.setattr(pids.PidsCgroup, "make", classmethod(make))
    run(ws, ["true"])
    assert made, "the command ran in a pids cgroup of its own"
    assert [p for p in made if p.exists()] == []


def test_a_read_only_tools_commands_see_the_workspace_read_only(ws: Path) -> None:
    (ws / "test_calc.py").write_text("original")
    code = "open('test_calc.py', 'w').write('cheated')"
    done = run_command(py(code), policy=POLICY, workspace=str(ws), cwd=str(ws), writable=False)
    assert done.returncode == 1 and "Read-only file system" in done.stderr
    assert (ws / "test_calc.py").read_text() == "original"


def test_a_host_with_no_pids_cgroup_is_said_once_in_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pids, "_probe_parent", lambda: None)
    pids.cgroup_parent.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=pids.__name__):
            assert pids.cgroup_parent() is None and pids.cgroup_parent() is None
    finally:
        pids.cgroup_parent.cache_clear()
    [warning] = [r for r in caplog.records if r.name == pids.__name__]
    assert "no pids cgroup can be made here" in warning.getMessage()

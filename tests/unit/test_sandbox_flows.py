"""The sandbox's two flows read off their command lines (a root worker's and
another user's), the seccomp filter run through a small BPF interpreter for
every architecture it is written for, the settings that choose the sandbox
uid, the workspace walk, and what a sandbox failure tells the operator."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
from pathlib import Path

import pytest

from agentledger.services.adapters.tools import handover, sandbox, sandbox_files, seccomp
from agentledger.services.adapters.tools.lifeline import MARK, Fds, command_line
from agentledger.services.adapters.tools.sandbox import (
    Limits,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_flags,
    limit_flags,
    policy_for,
)
from agentledger.services.adapters.tools.sandbox_failures import (
    MASKED_PROC,
    NO_USERNS,
    ROOT_SETPRIV,
    explain,
)
from agentledger.services.errors import ConfigError
from agentledger.services.settings import from_env


def flags(*, root: bool, workspace: str = "/work/ws/r-1") -> list[str]:
    return bwrap_flags(
        workspace=workspace, cwd=workspace, network=False, limits=Limits(tmp_mb=32),
        info_fd=11, root=root, masked=(f"{workspace}/redis.sock",), seccomp_fd=12,
    )  # fmt: skip


def pairs(line: list[str], option: str) -> list[str]:
    return [line[i + 1] for i, x in enumerate(line) if x == option]


def test_a_root_worker_runs_bwrap_privileged_keeping_only_what_setpriv_needs() -> None:
    line = flags(root=True)
    assert (
        "--unshare-user" not in line and "--disable-userns" not in line
    )  # its root would be the host's
    assert pairs(line, "--cap-drop") == ["ALL"]
    assert pairs(line, "--cap-add") == ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]
    assert {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent"} <= set(line)
    assert pairs(line, "--seccomp") == ["12"]
    assert pairs(line, "--chdir") == ["/"]  # the command enters its 0700 folder itself


def test_a_worker_that_is_not_root_keeps_its_own_user_namespace_and_nothing_else() -> None:
    line = flags(root=False)
    assert {"--unshare-user", "--disable-userns"} <= set(line)
    assert pairs(line, "--cap-drop") == ["ALL"] and pairs(line, "--cap-add") == []
    assert pairs(line, "--chdir") == ["/work/ws/r-1"]


@pytest.mark.parametrize("root", [True, False])
def test_proc_sys_and_its_neighbours_are_bound_read_only_after_the_fresh_proc(root: bool) -> None:
    line = flags(root=root)
    proc = line.index("--proc")
    for name in ("sys", "sysrq-trigger", "irq", "bus"):
        at = line.index(f"/proc/{name}")
        assert line[at - 1] == "--ro-bind-try" and at > proc
    for name in sandbox._present(sandbox.PROC_MASKED):
        at = line.index(f"/proc/{name}") - 1
        assert line[at] in (sandbox.private_file("empty"), sandbox.private_file("empty-dir"))


@pytest.mark.parametrize("root", [True, False])
def test_dev_shm_and_tmp_are_sized_dev_and_the_root_read_only(root: bool) -> None:
    line = flags(root=root)
    size = str(32 * 1024 * 1024)
    for target in ("/tmp", "/dev/shm"):
        at = [i for i, x in enumerate(line) if x == "--tmpfs" and line[i + 1] == target][0]
        assert line[at - 4 : at] == ["--perms", "1777", "--size", size]
    assert line.index("/dev/shm") > line.index("--dev")
    assert pairs(line, "--remount-ro") == ["/dev", "/"]


def test_the_way_to_each_bind_is_made_passable_and_special_files_are_covered() -> None:
    line = flags(root=True)
    dirs = pairs(line, "--dir")
    assert {"/work", "/work/ws", "/etc", "/etc/ssl"} <= set(dirs)
    for d in dirs:
        assert line[line.index(d) - 3 : line.index(d) - 1] == ["--perms", "0755"]
    assert line.index("/work/ws") < line.index("--bind")  # made before bwrap would make it 0700
    cover = line.index("/work/ws/r-1/redis.sock")
    assert line[cover - 2 : cover] == ["--ro-bind", sandbox.private_file("empty")]
    assert "/etc/ssl/private" not in line and "/etc/ssl" not in pairs(line, "--ro-bind-try")


def test_a_venv_under_tmp_is_bound_after_the_sandboxs_own_tmp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox, "python_paths", lambda: ("/tmp/clone/venv", "/opt/py"))
    line = flags(root=True)
    tmpfs = line.index("/tmp", line.index("--tmpfs"))
    assert line.index("/tmp/clone/venv") > tmpfs  # else the sandbox's /tmp would hide it
    assert "/tmp/clone" in pairs(line, "--dir")


def test_a_root_workers_command_runs_under_setpriv_as_the_sandbox_uid() -> None:
    policy = SandboxPolicy(uid=4242, gid=4343)
    line = command_line(
        ["python", "-V"], policy=policy, workspace="/w", cwd="/w", network=False, writable=True,
        fds=Fds(10, 11, 12, 13, -1), cgroup_procs=None, root=True,
    )  # fmt: skip
    at = line.index(sandbox.setpriv())
    assert line[at : at + 13] == [
        sandbox.setpriv(), "--reuid", "4242", "--regid", "4343", "--clear-groups",
        "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs", "--", "/bin/sh",
    ]  # fmt: skip
    assert line[-4:] == [MARK, "/w", "python", "-V"]
    assert not any(x.startswith("--nproc") for x in line)  # one uid for every sandbox
    plain = command_line(
        ["true"], policy=policy, workspace="/w", cwd="/w", network=False, writable=True,
        fds=Fds(10, 11, 12, 13, -1), cgroup_procs=None, root=False,
    )  # fmt: skip
    assert "--reuid" not in plain and "--nproc=64" in plain


def test_limit_flags_count_processes_by_uid_only_for_a_worker_that_is_not_root() -> None:
    assert "--nproc=64" in limit_flags(Limits()) and not any(
        f.startswith("--nproc") for f in limit_flags(Limits(), root=True)
    )


# --- the seccomp filter, run -----------------------------------------------------

EPERM, ENOSYS = 0x50001, 0x50026


def decide(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """Run a classic BPF seccomp program on one `struct seccomp_data`."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == seccomp.LD_ABS_W:
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.RET_K:
            return k
        else:
            taken = {
                seccomp.JEQ_K: acc == k,
                seccomp.JGE_K: acc >= k,
                seccomp.JSET_K: acc & k != 0,
            }[op]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_new_user_namespaces_and_keyrings_in_every_table(machine: str) -> None:
    program = seccomp.program(machine)
    for t in seccomp.TABLES[machine]:
        for nr in (t.unshare, t.clone):
            assert decide(program, t.audit_arch, nr, seccomp.CLONE_NEWUSER | 0x11) == EPERM
            assert (
                decide(program, t.audit_arch, nr, 0x20000 | 17) == seccomp.ALLOW
            )  # a mount ns, a fork
        assert decide(program, t.audit_arch, t.clone3) == ENOSYS
        assert all(decide(program, t.audit_arch, nr) == EPERM for nr in t.keys)
        assert (
            decide(program, t.audit_arch, 0) == seccomp.ALLOW
            and decide(program, t.audit_arch, 59) == seccomp.ALLOW
        )
    assert (
        decide(program, 0x40000028 if machine == "x86_64" else 0xC000003E, 0)
        == seccomp.KILL_PROCESS
    )


def test_x32_calls_are_refused_and_an_unknown_machine_has_no_filter() -> None:
    program = seccomp.program("x86_64")
    assert decide(program, seccomp.X86_64.audit_arch, seccomp.X32_BIT | 272) == EPERM
    with pytest.raises(seccomp.Unsupported):
        seccomp.program("riscv64")


# --- settings ---------------------------------------------------------------------


def test_the_sandbox_uid_gid_sizes_and_scan_bound_are_settings() -> None:
    settings = from_env({
        "AGENTLEDGER_SANDBOX_UID": "1234", "AGENTLEDGER_SANDBOX_GID": "1235",
        "AGENTLEDGER_SANDBOX_TMP_MB": "64", "AGENTLEDGER_SANDBOX_SCAN_MAX": "10",
    })  # fmt: skip
    policy = policy_for(settings)
    assert (policy.uid, policy.gid, policy.limits.tmp_mb, policy.scan_max) == (1234, 1235, 64, 10)
    assert (from_env({}).sandbox_uid, from_env({}).sandbox_gid) == (65534, 65534)


@pytest.mark.parametrize(
    ("var", "value"),
    [("AGENTLEDGER_SANDBOX_UID", "0"), ("AGENTLEDGER_SANDBOX_GID", "0"),
     ("AGENTLEDGER_SANDBOX_UID", "-5"), ("AGENTLEDGER_SANDBOX_TMP_MB", "0"),
     ("AGENTLEDGER_SANDBOX_SCAN_MAX", "x")],
)  # fmt: skip
def test_a_root_sandbox_uid_or_a_bad_size_is_refused_naming_the_variable(
    var: str, value: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({var: value})
    assert caught.value.name == var


# --- the workspace walk --------------------------------------------------------------


def test_the_walk_finds_special_files_never_follows_links_and_is_bounded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    os.mkfifo(ws / "sub" / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ws / "app.sock"))
    (tmp_path / "outside").mkdir()
    os.mkfifo(tmp_path / "outside" / "not-mine")
    os.symlink(tmp_path / "outside", ws / "link")
    try:
        walked = handover.prepare(str(ws), owner=None, limit=100)
    finally:
        server.close()
    assert sorted(walked.special) == [str(ws / "app.sock"), str(ws / "sub" / "fifo")]
    assert (walked.entries, walked.handed) == (5, 0)
    with pytest.raises(SandboxUnavailable, match="more than 3 entries"):
        handover.prepare(str(ws), owner=None, limit=3)


# --- what a failure says ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("stderr", "root", "hint"),
    [
        ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", False, MASKED_PROC),
        ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow", False, NO_USERNS),
        ("bwrap: setting up uid map: Permission denied", False, NO_USERNS),
        ("setpriv: setresuid failed: Invalid argument", True, ROOT_SETPRIV),
    ],
)  # fmt: skip
def test_a_sandbox_failure_names_what_to_change(stderr: str, root: bool, hint: str) -> None:
    what, said = explain(f"noise\n{stderr}\n", root=root)
    assert said == hint and stderr[:60] in what
    assert "AGENTLEDGER_SANDBOX=off" in said


def test_the_workers_private_files_are_made_again_when_a_tmp_cleaner_removed_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a /tmp of its own: the uid's shared folder is in use by the suite's other processes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sandbox_files, "_folder", [])
    first = sandbox.private_file("seccomp.bpf")
    folder = os.path.dirname(first)
    assert folder.startswith(str(tmp_path))
    assert os.stat(folder).st_uid == os.geteuid() and not os.stat(folder).st_mode & 0o022
    shutil.rmtree(folder)
    again = sandbox.private_file("seccomp.bpf")
    assert Path(again).read_bytes() == seccomp.program()
    assert Path(sandbox.private_file("empty")).read_bytes() == b""
    assert os.listdir(sandbox.private_file("empty-dir")) == []

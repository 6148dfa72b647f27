"""What a sandboxed command is allowed, read off its command line; the settings
that choose it; and a command that refuses to run when bwrap is missing."""

from __future__ import annotations

import os
import sys

import pytest

from agentledger.events.tool_step import Succeeded
from agentledger.services.adapters.tools import sandbox
from agentledger.services.adapters.tools.context import ToolContext, ToolFailure
from agentledger.services.adapters.tools.registry import REGISTRY, tool
from agentledger.services.adapters.tools.runner import run_tool
from agentledger.services.adapters.tools.sandbox import (
    Limits,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_flags,
    environment,
    limit_flags,
    policy_for,
    python_paths,
)
from agentledger.services.errors import ConfigError
from agentledger.services.settings import Settings, from_env, sandbox_environ


def flags(
    *, network: bool = False, workspace: str | None = "/work/ws", root: bool = False
) -> list[str]:
    return bwrap_flags(
        workspace=workspace, cwd="/work/ws", network=network, limits=Limits(), info_fd=9,
        root=root, block_fd=7 if network else None,
    )  # fmt: skip


def pairs(line: list[str], option: str) -> list[str]:
    return [line[i + 1] for i, x in enumerate(line) if x == option]


def test_every_namespace_is_new_and_every_capability_dropped() -> None:
    line = flags()
    for option in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--disable-userns",
    ):
        assert option in line
    assert pairs(line, "--cap-drop") == ["ALL"]
    assert "--die-with-parent" in line and "--new-session" in line


def test_a_network_tools_commands_get_a_network_namespace_of_their_own() -> None:
    """Never the host's: a user-mode stack is attached while the sandbox waits on
    its block fd, and its resolver is that stack's (usernet.py)."""
    line = flags(network=True)
    assert "--unshare-net" in line and pairs(line, "--block-fd") == ["7"]
    assert line[line.index("/etc/resolv.conf") - 1] == sandbox.private_file("resolv.conf")
    assert open(sandbox.private_file("resolv.conf")).read() == "nameserver 10.0.2.3\n"
    assert "/etc/resolv.conf" not in flags()


def test_only_the_workspace_is_writable_and_not_for_a_read_only_tool() -> None:
    line = flags()
    assert pairs(line, "--bind") == ["/work/ws"]
    read_only = bwrap_flags(
        workspace="/work/ws",
        cwd="/work/ws",
        network=False,
        limits=Limits(),
        info_fd=9,
        writable=False,
    )
    assert pairs(read_only, "--bind") == [] and "/work/ws" in pairs(read_only, "--ro-bind")
    assert pairs(line, "--remount-ro") == ["/dev", "/"]  # bwrap's own tmpfs, unsized
    assert pairs(flags(workspace=None), "--bind") == []
    assert pairs(line, "--chdir") == ["/work/ws"]


def test_the_system_and_the_python_prefix_are_read_only_and_the_home_is_not_there() -> None:
    line = flags()
    read_only = pairs(line, "--ro-bind") + pairs(line, "--ro-bind-try")
    assert "/usr" in read_only
    assert os.path.realpath(sys.base_prefix) in read_only or sys.base_prefix.startswith("/usr")
    home = os.path.expanduser("~")
    for path in read_only:
        inside_home = path == home or path.startswith(home.rstrip("/") + "/")
        assert not inside_home or path in python_paths(), path
    assert not any(p.startswith("/etc/shadow") for p in read_only)
    assert "/" not in read_only  # never the whole root: other workspaces stay unseen


def test_tmp_is_private_and_size_capped() -> None:
    line = flags()
    i = line.index("--tmpfs")
    assert line[i + 1] == "/tmp" and line[i - 2 : i] == ["--size", str(256 * 1024 * 1024)]


def test_limits_become_prlimit_options() -> None:
    assert limit_flags(Limits(cpu_s=5, memory_mb=100, file_mb=1, processes=7, open_files=64)) == [
        "--cpu=5:6",
        f"--as={100 * 1024 * 1024}",
        f"--fsize={1024 * 1024}",
        "--nofile=64",
        "--nproc=7",
        "--core=0",
    ]


def test_a_command_gets_a_minimal_environment_the_operators_pass_through_and_its_own() -> None:
    policy = SandboxPolicy(env=(("PYTEST_ADDOPTS", "-x"),))
    env = environment(policy, {"MY_FLAG": "1"})
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "PYTEST_ADDOPTS", "MY_FLAG"}
    assert env["PATH"].split(":")[0] == os.path.dirname(sys.executable)


def test_settings_choose_the_policy_and_the_values_passed_through() -> None:
    env = {
        "AGENTLEDGER_SANDBOX": "off",
        "AGENTLEDGER_SANDBOX_PROCESSES": "9",
        "AGENTLEDGER_SANDBOX_ENV": "A_VAR, UNSET_VAR",
        "A_VAR": "a",
    }
    settings = from_env(env)
    assert (settings.sandbox, settings.sandbox_processes) == ("off", 9)
    assert sandbox_environ(settings, env) == {"A_VAR": "a"}
    assert policy_for(Settings()).enabled is True
    assert policy_for(Settings(sandbox="off", sandbox_cpu_s=3)).limits.cpu_s == 3


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("AGENTLEDGER_SANDBOX", "maybe"),
        ("AGENTLEDGER_SANDBOX_PROCESSES", "0"),
        ("AGENTLEDGER_SANDBOX_CPU_S", "x"),
    ],
)
def test_a_bad_sandbox_setting_is_refused_naming_it(var: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({var: value})
    assert var in str(caught.value)


def test_without_bwrap_a_command_refuses_to_run_and_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    sandbox.tools.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    try:
        with pytest.raises(SandboxUnavailable):
            sandbox.tools()
        ctx = ToolContext("r", "c", str(tmp_path), "p", "t")
        with pytest.raises(ToolFailure) as caught:
            ctx.run(["true"])
        assert caught.value.code == "internal"
        assert "apt-get install -y bubblewrap" in caught.value.message
        assert "AGENTLEDGER_SANDBOX=off" in caught.value.message
        off = ToolContext("r", "c", str(tmp_path), "p", "t", sandbox=SandboxPolicy(enabled=False))
        assert off.run(["true"]).returncode == 0  # the operator opted out: it runs, unconfined
    finally:
        sandbox.tools.cache_clear()


def test_a_command_runs_only_in_a_folder_of_the_workspace(tmp_path: object) -> None:
    ctx = ToolContext("r", "c", str(tmp_path), "p", "t", sandbox=SandboxPolicy(enabled=False))
    with pytest.raises(ToolFailure) as caught:
        ctx.run(["true"], cwd="..")
    assert caught.value.code == "permission_denied"
    with pytest.raises(TypeError):
        ctx.run("rm -rf /")  # type: ignore[arg-type]


@tool(read_only=True, name="declares_read_only_sandbox_test")
def _reads(ctx: ToolContext) -> dict:
    """Says what its commands would get."""
    return {"read_only": ctx.read_only, "network": ctx.network}


@tool(network=True, name="declares_network_sandbox_test")
def _fetches(ctx: ToolContext) -> dict:
    """Says what its commands would get."""
    return {"read_only": ctx.read_only, "network": ctx.network}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("declares_read_only_sandbox_test", {"read_only": True, "network": False}),
        ("declares_network_sandbox_test", {"read_only": False, "network": True}),
    ],
)
def test_what_a_tool_declares_is_what_its_commands_get(name: str, expected: dict) -> None:
    registered = next(t for t in REGISTRY.of_module(__name__) if t.spec.name == name)
    assert registered is not None
    outcome = run_tool(registered, {}, ToolContext("r", "c", None, "p", "t"), timeout_s=5)
    assert isinstance(outcome, Succeeded) and outcome.output == expected

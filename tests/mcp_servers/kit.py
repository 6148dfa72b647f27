"""What the MCP tests share: servers files for the SDK server written in the
tests (`ledger_server.py`, stdio or streamable HTTP on loopback) and for the npm
reference servers, installed once with npm into a cache folder
(`AGENTLEDGER_TEST_NPM_CACHE`, default `~/.cache/agentledger-tests/mcp-npm`);
the npm tests are skipped, saying why, where npm is absent."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
LEDGER = HERE / "ledger_server.py"
NPM_PACKAGES = (
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-everything",
)
NPM_CACHE = Path(
    os.environ.get("AGENTLEDGER_TEST_NPM_CACHE", Path.home() / ".cache/agentledger-tests/mcp-npm")
)


def ledger_stdio(**tools: Any) -> dict[str, Any]:
    return {
        "command": [sys.executable, str(LEDGER), "stdio", "{workspace}"],
        "read_only_paths": [str(HERE)],
        "tools": tools or LEDGER_POLICY,
    }


LEDGER_POLICY: dict[str, Any] = {
    "get_order": {"read_only": True, "reads": ["order:{order_id}"], "scope": "orders:read"},
    "place_order": {
        "writes": ["order:{order_id}"], "scope": "orders:write",
        "lookup": {"tool": "order_done", "args": {"op_key": "{op_key}"}},
    },
    "slow": {"writes": ["order:{order_id}"], "timeout_s": 60},
    "crash": {"writes": ["order:{order_id}"]},
    "order_done": {"read_only": True},
    "fail": {"read_only": True},
    "freeze": {"read_only": True},
    "wipe": {"read_only": True},
    "grow": {"writes": ["ledger:tools"]},
    "shaped": {"read_only": True},
    "steps": {"read_only": True},
    "ask_model": {"read_only": True},
}  # fmt: skip


def npm_modules() -> Path:
    """The node_modules folder with the reference servers, installed on first need."""
    modules = NPM_CACHE / "node_modules"
    if all((modules / p / "package.json").exists() for p in NPM_PACKAGES):
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the MCP reference servers cannot be installed")
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NPM_CACHE), *NPM_PACKAGES],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"npm could not install the MCP reference servers: {done.stderr[-500:]}")
    return modules


def npm_server(package: str, *args: str) -> dict[str, Any]:
    modules = npm_modules()
    entry = modules / "@modelcontextprotocol" / package / "dist" / "index.js"
    return {"command": ["node", str(entry), *args], "read_only_paths": [str(modules)]}


FS_POLICY: dict[str, Any] = {
    "read_text_file": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "read_file": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "read_multiple_files": {"read_only": True, "reads": ["file:{paths}"], "scope": "fs:read"},
    "list_directory": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "directory_tree": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "search_files": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "get_file_info": {"read_only": True, "reads": ["file:{path}"], "scope": "fs:read"},
    "write_file": {"writes": ["file:{path}"], "scope": "fs:write", "approval": "never"},
    "edit_file": {"writes": ["file:{path}"], "scope": "fs:write", "approval": "never"},
    "create_directory": {"writes": ["file:{path}"], "scope": "fs:write"},
    "move_file": {"writes": ["file:{source}", "file:{destination}"], "scope": "fs:write", "approval": "never"},
}  # fmt: skip


def fs_server() -> dict[str, Any]:
    return {**npm_server("server-filesystem", "{workspace}"), "tools": FS_POLICY}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpLedger:
    """The ledger server over streamable HTTP on loopback, in a folder of its own."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, str(LEDGER), "http", str(folder), str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("the HTTP ledger server exited") from None
                time.sleep(0.05)
        raise RuntimeError("the HTTP ledger server did not listen within 60s")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pids_serving(folder: Path, marker: str = "ledger_server.py") -> list[int]:
    """The host pids of server processes whose command line names `folder`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            any(marker.encode() in a for a in argv)
            and str(folder).encode() in argv
            and b"bwrap" not in argv[0]
        ):
            found.append(int(entry.name))
    return found


def wait_for(predicate: Any, timeout_s: float = 60.0, what: str = "it") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {timeout_s:g}s")

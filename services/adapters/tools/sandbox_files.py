"""Files of this worker's own that sandboxes see read-only: an empty file and an
empty folder (what covers Docker's masked /proc paths and a workspace's special
files), the resolv.conf of the user-mode network, and the seccomp filter
(`seccomp.py`). Written once per process, all at once, into a private folder of
its own (made again should a /tmp cleaner remove it from a long-lived worker),
removed when the process exits."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

from services.adapters.tools import seccomp

EMPTY_DIR = "empty-dir"
_lock = threading.Lock()
_folder: list[str] = []


def _contents() -> dict[str, bytes]:
    return {
        "empty": b"",
        "resolv.conf": b"nameserver 10.0.2.3\n",  # the user-mode network's DNS (slirp4netns)
        "seccomp.bpf": seccomp.program(),
    }


def private_file(name: str) -> str:
    """The path of one of them: `empty`, `empty-dir`, `resolv.conf`, `seccomp.bpf`."""
    if name != EMPTY_DIR and name not in _contents():
        raise KeyError(name)
    return os.path.join(_private_dir(), name)


def _private_dir() -> str:
    with _lock:
        if _folder and os.path.isdir(_folder[0]):
            return _folder[0]
        folder = tempfile.mkdtemp(prefix="agentledger-sandbox-")
        atexit.register(shutil.rmtree, folder, True)
        os.mkdir(os.path.join(folder, EMPTY_DIR), 0o555)
        for name, content in _contents().items():
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, 0o444)
        _folder[:] = [folder]
        return folder

"""Files of this worker's own that sandboxes see read-only: an empty file and an
empty folder (what covers Docker's masked /proc paths and a workspace's special
files), the resolv.conf of the user-mode network, and the seccomp filter
(`seccomp.py`). Their content never changes, so every process of a uid shares
one folder, `<tmp>/agentledger-sandbox-<uid>` (used only when it is a real folder
of that uid that nobody else may write; else a folder of the process's own);
a file is written under another name and renamed into place, so a sandbox never
reads one half-written. Made again should a /tmp cleaner remove it."""

from __future__ import annotations

import os
import stat
import tempfile
import threading

from agentledger.services.adapters.tools import seccomp

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
        if _folder and os.path.isdir(os.path.join(_folder[0], EMPTY_DIR)):
            return _folder[0]
        folder = _shared() or tempfile.mkdtemp(prefix="agentledger-sandbox-")
        _fill(folder)
        _folder[:] = [folder]
        return folder


def _shared() -> str | None:
    """The uid's shared folder, made if missing; None if it is not safely ours."""
    folder = os.path.join(tempfile.gettempdir(), f"agentledger-sandbox-{os.geteuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = os.lstat(folder)
    ours = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
    return folder if ours else None


def _fill(folder: str) -> None:
    empty_dir = os.path.join(folder, EMPTY_DIR)
    if not os.path.isdir(empty_dir):
        os.mkdir(empty_dir, 0o555)
    for name, content in _contents().items():
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                if f.read() == content:
                    continue
        except OSError:
            pass
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}"
        with open(temporary, "wb") as f:
            f.write(content)
        os.chmod(temporary, 0o444)
        os.replace(temporary, path)

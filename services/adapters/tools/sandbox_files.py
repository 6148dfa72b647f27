"""Files of this worker's own that sandboxes see read-only: an empty file and an
empty folder (what covers Docker's masked /proc paths and a workspace's special
files), the resolv.conf of the user-mode network, and the seccomp filter
(`seccomp.py`). Written once per process into a private folder of its own,
removed when it exits."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

from services.adapters.tools import seccomp

PRIVATE_FILES = {
    "empty": b"",
    "resolv.conf": b"nameserver 10.0.2.3\n",  # the user-mode network's DNS (slirp4netns)
    "seccomp.bpf": None,  # written when first asked for
}


@functools.cache
def _private_dir() -> str:
    folder = tempfile.mkdtemp(prefix="agentledger-sandbox-")
    atexit.register(shutil.rmtree, folder, True)
    os.mkdir(os.path.join(folder, "empty-dir"), 0o555)
    return folder


@functools.cache
def private_file(name: str) -> str:
    """A file of this worker's own, bound read-only into sandboxes: an empty file
    and folder (masks), the resolv.conf of the user-mode network, the seccomp filter."""
    path = os.path.join(_private_dir(), name)
    if name == "empty-dir":
        return path
    content = PRIVATE_FILES[name]
    with open(path, "wb") as f:
        f.write(seccomp.program() if content is None else content)
    os.chmod(path, 0o444)
    return path

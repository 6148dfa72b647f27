"""A workspace made ready for a sandboxed command, in one bounded walk that
never follows a link.

- **Handed to the sandbox uid** (a root worker's commands run as
  `AGENTLEDGER_SANDBOX_UID`/`_GID`, not as root): every entry that uid does not
  own is chowned to it, so the command can read and write its workspace. The
  walk holds each folder open (`os.fwalk`) and changes names relative to it
  without following links, so a link or a swapped folder can never redirect a
  chown outside the workspace; a file with other hard links is left as it is (its
  other names may be outside). The worker itself (root) reads and writes the
  workspace as before.
- **Its special files found** — sockets, FIFOs, block and character devices —
  so that the sandbox covers each with an empty file: a workspace bound in place
  never gives a command a way to a host service's socket or a device.

At most `limit` entries are looked at; a bigger workspace is refused, naming
the setting. The walk costs about a stat per entry (and a chown for each entry
handed over, once)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from agentledger.services.adapters.tools.sandbox import SandboxUnavailable

MAX_SPECIAL = 256  # covered one bind each; more is refused


@dataclass(frozen=True)
class Walked:
    entries: int  # looked at, the workspace folder included
    handed: int  # chowned to the sandbox uid
    special: tuple[str, ...]  # sockets, FIFOs, devices: absolute paths


def prepare(root: str, *, owner: tuple[int, int] | None, limit: int) -> Walked:
    """Walk the workspace `root`: chown what `owner` (uid, gid) does not own yet
    (None: nothing is chowned) and list its special files. SandboxUnavailable
    when it has more than `limit` entries or more than MAX_SPECIAL special files."""
    entries, handed = 1, 0  # the workspace folder; each entry below is counted in its folder
    special: list[str] = []
    for folder, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        if owner is not None:
            handed += _hand_over(dir_fd, None, owner)
        for name in [*dirs, *files]:
            entries += 1
            if entries > limit:
                raise SandboxUnavailable(
                    f"the workspace {root!r} has more than {limit} entries",
                    "raise AGENTLEDGER_SANDBOX_SCAN_MAX, or make the workspace smaller",
                )
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone meanwhile
            if stat.S_ISDIR(st.st_mode):
                continue  # chowned through its own fd when the walk enters it
            if _is_special(st.st_mode):
                special.append(os.path.join(folder, name))
            elif owner is not None and not (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
                handed += _hand_over(dir_fd, name, owner, st)
    if len(special) > MAX_SPECIAL:
        raise SandboxUnavailable(
            f"the workspace {root!r} has {len(special)} sockets, FIFOs or devices "
            f"(more than {MAX_SPECIAL}), {special[0]!r} the first",
            "remove them from the workspace",
        )
    return Walked(entries, handed, tuple(special))


def _hand_over(
    dir_fd: int, name: str | None, owner: tuple[int, int], st: os.stat_result | None = None
) -> int:
    """chown one entry (the folder `dir_fd` itself when `name` is None); 1 if it changed."""
    uid, gid = owner
    if st is None:
        st = os.fstat(dir_fd)
    if (st.st_uid, st.st_gid) == (uid, gid):
        return 0
    try:
        if name is None:
            os.fchown(dir_fd, uid, gid)
        else:
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    except OSError as exc:  # a uid this host (or user namespace) has no room for, a read-only mount
        raise SandboxUnavailable(
            f"the workspace could not be handed to uid {uid}/gid {gid}: {exc}",
            "set AGENTLEDGER_SANDBOX_UID/_GID to ids that exist here, or make the workspace writable",
        ) from None
    return 1


def _is_special(mode: int) -> bool:
    return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)

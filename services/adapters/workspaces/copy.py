"""The copy a run works in: `<state folder>/workspaces/<run id>`, made by the
intake from a workspace the rule allowed.

The source is opened from `/` one component at a time without following
links, and walked through folder descriptors, so a link swapped in while it is
copied is never followed out of it. Links are copied as links; sockets, devices
and FIFOs are left out (and counted); regular files keep their permission bits
(never set-uid) and times. The copy stops, and is refused with its numbers,
beyond the operator's maximum of bytes or of entries (files, links, folders).

It is made in a folder of its own and renamed into place whole, so a copy at
`<run id>` is always complete. Made again for the same run (a request the
intake is given twice), the one already there is kept: a run may have changed
it. A note beside the copies says whose it is: another request naming the same
run id never gets it."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

CHUNK = 1 << 20
MAX_DEPTH = 128
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
META = ".meta"  # beside the copies: copies under way, and whose each copy is


class CopyRefused(Exception):
    """The workspace cannot be copied; `reason` says why, with the numbers."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Copied:
    path: str
    made: bool  # False: the run's copy was there already (and is kept)
    entries: int = 0
    bytes: int = 0
    skipped: int = 0  # sockets, devices, FIFOs left out


@dataclass
class _Budget:
    max_bytes: int
    max_entries: int
    copied: Copied = field(default_factory=lambda: Copied("", True))

    def entry(self) -> None:
        self.copied.entries += 1
        self.room_for(0)

    def room_for(self, more: int) -> None:
        """Refuse when `more` entries on top of those copied would be too many."""
        if self.copied.entries + more > self.max_entries:
            raise CopyRefused(
                f"has more than {self.max_entries:,} files and folders "
                "(AGENTLEDGER_WORKSPACE_MAX_FILES)"
            )

    def add_bytes(self, n: int) -> None:
        self.copied.bytes += n
        if self.copied.bytes > self.max_bytes:
            raise CopyRefused(
                f"holds more than {self.max_bytes:,} bytes (AGENTLEDGER_WORKSPACE_MAX_BYTES; "
                f"{self.copied.entries:,} files and folders copied by then)"
            )


def copy_for_run(
    source: str, copies: str, run_id: str, *, owner: str, max_bytes: int, max_entries: int
) -> Copied:
    """The copy of `source` (a realpath) for run `run_id` under `copies`; `owner`
    names the request it is for (its publisher and source)."""
    target = os.path.join(copies, run_id)
    note = os.path.join(copies, META, "owners", run_id)
    kept = _kept(target, note, owner, run_id)
    if kept is not None:
        return kept
    partial = os.path.join(copies, META, "partial", f"{run_id}.{uuid.uuid4().hex[:12]}")
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    os.makedirs(os.path.dirname(note), exist_ok=True)
    os.mkdir(partial, 0o700)
    budget = _Budget(max_bytes, max_entries, Copied(target, True))
    try:
        with _opened_path(source) as src, _opened(partial) as dst:
            _copy_folder(src, dst, budget, depth=0, where="")
            _same_mode(src, dst)
        _write_note(note, owner)
        os.rename(partial, target)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and os.path.isdir(target):
            return _kept(target, note, owner, run_id) or Copied(target, False)  # made meanwhile
        raise CopyRefused(f"cannot be copied: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return budget.copied


def discard(copied: Copied, copies: str, run_id: str) -> None:
    """Remove a copy made for a run that was then not created."""
    if copied.made:
        shutil.rmtree(copied.path, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(copies, META, "owners", run_id))


def _kept(target: str, note: str, owner: str, run_id: str) -> Copied | None:
    """The copy already there for this run (None: there is none yet)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        raise CopyRefused(f"cannot be copied: the place of run {run_id!r}'s copy is taken")
    try:
        with open(note) as f:
            mine = f.read() == owner
    except FileNotFoundError:
        mine = False
    if not mine:
        raise CopyRefused(
            f"cannot be copied: run {run_id!r} has a workspace copy of another request already"
        )
    return Copied(target, False)


def _write_note(note: str, owner: str) -> None:
    tmp = f"{note}.{uuid.uuid4().hex[:8]}"
    with open(tmp, "w") as f:
        f.write(owner)
    os.replace(tmp, note)


def _copy_folder(src: int, dst: int, budget: _Budget, *, depth: int, where: str) -> None:
    if depth >= MAX_DEPTH:
        raise CopyRefused(f"is nested deeper than {MAX_DEPTH} folders (at {where!r})")
    names: list[str] = []
    with os.scandir(src) as entries:
        for e in entries:  # a folder of millions of names is refused before they are all held
            names.append(e.name)
            budget.room_for(len(names))
    names.sort()
    for name in names:
        rel = f"{where}/{name}" if where else name
        try:
            st = os.stat(name, dir_fd=src, follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone since it was listed
        if stat.S_ISLNK(st.st_mode):
            budget.entry()
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
        elif stat.S_ISDIR(st.st_mode):
            budget.entry()
            os.mkdir(name, 0o700, dir_fd=dst)
            with _opened(name, src, rel) as sub, _opened(name, dst, rel) as sub_dst:
                _copy_folder(sub, sub_dst, budget, depth=depth + 1, where=rel)
                _same_mode(sub, sub_dst)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(name, src, dst, budget, rel)
        else:
            budget.copied.skipped += 1  # a socket, device or FIFO: never in a workspace


def _copy_file(name: str, src: int, dst: int, budget: _Budget, rel: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src)
    except OSError as exc:
        raise CopyRefused(f"cannot be copied: {rel!r}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped for something else since it was listed
            budget.copied.skipped += 1
            return
        budget.entry()
        mode = stat.S_IMODE(st.st_mode) & 0o777
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst)
        try:
            while chunk := os.read(fd, CHUNK):
                budget.add_bytes(len(chunk))
                os.write(out, chunk)
            os.fchmod(out, mode)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _same_mode(src: int, dst: int) -> None:
    st = os.fstat(src)
    os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o777 | stat.S_IRWXU)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


@contextlib.contextmanager
def _opened(name: str, parent: int | None = None, rel: str = "") -> Iterator[int]:
    try:
        fd = os.open(name, FOLDER_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise CopyRefused(f"cannot be copied: {rel or name!r}: {exc.strerror}") from None
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _opened_path(path: str) -> Iterator[int]:
    """The folder `path`, opened from `/` without following a link on the way
    (it is a realpath: a link there now was swapped in since it was resolved)."""
    fd = os.open("/", FOLDER_FLAGS)
    try:
        for part in (p for p in path.split("/") if p):
            try:
                nxt = os.open(part, FOLDER_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise CopyRefused(f"cannot be copied: {exc.strerror} at {part!r}") from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)

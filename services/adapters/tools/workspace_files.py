"""File access for tools, strictly inside a run's workspace.

A path is relative, plain and printable: absolute paths, `..`, backslashes,
NUL and other control characters, invisible or bidirectional format characters
and text that Unicode normalisation (NFKC) would change (fullwidth slashes and
dots, ligatures, decomposed accents) are refused before the disk is touched.
It is then resolved with symlinks followed and must stay inside the workspace;
the file is opened from the workspace's own descriptor one component at a time
without following links, so a link swapped in after the check is refused too.
Only regular files with a single name are read or written (no FIFOs, devices
or hard links to elsewhere). Protected names are matched on every component,
case-insensitively. Writes are size-capped and atomic (a sibling temporary file
renamed over the target, never written through a link); appends are one write
to a file opened without following a link."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import posixpath
import stat
import unicodedata
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentledger.services.adapters.tools.context import ToolContext, ToolFailure

MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


@dataclass(frozen=True)
class Written:
    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Read:
    path: str
    text: str
    truncated: bool


def file_resource(path: str, workspace: str | None) -> str:
    """The lock-table name of a workspace file, the same on every host:
    `file:<workspace folder>/<path as normalised>` — the workspace by its folder's
    name (a run's own copy is named after the run), never a host's absolute path,
    so calls from two hosts on one shared workspace meet in the lock table. Two
    workspaces with the same folder name share names: they serialise, which
    costs time, never safety. A path that leaves the workspace (absolute, or
    climbing out with `..`) names nothing in it: ToolFailure, so a resource rule
    refuses the call before it runs, as WorkspaceFiles would when it ran."""
    folder = PurePosixPath(workspace).name if workspace else "."
    text = str(path)
    inside = posixpath.normpath(text) if text else "."
    if text.startswith(("/", "~")) or inside == ".." or inside.startswith("../"):
        raise ToolFailure(
            "permission_denied",
            f"path {ascii(text[:80])} leads outside the workspace: give it relative to the "
            "workspace, without climbing out with '..'",
        )
    return f"file:{folder}/{'' if inside == '.' else inside}"


def clean_relative(raw: str) -> PurePosixPath:
    """The path as a plain relative path, or ToolFailure saying what is wrong with it."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolFailure("invalid_arguments", "the path is empty")
    shown = ascii(raw[:80])
    if len(raw) > MAX_PATH_CHARS:
        raise ToolFailure("invalid_arguments", f"the path is {len(raw)} characters long")
    _check_characters(raw, shown)
    if raw.startswith("/") or raw.startswith("~"):
        raise ToolFailure(
            "permission_denied", f"path {shown} is absolute: give it relative to the workspace"
        )
    return PurePosixPath(*_names(raw, shown))


def _check_characters(raw: str, shown: str) -> None:
    """ToolFailure for a control or unassigned character, a form other than NFKC, a
    backslash or whitespace other than a space."""
    bad = next((c for c in raw if unicodedata.category(c) in REFUSED_CATEGORIES), None)
    if bad is not None:
        what = f"U+{ord(bad):04X} ({unicodedata.name(bad, 'control or unassigned')})"
        raise ToolFailure("invalid_arguments", f"path {shown} has the character {what}")
    if unicodedata.normalize("NFKC", raw) != raw:
        raise ToolFailure("invalid_arguments", f"path {shown} is not in plain (NFKC) form")
    if "\\" in raw or any(c.isspace() and c != " " for c in raw):
        raise ToolFailure("invalid_arguments", f"path {shown} has a backslash or odd whitespace")


def _names(raw: str, shown: str) -> list[str]:
    """The path's names ('.' and empty ones dropped); ToolFailure for '..', none at
    all, or a name too long or padded with spaces."""
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolFailure("permission_denied", f"path {shown} climbs out with '..'")
    if not parts:
        raise ToolFailure("invalid_arguments", f"path {shown} names the workspace itself")
    for part in parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES or part != part.strip():
            raise ToolFailure(
                "invalid_arguments", f"path {shown} has a name too long or padded with spaces"
            )
    return parts


class WorkspaceFiles:
    """Reads and writes files of one workspace for a tool.

    files = WorkspaceFiles.of(ctx, protected=("test_*.py",), max_write_bytes=256_000)
    files.write_text("calc.py", code)
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        protected: Sequence[str] = (),
        why_protected: str = "it is protected in this workspace",
        max_write_bytes: int = 1_000_000,
        max_read_bytes: int = 1_000_000,
    ):
        self.root = Path(root).resolve()
        self.protected = tuple(p.casefold() for p in protected)
        self.why_protected = why_protected
        self.max_write_bytes = max_write_bytes
        self.max_read_bytes = max_read_bytes

    @classmethod
    def of(cls, ctx: ToolContext, **options: object) -> WorkspaceFiles:
        if not ctx.workspace:
            raise ToolFailure("not_found", "this run has no workspace")
        return cls(ctx.workspace, **options)  # type: ignore[arg-type]

    def resolve(self, raw: str) -> PurePosixPath:
        """The workspace-relative path `raw` leads to, symlinks followed; refused
        when it leads outside."""
        rel = clean_relative(raw)
        try:
            target = (self.root / rel).resolve()
        except (OSError, RuntimeError):  # a symlink loop
            raise ToolFailure("permission_denied", f"path {ascii(raw[:80])} loops") from None
        if not target.is_relative_to(self.root) or target == self.root:
            raise ToolFailure(
                "permission_denied", f"path {ascii(raw[:80])} leads outside the workspace"
            )
        return PurePosixPath(target.relative_to(self.root).as_posix())

    def is_protected(self, rel: PurePosixPath) -> bool:
        return any(
            fnmatch.fnmatchcase(part.casefold(), pattern)
            for part in rel.parts
            for pattern in self.protected
        )

    def read_text(self, raw: str, *, errors: str = "strict") -> Read:
        """The file's text (at most max_read_bytes of it); text that is not UTF-8 is
        refused, or with `errors="replace"` read with U+FFFD in its place."""
        rel = self.resolve(raw)
        with self._open_dir(rel.parent, create=False) as parent:
            try:
                fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
            except FileNotFoundError:
                raise ToolFailure("not_found", f"no file {raw!r} in the workspace") from None
            except OSError as exc:
                raise ToolFailure(
                    "permission_denied", f"{raw!r} cannot be opened: {exc.strerror}"
                ) from None
            try:
                self._regular(os.fstat(fd), raw)
            except ToolFailure:
                os.close(fd)
                raise
            with os.fdopen(fd, "rb") as f:
                data = f.read(self.max_read_bytes + 1)
        try:
            text = data[: self.max_read_bytes].decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            if exc.start < self.max_read_bytes - 4:  # not just a character cut at the cap
                raise ToolFailure("invalid_arguments", f"{raw!r} is not UTF-8 text") from None
            text = data[: exc.start].decode("utf-8")
        return Read(rel.as_posix(), text, len(data) > self.max_read_bytes)

    def write_text(self, raw: str, content: str) -> Written:
        data = content.encode("utf-8", errors="strict")
        if len(data) > self.max_write_bytes:
            raise ToolFailure(
                "invalid_arguments",
                f"content is {len(data):,} bytes; at most {self.max_write_bytes:,} may be written at once",
            )
        rel = self.resolve(raw)
        if self.is_protected(clean_relative(raw)) or self.is_protected(rel):
            raise ToolFailure(
                "permission_denied", f"{raw!r} may not be written: {self.why_protected}"
            )
        with self._open_dir(rel.parent, create=True) as parent:
            mode = 0o644
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise ToolFailure("invalid_arguments", f"{raw!r} is a folder")
                self._regular(st, raw)
                mode = stat.S_IMODE(st.st_mode)
            tmp = f".write-{uuid.uuid4().hex[:12]}"
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=parent
            )
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.rename(tmp, rel.name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
        return Written(rel.as_posix(), len(data), hashlib.sha256(data).hexdigest())

    def append_text(self, raw: str, content: str) -> Written:
        """Append `content` to a file (made if missing) in one write, so lines that
        calls append at the same time stay whole. `Written` tells what was appended."""
        data = content.encode("utf-8", errors="strict")
        if len(data) > self.max_write_bytes:
            raise ToolFailure(
                "invalid_arguments",
                f"content is {len(data):,} bytes; at most {self.max_write_bytes:,} may be written at once",
            )
        rel = self.resolve(raw)
        if self.is_protected(clean_relative(raw)) or self.is_protected(rel):
            raise ToolFailure(
                "permission_denied", f"{raw!r} may not be written: {self.why_protected}"
            )
        with self._open_dir(rel.parent, create=True) as parent:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
            try:
                fd = os.open(rel.name, flags, 0o644, dir_fd=parent)
            except OSError as exc:
                raise ToolFailure(
                    "permission_denied", f"{raw!r} cannot be opened: {exc.strerror}"
                ) from None
            try:
                self._regular(os.fstat(fd), raw)
                os.write(fd, data)
            finally:
                os.close(fd)
        return Written(rel.as_posix(), len(data), hashlib.sha256(data).hexdigest())

    @staticmethod
    def _regular(st: os.stat_result, raw: str) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise ToolFailure("invalid_arguments", f"{raw!r} is a folder")
        if not stat.S_ISREG(st.st_mode):
            raise ToolFailure("permission_denied", f"{raw!r} is not a regular file")
        if st.st_nlink > 1:
            raise ToolFailure("permission_denied", f"{raw!r} has other names (hard links)")

    @contextlib.contextmanager
    def _open_dir(self, rel: PurePosixPath, *, create: bool) -> Iterator[int]:
        """A descriptor of the folder `rel`, opened from the root without following links."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        fd = os.open(self.root, flags)
        try:
            for part in rel.parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    raise ToolFailure(
                        "not_found", f"no folder {rel.as_posix()!r} in the workspace"
                    ) from None
                except OSError:
                    raise ToolFailure(
                        "permission_denied",
                        f"{rel.as_posix()!r} is not a plain folder of the workspace",
                    ) from None
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

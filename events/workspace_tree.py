"""A workspace as it was at one moment: a tree of its entries by relative path,
each a regular file's content hash and size, a symlink's target (never followed),
or an entry left out with the reason why (a file past the snapshot's cap, a FIFO or
device). The tree is content-addressed: its id is the hash of its canonical text,
so the same workspace gives the same id in any run. Also the difference of two
trees (what a write changed) and a unified diff of one file's two contents.

Pure: reading the disk and keeping blobs is the shell's
(`agentledger.services.adapters.snapshots`). Paths are `str` as `os.fsdecode`
gives them (odd bytes as surrogate escapes); the canonical text escapes them."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring_ascii as _quoted
from typing import Literal

Kind = Literal["file", "link", "skipped"]
ChangeKind = Literal["added", "removed", "modified"]
TREE_VERSION = 1
MAX_DIFF_LINES = 20_000  # a unified diff past this is cut, and says so
MAX_DIFF_BYTES = 2 << 20  # a file larger than this is described, not diffed


@dataclass(frozen=True)
class Entry:
    """One path of a tree: `digest` and `size` for a file, `target` for a link,
    `note` for an entry left out (and its `size` when known)."""

    kind: Kind
    digest: str | None = None
    size: int | None = None
    target: str | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in _fields(self).items() if v is not None}

    @cached_property
    def text(self) -> str:
        """Its canonical JSON text (kept: an unchanged file's entry is reused by the next
        snapshot, so a tree's text costs a join, not an encoding of every entry)."""
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))


def _fields(e: Entry) -> dict[str, object]:
    return {"kind": e.kind, "digest": e.digest, "size": e.size, "target": e.target, "note": e.note}


@dataclass(frozen=True, slots=True)
class Tree:
    """A workspace's entries by relative path (`/`-separated), and notes about the
    snapshot as a whole (a cap reached: some entries were left out)."""

    entries: Mapping[str, Entry]
    notes: tuple[str, ...] = ()
    _text: list[str] = field(default_factory=list, compare=False, repr=False)

    def canonical(self) -> str:
        """The tree as one canonical JSON text (sorted, ASCII: odd bytes escaped)."""
        if not self._text:  # what json.dumps(sort_keys=True, compact) gives, built faster
            es = self.entries
            body = ",".join(f"{_quoted(p)}:{es[p].text}" for p in sorted(es))
            notes = json.dumps(list(self.notes), separators=(",", ":"))
            self._text.append(f'{{"entries":{{{body}}},"notes":{notes},"v":{TREE_VERSION}}}')
        return self._text[0]

    @property
    def id(self) -> str:
        return "sha256:" + hashlib.sha256(self.canonical().encode("ascii")).hexdigest()


class TreeTextInvalid(ValueError):
    """A stored tree's text is not a tree (names what is wrong)."""


def tree_from_text(text: str) -> Tree:
    """The tree a canonical text describes; TreeTextInvalid for anything else."""
    try:
        body = json.loads(text)
        if body.get("v") != TREE_VERSION:
            raise TreeTextInvalid(f"tree version {body.get('v')!r} is not {TREE_VERSION}")
        entries = {str(p): _entry(e) for p, e in body["entries"].items()}
        return Tree(entries, tuple(str(n) for n in body.get("notes", ())))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, TreeTextInvalid):
            raise
        raise TreeTextInvalid(f"not a workspace tree: {e}") from None


def _entry(raw: dict[str, object]) -> Entry:
    kind = raw["kind"]
    if kind not in ("file", "link", "skipped"):
        raise TreeTextInvalid(f"entry kind {kind!r} is not file, link or skipped")
    size = raw.get("size")
    return Entry(
        kind=kind,
        digest=_opt_str(raw.get("digest")),
        size=int(size) if isinstance(size, int) else None,
        target=_opt_str(raw.get("target")),
        note=_opt_str(raw.get("note")),
    )


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


@dataclass(frozen=True, slots=True)
class Change:
    """One path a write changed: its entry before (None: added) and after (None: removed)."""

    path: str
    kind: ChangeKind
    before: Entry | None
    after: Entry | None


def changes(before: Tree, after: Tree) -> list[Change]:
    """The paths whose entry differs between two trees, in path order."""
    out: list[Change] = []
    for path in sorted(set(before.entries) | set(after.entries)):
        old, new = before.entries.get(path), after.entries.get(path)
        if old == new:
            continue
        kind: ChangeKind = "added" if old is None else "removed" if new is None else "modified"
        out.append(Change(path, kind, old, new))
    return out


def printable(path: str) -> str:
    """A path fit for a terminal: odd bytes and control characters escaped."""
    raw = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in raw)


def unified(change: Change, old: bytes | None, new: bytes | None) -> str:
    """The unified diff of one change, given the file contents before and after
    (None: not a file then, or not kept). Binary content and entries that are not
    files are described in one line instead."""
    name = printable(change.path)
    a = "/dev/null" if change.before is None else f"a/{name}"
    b = "/dev/null" if change.after is None else f"b/{name}"
    header = f"--- {a}\n+++ {b}\n"
    described = _described(change, old, new)
    if described is not None:
        return header + described + "\n"
    old_lines = (old or b"").decode("utf-8").splitlines(keepends=True)
    new_lines = (new or b"").decode("utf-8").splitlines(keepends=True)
    lines = list(difflib.unified_diff(old_lines, new_lines, a, b))[2:]
    cut = len(lines) > MAX_DIFF_LINES
    body = "".join(_ended(x) for x in lines[:MAX_DIFF_LINES])
    return header + body + (f"(diff cut at {MAX_DIFF_LINES} lines)\n" if cut else "")


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _described(change: Change, old: bytes | None, new: bytes | None) -> str | None:
    """One line for what a text diff cannot show; None when it can."""
    for side, entry, data in (("before", change.before, old), ("after", change.after, new)):
        if entry is None:
            continue
        if entry.kind == "link":
            return f"symlink {side}: -> {printable(entry.target or '')}"
        if entry.kind == "skipped":
            return f"not kept {side}: {entry.note}"
        if entry.size is not None and entry.size > MAX_DIFF_BYTES:
            return f"too large to diff ({entry.size} bytes {side})"
        if data is None:
            return f"content {side} is not in the blob store"
        if b"\0" in data or not _is_utf8(data):
            return "binary files differ"
    return None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def writes_files(read_only: bool, writes: tuple[str, ...]) -> bool:
    """A call the executor snapshots around: one that writes files (`file:` resources)."""
    return not read_only and any(w.startswith("file:") for w in writes)

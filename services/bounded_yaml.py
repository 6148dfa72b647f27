"""YAML a user hands us (run specs, the publishers file, the MCP servers file),
read within limits before anything is built from it: the file's size, how deep
it nests, and how large its aliases make it. YAML's aliases share one node, so
fourteen lines of them (the "billion laughs") stand for a billion values: every
walk over the document (the schema's validation, a check, a JSON dump) then runs
for hours. A file is refused at the first limit it passes, naming the line.

The limits are checked on libyaml's stream of parse events, one flat pass with
no recursion and nothing built: each node's expanded size (what it would be with
every alias written out: a scalar's characters, one for a collection)
is added up as it goes and remembered for its anchor, so an alias costs what it
stands for; without aliases that size is never more than the file's bytes. The nesting counted is the expanded one too (an alias of a deep node
nests as deep as that node where it is used). An alias inside its own anchor (a
recursive document) is refused: nothing could walk it to the end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentledger.schemas.json_limits import MAX_DEPTH, MAX_MESSAGE_BYTES

# libyaml's parser where PyYAML was built with it (10x faster on a long script), same events
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


@dataclass(frozen=True)
class Limits:
    max_bytes: int = MAX_MESSAGE_BYTES  # the file, and the document with its aliases written out
    max_depth: int = MAX_DEPTH  # collections inside collections


DEFAULT = Limits()


class OverLimit(ValueError):
    """A document past one of its limits; `line` (1-based) is where, when known."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.line = line


def read_text(path: str | Path, limits: Limits = DEFAULT) -> str:
    """The file's text, never more than `limits.max_bytes` read (a spec that is
    /dev/zero or a multi-gigabyte file is refused at once, not read to the end).
    OSError and UnicodeDecodeError as reading raises them; OverLimit when larger."""
    return read_bytes(path, limits).decode()


def read_bytes(path: str | Path, limits: Limits = DEFAULT) -> bytes:
    """The file's bytes, never more than `limits.max_bytes` read; OverLimit when larger."""
    with open(path, "rb") as f:
        raw = f.read(limits.max_bytes + 1)
    if len(raw) > limits.max_bytes:
        raise OverLimit(f"larger than {limits.max_bytes:,} bytes (the limit)")
    return raw


def check(text: str, limits: Limits = DEFAULT) -> None:
    """OverLimit when `text` nests deeper or expands larger than `limits` allow.
    yaml.YAMLError when it is not YAML (found by the same parse, marks included)."""
    walk = _Walk(limits)
    for event in yaml.parse(text, Loader=LOADER):
        walk.see(event, event.start_mark.line + 1 if event.start_mark else None)


class _Walk:
    """The one pass over a document's parse events: the expanded size so far, each
    open collection's, the height of the tallest child of each, each anchor's."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.expanded = 0
        self.stack: list[
            tuple[int, str | None]
        ] = []  # per open collection: the size where it began, its anchor
        self.heights: list[int] = [
            0
        ]  # the tallest child of each open collection (and of the document)
        self.anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded size, height)

    def see(self, event: yaml.Event, line: int | None) -> None:
        size, height = self._node(event, line)
        self.expanded += size
        if height >= 0:
            self.heights[-1] = max(self.heights[-1], height)
        if self.expanded > self.limits.max_bytes:
            what = f"with its aliases written out it is over {self.limits.max_bytes:,} bytes (the limit)"
            raise OverLimit(what, line)

    def _node(self, event: yaml.Event, line: int | None) -> tuple[int, int]:
        """What the event adds, and the height of the node it ends (-1: none)."""
        if isinstance(event, _OPEN):
            if len(self.stack) >= self.limits.max_depth:
                raise OverLimit(f"nested deeper than {self.limits.max_depth} (the limit)", line)
            self.stack.append((self.expanded, event.anchor))
            self.heights.append(0)
            return 1, -1
        if isinstance(event, _CLOSE):
            began, anchor = self.stack.pop()
            height = self.heights.pop() + 1
            if anchor is not None:
                self.anchors[anchor] = (self.expanded - began, height)
            return 0, height
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                self.anchors[event.anchor] = (len(event.value), 0)
            return len(event.value), 0
        if isinstance(event, yaml.AliasEvent):
            return self._alias(event, line)
        return 0, -1

    def _alias(self, event: yaml.AliasEvent, line: int | None) -> tuple[int, int]:
        if any(a == event.anchor for _, a in self.stack):
            raise OverLimit(
                f"alias *{event.anchor} inside its own anchor (a recursive document)", line
            )
        size, height = self.anchors.get(event.anchor, (0, 0))  # an unknown one: the parse says so
        if len(self.stack) + height > self.limits.max_depth:
            what = f"alias *{event.anchor} nests it deeper than {self.limits.max_depth} (the limit)"
            raise OverLimit(what, line)
        return size, height


def safe_load(text: str, limits: Limits = DEFAULT) -> Any:
    """`yaml.safe_load` of a document within `limits` (OverLimit otherwise)."""
    check(text, limits)
    return yaml.load(text, Loader=LOADER)


def problem(exc: OverLimit) -> str:
    """The limit passed, with its line, in one line."""
    return f"line {exc.line}: {exc.reason}" if exc.line is not None else exc.reason

"""The shell examples of the documentation: every ```sh / ```console block of
README.md and docs/**/*.md (```bash and ```shell count as sh).

A `sh` block is commands only: each must exit 0. A `console` block shows a
session: `$ command` lines, each followed by the output it prints (stdout and
stderr as a terminal shows them), compared once volatile parts are normalised.
A command ending in ` &` runs in the background until the document's last block
has run, and is waited for until it prints its first line (a server saying it is
up). A block that cannot run in a test is marked right before it, with why:

    <!-- not run: needs a Kubernetes cluster -->

A block of any language marked `<!-- file: PATH -->` right before it is written
to PATH (in the reader's clone) when the blocks before it have run: the files a
walkthrough asks the reader to write, then run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.reference import ROOT

SHELL = {"sh": "sh", "bash": "sh", "shell": "sh", "console": "console"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w-]*)")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>.+?)\s*-->")
FILE = re.compile(r"<!--\s*file:\s*(?P<path>\S+)\s*-->")


@dataclass
class Command:
    text: str  # as the shell gets it (continuation lines joined)
    line: int  # 1-based, in the document
    expected: list[str] = field(default_factory=list)  # console: the lines shown after it

    @property
    def background(self) -> bool:
        return bool(re.search(r"(?<![&|])&\s*$", self.text))


@dataclass
class Block:
    path: Path
    lang: str  # "sh", "console", or "file" (its body is written to `file`)
    start: int  # the 0-based index of the fence's first content line
    end: int  # the index of the closing fence
    indent: str
    commands: list[Command]
    not_run: str | None  # why, when the block is marked not to run
    file: str | None = None  # where a "file" block is written, relative to the clone
    body: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{shown_path(self.path)}:{self.start}"


def shown_path(path: Path) -> str:
    """`path` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks_of(path: Path, text: str | None = None) -> list[Block]:
    lines = (path.read_text() if text is None else text).splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], m["indent"]
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        lang = SHELL.get(m["lang"])
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        written = _marked(lines, i, FILE, "path")
        if written is not None:
            found.append(Block(path, "file", i + 1, end, indent, [], None, written, body))
        elif lang is not None:
            commands = _commands(lang, body, i + 2)
            found.append(
                Block(path, lang, i + 1, end, indent, commands, _marked(lines, i, NOT_RUN, "why"))
            )
        i = end + 1
    return found


def plain_blocks_showing_commands(path: Path) -> list[int]:
    """Lines of fenced blocks that are not shell blocks yet start with `$ `: a shell
    example hidden from the test."""
    lines = path.read_text().splitlines()
    hits, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(m["fence"]):
            end += 1
        body = [line.strip() for line in lines[i + 1 : end] if line.strip()]
        if m["lang"] not in SHELL and body and body[0].startswith("$ "):
            hits.append(i + 1)
        i = end + 1
    return hits


def _marked(lines: list[str], fence_index: int, marker: re.Pattern[str], group: str) -> str | None:
    j = fence_index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = marker.search(lines[j]) if j >= 0 else None
    return m[group] if m else None


def _commands(lang: str, body: list[str], first_line: int) -> list[Command]:
    commands: list[Command] = []
    pending: Command | None = None  # a command continued with a trailing backslash
    for offset, line in enumerate(body):
        number = first_line + offset
        if pending is not None:
            pending.text += "\n" + line
            if not line.endswith("\\"):
                pending = None
            continue
        if lang == "console":
            if line.startswith("$ ") or line == "$":
                commands.append(Command(line[2:], number))
                pending = commands[-1] if line.endswith("\\") else None
            elif commands:
                commands[-1].expected.append(line)
            elif line.strip():
                raise ValueError(f"line {number}: a console block starts with a `$ ` command")
        elif line.strip() and not line.lstrip().startswith("#"):
            commands.append(Command(line, number))
            pending = commands[-1] if line.endswith("\\") else None
    for c in commands:  # trailing blank lines are not output
        while c.expected and not c.expected[-1].strip():
            c.expected.pop()
    return commands

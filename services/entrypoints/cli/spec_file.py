"""Reading a run spec file (YAML). Every problem becomes one InvalidSpec naming
the file, with all problems found at once, each with its field path, a plain
reason and its line: YAML syntax, keys given twice, the schema's errors. The
file is read within the inbox's limits (`agentledger.services.bounded_yaml`: its size, its
nesting, its aliases written out), checked before any node is built. A file
check's regex RE2 refuses is named with the schema's problems. The path `-` is
standard input, read within the same limits; its relative paths resolve from the
current folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentledger.schemas.errors import InvalidSpec, SpecProblem
from agentledger.schemas.spec import RunSpec
from agentledger.services import bounded_yaml
from agentledger.services.bounded_yaml import DEFAULT, LOADER, Limits, OverLimit
from agentledger.services.entrypoints.cli.spec_errors import problems_of
from agentledger.services.handlers.linear_regex import pattern_problem


class SpecLines:
    """The line each part of a spec file starts on, from YAML's node tree."""

    def __init__(self, root: yaml.Node | None):
        self._root = root

    def line(self, field: str) -> int | None:
        """The line of `field` (a dotted path); for a key that is not there, the
        line of the mapping that lacks it."""
        node = self._root
        line = node.start_mark.line + 1 if node is not None else None
        for part in field.split(".") if field else []:
            child, key_line = _child(node, part) if node is not None else (None, None)
            if child is None:
                break
            node, line = child, key_line
        return line


STDIN = "-"
STDIN_NAME = "<stdin>"  # how messages name a spec read from standard input


def source_name(path: str) -> str:
    return STDIN_NAME if path == STDIN else path


def load_spec_file(path: str, limits: Limits = DEFAULT) -> tuple[RunSpec, str, SpecLines]:
    """The spec, the absolute folder its relative paths resolve from, and its lines."""
    file = Path(path)
    path = source_name(path)
    try:
        text = _read_stdin(limits) if path == STDIN_NAME else bounded_yaml.read_text(file, limits)
    except OSError as exc:
        raise InvalidSpec("", f"cannot read it: {exc.strerror}", source=path) from None
    except UnicodeDecodeError:
        raise InvalidSpec("", "not a text file (UTF-8)", source=path) from None
    except OverLimit as exc:
        raise InvalidSpec("", exc.reason, source=path) from None
    root, data = _load_yaml(text, path, limits)
    if not isinstance(data, dict):
        shown = "nothing" if data is None else f"a {type(data).__name__}"
        raise InvalidSpec(
            "", f"a spec is a mapping of keys (task, principal, model, …), got {shown}", source=path
        )
    lines = SpecLines(root)
    problems = _duplicate_keys(root)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        problems += problems_of(exc) + raw_pattern_problems(data)
        spec = None
    if problems or spec is None:
        raise InvalidSpec.of(with_lines(problems, lines), source=path)
    return spec, os.getcwd() if path == STDIN_NAME else str(file.resolve().parent), lines


def _read_stdin(limits: Limits) -> str:
    """Standard input to its end, never more than the limit read (`-` in a terminal:
    the user types the spec, and says so how it ends)."""
    if sys.stdin is None:
        raise InvalidSpec("", "there is no standard input to read the spec from", source=STDIN_NAME)
    if sys.stdin.isatty():
        print(
            "agentledger: reading the spec from standard input (end it with Ctrl-D)",
            file=sys.stderr,
        )
    raw = sys.stdin.buffer.read(limits.max_bytes + 1)
    if len(raw) > limits.max_bytes:
        raise OverLimit(f"larger than {limits.max_bytes:,} bytes (the limit)")
    return raw.decode()


def raw_pattern_problems(data: dict[str, Any]) -> list[SpecProblem]:
    """The regexes of file checks RE2 refuses, read from the mapping as written: with
    the schema's problems, every problem is named at once (once the schema passes,
    `spec_check` finds them on the spec itself)."""
    checks = data.get("acceptance")
    return [
        SpecProblem(f"acceptance.{i}.matches", why)
        for i, check in enumerate(checks if isinstance(checks, list) else [])
        if isinstance(check, dict) and "file" in check and isinstance(check.get("matches"), str)
        and (why := pattern_problem(check["matches"])) is not None
    ]  # fmt: skip


def parse_spec(data: dict[str, Any]) -> RunSpec:
    """A spec from a mapping (no file): every schema problem at once."""
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidSpec.of(problems_of(exc)) from None


def with_lines(problems: list[SpecProblem], lines: SpecLines) -> list[SpecProblem]:
    """The problems with their lines, in the order of the file."""
    placed = [SpecProblem(p.field, p.reason, p.line or lines.line(p.field)) for p in problems]
    return sorted(placed, key=lambda p: p.line or 0)


def _load_yaml(text: str, path: str, limits: Limits) -> tuple[yaml.Node | None, Any]:
    loader = LOADER(text)
    try:
        bounded_yaml.check(text, limits)  # before any node is built
        root = loader.get_single_node()
        return root, (loader.construct_document(root) if root is not None else None)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if exc.context_mark and exc.problem_mark and exc.context_mark.line != mark.line:
            context += f" (from line {exc.context_mark.line + 1})"
        what = " ".join(x for x in (context, exc.problem) if x)
        problem = SpecProblem("", f"not valid YAML: {what}", mark.line + 1 if mark else None)
        raise InvalidSpec.of([problem], source=path) from None
    except yaml.YAMLError as exc:
        raise InvalidSpec("", f"not valid YAML: {exc}", source=path) from None
    except OverLimit as exc:
        raise InvalidSpec.of([SpecProblem("", exc.reason, exc.line)], source=path) from None
    finally:
        loader.dispose()


def _child(node: yaml.Node, part: str) -> tuple[yaml.Node | None, int | None]:
    """The node under `part` and the line of its key (mappings) or item (sequences)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return value, key.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
        item = node.value[int(part)]
        return item, item.start_mark.line + 1
    return None, None


def _duplicate_keys(node: yaml.Node | None, path: str = "") -> list[SpecProblem]:
    """A key given twice in one mapping: YAML keeps the last silently, a typo's way
    of changing what a run does."""
    found: list[SpecProblem] = []
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
            line = key.start_mark.line + 1
            field = f"{path}.{name}" if path else name
            if name in seen:
                found.append(
                    SpecProblem(field, f"given twice (lines {seen[name]} and {line})", line)
                )
            seen.setdefault(name, line)
            found += _duplicate_keys(value, field)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicate_keys(item, f"{path}.{i}" if path else str(i))
    return found

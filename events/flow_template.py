"""The templates of a flow: a stage's task, a call's arguments and a gate's question
read earlier results as `{input.task}`, `{stage.result}`, `{stage.result.key.key}` and
`{stage.outcome}`; `{{` and `}}` are literal braces, and braces around anything else
are left as written.

A template is rendered in one pass: what a placeholder is replaced with is data,
never read as a template again (a result holding `{input.task}` puts those characters
in the text, nothing more). Each inserted value is cut at `MAX_VALUE_CHARS`, a
rendered text over `MAX_RENDERED_CHARS` is refused, and a placeholder naming a stage
that has no result yet, or a key its result lacks, is refused by name
(`TemplateError`) — the flow then ends `failed` saying so."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_VALUE_CHARS = 8_000
MAX_RENDERED_CHARS = 64_000
MAX_PATH = 8  # keys after `result`

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_-]{1,64}){1,9})\}")


class TemplateError(ValueError):
    """A placeholder that cannot be filled: names it and why."""


Context = Mapping[str, Mapping[str, Any]]  # "input" -> {"task": …}; stage -> {"result", "outcome"}


def references(template: str) -> list[tuple[str, ...]]:
    """The placeholders of `template`, each as its dotted parts."""
    return [tuple(m.group(1).split(".")) for m in _PLACEHOLDER.finditer(template) if m.group(1)]


def reference_problem(parts: tuple[str, ...], stages: Iterable[str]) -> str | None:
    """Why a placeholder can never be filled in a flow of `stages` (None: it can be)."""
    name = "{" + ".".join(parts) + "}"
    head, field = parts[0], parts[1]
    if head == "input":
        return None if parts[1:] == ("task",) else f"{name}: `input` has only `task`"
    if head not in set(stages):
        return f"{name}: the flow has no stage {head!r}"
    if field not in ("result", "outcome"):
        return f"{name}: a stage has `result` and `outcome`, not {field!r}"
    if field == "outcome" and len(parts) > 2:
        return f"{name}: an outcome is a word, it has no keys"
    if len(parts) - 2 > MAX_PATH:
        return f"{name}: at most {MAX_PATH} keys after `result`"
    return None


def stray_placeholders(template: str, names: Iterable[str]) -> list[str]:
    """What looks like a placeholder of `names` but is none (an unclosed `{fix.result`,
    a bad key): it would be left as written, silently."""
    rest = _PLACEHOLDER.sub("", template)
    found = [n for n in names if "{" + n + "." in rest]
    return [
        f"{{{n}.…: a placeholder left unclosed or malformed (write "
        f"{'{input.task}' if n == 'input' else '{' + n + '.result.key}'}, or {{{{ for a brace)"
        for n in found
    ]


def value_of(parts: tuple[str, ...], ctx: Context) -> Any:
    """The value a placeholder names (TemplateError: there is none)."""
    name = "{" + ".".join(parts) + "}"
    head = ctx.get(parts[0])
    if head is None:
        raise TemplateError(f"{name}: stage {parts[0]!r} has no result yet")
    if parts[1] not in head:
        raise TemplateError(f"{name}: no {parts[1]!r} of {parts[0]!r}")
    value: Any = head[parts[1]]
    for i, key in enumerate(parts[2:], start=2):
        if isinstance(value, Mapping) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            where = ".".join(parts[:i])
            raise TemplateError(f"{name}: {where} has no key {key!r}")
    return value


def as_text(value: Any) -> str:
    """A value as it goes into a text: a string as is, anything else as JSON, cut."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    if len(text) > MAX_VALUE_CHARS:
        cut = len(text) - MAX_VALUE_CHARS
        text = f"{text[:MAX_VALUE_CHARS]}…[{cut} more characters cut]"
    return text


def render(template: str, ctx: Context) -> str:
    """`template` with its placeholders filled from `ctx`, in one pass."""

    def fill(m: re.Match[str]) -> str:
        token = m.group(0)
        if token in ("{{", "}}"):
            return token[0]
        return as_text(value_of(tuple(m.group(1).split(".")), ctx))

    out = _PLACEHOLDER.sub(fill, template)
    if len(out) > MAX_RENDERED_CHARS:
        raise TemplateError(
            f"the rendered text is {len(out):,} characters, over {MAX_RENDERED_CHARS:,}"
        )
    return out


def render_input(value: Any, ctx: Context) -> Any:
    """A call's arguments rendered: every string a template, and a string that is one
    placeholder and nothing else replaced by the value itself (a number stays a number)."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole is not None and whole.group(1):
            found = value_of(tuple(whole.group(1).split(".")), ctx)
            if len(json.dumps(found, default=str)) > MAX_RENDERED_CHARS:
                raise TemplateError(f"{value}: the value is over {MAX_RENDERED_CHARS:,} characters")
            return found
        return render(value, ctx)
    if isinstance(value, Mapping):
        return {k: render_input(v, ctx) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_input(v, ctx) for v in value]
    return value


def templates_of(value: Any) -> list[str]:
    """Every string inside a call's arguments (each is a template)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in templates_of(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in templates_of(v)]
    return []

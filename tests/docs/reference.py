"""The reference pages (docs/reference/*.md), made from the code they describe:
the CLI from its argparse parser, the environment from `agentledger.services.settings_env`
(`ENV`, `ENV_HELP`, `ENV_ALSO`) and the defaults of `Settings`, exit codes from
`exit_codes.py` and its comments, events from the union in `events/types.py`
with their docstrings and field descriptions, the run spec from its pydantic
models, default prices from `events/pricing.py`. `pages()` renders them;
`make docs` writes them and a unit test fails while a committed one differs."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def header(title: str, source: str) -> str:
    return (
        f"<!-- Made by `make docs` from {source}: edit the code, not this page. -->\n\n"
        f"# {title}\n\n"
    )


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-'."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def cell(text: str) -> str:
    """Text fit for one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    shown = str(text)
    fence = "``" if "`" in shown else "`"
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- types and fields


def type_name(t: Any, link: Callable[[type[BaseModel]], str] | None = None) -> str:
    """A field's type in words a YAML author reads: string, list of …, one of …"""
    origin, args = get_origin(t), get_args(t)
    if t is type(None):
        return "null"
    if t is Any:
        return "any"
    if origin is Annotated:
        return type_name(args[0], link)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (Union, types.UnionType):
        names = [type_name(a, link) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin in (tuple, list):
        if len(args) == 2 and args[1] is Ellipsis or origin is list:
            return f"list of {type_name(args[0], link)}"
        return "[" + ", ".join(type_name(a, link) for a in args) + "]"
    if origin is dict:
        return f"map of {type_name(args[0], link)} to {type_name(args[1], link)}"
    if isinstance(t, type) and issubclass(t, BaseModel):
        return link(t) if link else t.__name__
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "map"}
    if t in simple:
        return simple[t]
    return getattr(t, "__name__", str(t))


def default_of(f: FieldInfo) -> str:
    if f.default_factory is not None:
        value = f.default_factory()  # type: ignore[call-arg]
    elif f.default is PydanticUndefined:
        return "required"
    else:
        value = f.default
    if isinstance(value, BaseModel):
        return "its defaults"
    if value is None:
        return "unset"
    if isinstance(value, tuple | list):
        return "[]" if not value else code(list(value))
    if isinstance(value, dict):
        return "{}" if not value else code(value)
    if isinstance(value, bool):
        return code(str(value).lower())
    return code(value)


_BOUNDS = (("ge", "≥ {}"), ("gt", "> {}"), ("le", "≤ {}"), ("lt", "< {}"),
           ("min_length", "length ≥ {}"), ("max_length", "length ≤ {}"),
           ("pattern", "matches {}"))  # fmt: skip


def bounds_of(f: FieldInfo) -> str:
    said = []
    for meta in f.metadata:
        for attr, words in _BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                said.append(words.format(code(value) if attr == "pattern" else value))
    return ", ".join(said)


def meaning_of(f: FieldInfo) -> str:
    bounds = bounds_of(f)
    text = f.description or ""
    return f"{text} ({bounds})" if text and bounds else text or bounds


# ---------------------------------------------------------------- the CLI


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=88, max_help_position=32)


def _subcommands(p: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


# What an argument is, where the parser gives it no help (better: a `help=` in parser.py)
POSITIONALS = {
    "processes": "worker processes, each supervised: one that dies is started again",
    "turn": "the turn (1, 2, …) whose request to rebuild",
    "spec": "the run spec file (YAML or JSON)",
    "run_id": "the run's id (`r-…`, as `run`, `submit` and `runs` print it)",
    "call_id": "the tool call's id (as the timeline and `status` print it)",
    "reason": "why (free text, recorded)",
    "note": "a note (free text, recorded)",
    "text": "what to tell the model",
    "name": "the publisher's name: letters, digits, '.', '_' or '-'",
    "action": "what to do",
}
COMMON = ("json", "log_level", "log_format")  # every command's, said once at the top


def _argument_rows(p: argparse.ArgumentParser, *, common: bool = False) -> list[tuple[str, ...]]:
    rows = []
    for a in p._actions:
        if isinstance(a, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if a.dest in COMMON and not common:
            continue
        if a.option_strings:
            takes = a.nargs != 0
            metavar = a.metavar or (a.dest.upper() if takes else "")
            if a.choices and not a.metavar:
                metavar = "{" + ",".join(map(str, a.choices)) + "}"
            if a.nargs == "*":
                metavar = f"[{metavar} …]"
            name = ", ".join(a.option_strings) + (f" {metavar}" if takes else "")
        else:
            name = str(a.metavar or a.dest).upper()
            if a.choices:
                name = "{" + ",".join(map(str, a.choices)) + "}"
            if a.nargs == "?":
                name = f"[{name}]"
        default = a.default
        unset = default is None or default is False or default in ([], "", argparse.SUPPRESS)
        shown = "" if unset or a.nargs == 0 else code(default)
        rows.append((code(name), shown, a.help or POSITIONALS.get(a.dest, "")))
    return rows


def _command_section(name: str, p: argparse.ArgumentParser, level: str = "##") -> str:
    p.formatter_class = _formatter
    usage = p.format_usage().removeprefix("usage: ").rstrip()
    text = f"{level} `{name}`\n\n"
    if p.description:
        text += f"{p.description[0].upper()}{p.description[1:]}.\n\n"
    text += f"```text\n{usage}\n```\n\n"
    rows = _argument_rows(p)
    if rows:
        text += table(("argument", "default", "meaning"), rows) + "\n"
    for sub, sp in _subcommands(p):
        sp.description = sp.description or _help_of(p, sub)
        text += _command_section(f"{name} {sub}", sp, "###")
    return text


def _help_of(p: argparse.ArgumentParser, sub: str) -> str | None:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == sub:
                    return choice.help
    return None


def cli_page() -> str:
    from agentledger.services.entrypoints.cli.parser import parser

    p = parser()
    p.formatter_class = _formatter
    text = header("The `agentledger` command", "services/entrypoints/cli/parser.py")
    text += (
        "Every command takes `--json` (one JSON object on stdout, or one a line for "
        'streams; an error is then one object too, `{"error", "message", '
        '"exit_code", …}`) and `--log-level` / `--log-format`, before or after the '
        "command. Exit codes: [exit-codes.md](exit-codes.md). What each command is for: "
        "[the guide](../README.md).\n\n"
    )
    text += "```text\n" + p.format_usage().removeprefix("usage: ").rstrip() + "\n```\n\n"
    rows = _argument_rows(p, common=True)
    rows.append((code("--json"), "", "(after a command) machine output on stdout"))
    text += table(("argument", "default", "meaning"), rows) + "\n"
    commands = _subcommands(p)
    text += "| command | what it does |\n|---|---|\n"
    text += "".join(
        f"| [`{n}`](#agentledger-{n.replace(' ', '-')}) | {cell(_help_of(p, n) or '')} |\n"
        for n, _ in commands
    )
    text += "\n"
    for name, sp in commands:
        text += _command_section(f"agentledger {name}", sp)
    return text


# ---------------------------------------------------------------- the environment


def _setting_default(name: str, var: str) -> str:
    from agentledger.services.settings import Settings

    f = {f.name: f for f in dataclasses.fields(Settings)}[name]
    if f.default_factory is not dataclasses.MISSING:
        return "per user"
    value = f.default
    if value is None or value == "" or value == ():
        return "unset"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20:
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
            if value % size == 0:
                return f"{code(value)} ({value // size} {unit})"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return code(value)


def environment_page() -> str:
    from agentledger.services.settings_env import ENV, ENV_ALSO, ENV_HELP

    text = header(
        "Environment",
        "services/settings_env.py (`ENV`, `ENV_HELP`, `ENV_ALSO`) and the defaults of "
        "`Settings` in services/settings.py",
    )
    text += (
        "Settings are the environment, read once when a command starts, into one frozen "
        "settings object. Every value is checked then: a bad one (`REDIS_URL=garbage`, an "
        "`http://` URL, a port or database that is not a number, a negative lease) exits 2 "
        "naming the variable; so does a database the server does not have. An empty value "
        "is the same as unset. `run --processes N` and "
        "`workers --processes N` give their children the same settings.\n\n"
    )
    rows = [
        (code(var), _setting_default(name, var), ENV_HELP.get(var, ""))
        for var, (name, _kind) in ENV.items()
    ]
    text += table(("variable", "default", "meaning"), rows)
    text += "\n## Read besides\n\n"
    text += table(("variable", "meaning"), [(code(v), m) for v, m in ENV_ALSO.items()])
    return text


# ---------------------------------------------------------------- exit codes


def _commented(source: str) -> Iterator[tuple[str, int, str]]:
    """(name, code, comment) of `NAME = N  # comment` lines and of BY_STATUS entries."""
    lines = source.splitlines()

    def comment(lineno: int) -> str:
        line = lines[lineno - 1]
        return line.split("#", 1)[1].strip() if "#" in line else ""

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, int) and isinstance(node.targets[0], ast.Name):
                yield node.targets[0].id, node.value.value, comment(node.lineno)
        target = getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "BY_STATUS":
            value = getattr(node, "value", None)
            assert isinstance(value, ast.Dict)
            for key, val in zip(value.keys, value.values, strict=True):
                assert isinstance(key, ast.Attribute) and isinstance(val, ast.Constant)
                yield f"run {key.attr.lower()}", int(val.value), comment(val.lineno)


def exit_codes_page() -> str:
    import agentledger.services.entrypoints.cli.exit_codes as exit_codes

    source = Path(exit_codes.__file__).read_text()
    text = header("Exit codes", "services/entrypoints/cli/exit_codes.py and its comments")
    text += (
        "`run` and `status` exit with the code of the state the run is in; every other "
        "command exits 0 when it did what it was asked. A command that fails says why in "
        "one line on stderr (with `--json`, also as an object on stdout).\n\n"
    )
    rows = sorted(_commented(source), key=lambda r: (r[1], r[0]))
    shown = [
        (code(n), code(name.removeprefix("run ")) if name.startswith("run ") else code(name), why)
        for name, n, why in rows
    ]
    text += table(("code", "state or name", "meaning"), shown)
    return text


# ---------------------------------------------------------------- events


def _model_table(
    model: type[BaseModel],
    link: Callable[[type[BaseModel]], str] | None,
    skip: tuple[str, ...] = ("type",),
) -> str:
    rows = [
        (code(name), type_name(f.annotation, link), default_of(f), meaning_of(f))
        for name, f in model.model_fields.items()
        if name not in skip
    ]
    return table(("field", "type", "default", "meaning"), rows) if rows else "No fields.\n"


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def events_page() -> str:
    from agentledger.events import types as ev
    from agentledger.schemas.envelope import Envelope

    text = header("Events", "the `Event` union of events/types.py, its docstrings and fields")
    text += (
        "Each run's log is a Redis stream of these events, in order, one entry each: an "
        "envelope whose `data` is the event (msgpack). Names are past-tense facts. "
        "`agentledger tail --run RUN --json` prints envelopes; `raw` prints them as stored.\n\n"
        "## The envelope\n\n"
    )
    text += _model_table(Envelope[ev.RunCreated], None, skip=("data",))
    text += (
        "| `data` | an event | required | the event itself: its `type` equals the envelope's |\n\n"
    )
    union = get_args(get_args(ev.Event)[0])
    names = {cls.__name__ for cls in union}

    def link(m: type[BaseModel]) -> str:
        return (
            f"[{m.__name__}](#{m.__name__.lower()})"
            if m.__name__ in names | _NESTED
            else m.__name__
        )

    text += "| event | what it says |\n|---|---|\n"
    text += "".join(f"| {link(cls)} | {cell(_doc(cls))} |\n" for cls in union) + "\n"
    for cls in union:
        text += f"## {cls.__name__}\n\n{_doc(cls)}\n\n" + _model_table(cls, link) + "\n"
    text += "## Types inside events\n\n"
    for nested in (ev.ToolError, ev.FieldError, ev.Overflow):
        text += f"### {nested.__name__}\n\n{_doc(nested)}\n\n" + _model_table(nested, link) + "\n"
    return text.rstrip("\n") + "\n"


_NESTED = {"ToolError", "FieldError", "Overflow"}


# ---------------------------------------------------------------- the run spec


def _models_in(t: Any) -> Iterator[tuple[type[BaseModel], str]]:
    """The models a field's type holds, with the path step to each (`[]`: an item)."""
    origin, args = get_origin(t), get_args(t)
    if origin is Annotated:
        yield from _models_in(args[0])
    elif origin in (Union, types.UnionType):
        for a in args:
            yield from _models_in(a)
    elif origin in (tuple, list):
        for a in args:
            if a is not Ellipsis:
                yield from ((m, "[]" + step) for m, step in _models_in(a))
    elif origin is dict:
        yield from ((m, ".<model id>" + step) for m, step in _models_in(args[1]))
    elif isinstance(t, type) and issubclass(t, BaseModel):
        yield t, ""


def spec_models() -> list[tuple[type[BaseModel], str]]:
    """Every model a run spec holds, with the first key path that reaches it."""
    from agentledger.schemas.spec import RunSpec

    seen: dict[type[BaseModel], str] = {RunSpec: ""}
    queue: list[type[BaseModel]] = [RunSpec]
    while queue:
        model = queue.pop(0)
        for name, f in model.model_fields.items():
            for inner, step in _models_in(f.annotation):
                if inner not in seen:
                    base = seen[model]
                    seen[inner] = f"{base}.{name}{step}" if base else f"{name}{step}"
                    queue.append(inner)
    return list(seen.items())


def spec_page() -> str:
    models = spec_models()
    anchors = {m: slug(_spec_heading(m, path)) for m, path in models}

    def link(m: type[BaseModel]) -> str:
        return f"[{m.__name__}](#{anchors[m]})" if m in anchors else m.__name__

    text = header("The run spec", "the pydantic models of schemas/spec.py")
    text += (
        "A run spec is YAML (or JSON) written by hand; `agentledger run SPEC` and `submit` "
        "read it, publishers send it in `RunRequested`. Unknown keys are refused, and so is "
        "a key given twice; every problem is reported at once, with its line. The same "
        "contract as JSON Schema: `schemas/run_spec.schema.json`. How to write one: "
        "[writing a spec](../guide/specs.md).\n\n"
    )
    for model, path in models:
        text += f"## {_spec_heading(model, path)}\n\n"
        if _doc(model):
            text += _doc(model) + "\n\n"
        extra = model.model_config.get("extra") == "allow"
        text += _model_table(model, link)
        text += "\nOther keys are passed through as given.\n\n" if extra else "\n"
    return text.rstrip("\n") + "\n"


def _spec_heading(model: type[BaseModel], path: str) -> str:
    return f"{model.__name__} — `{path}`" if path else f"{model.__name__} — the top level"


# ---------------------------------------------------------------- prices


def prices_page() -> str:
    from agentledger.events.pricing import DEFAULT_PRICES, OPENAI_PRICES_AS_OF, PRICES_CHECKED

    text = header("Default model prices", "events/pricing.py (`DEFAULT_PRICES`)")
    text += (
        f"US dollars per million tokens, Anthropic's list prices checked on **{PRICES_CHECKED}**, "
        f"OpenAI's as published in **{OPENAI_PRICES_AS_OF}** and not checked since (a self-hosted "
        "model costs what `budgets.prices` says: nothing unless priced). "
        "A model id is priced exactly, else by its longest known prefix (dated snapshots). "
        "`budgets.prices` in a spec overrides or adds any of them; a model with no price "
        "costs nothing, so a spec with `max_cost_usd` must price its model.\n\n"
    )
    groups: list[tuple[list[str], Any]] = []
    for model_id, price in DEFAULT_PRICES.items():
        if groups and groups[-1][1] == price:
            groups[-1][0].append(model_id)
        else:
            groups.append(([model_id], price))

    def row(ids: str, p: Any) -> tuple[str, ...]:
        return (ids, *(f"{x:g}" for x in (p.input, p.cache_write, p.one_hour_write,
                                          p.cache_read, p.output, p.web_search_per_1k)))  # fmt: skip

    rows = []
    for ids, price in groups:
        names = ", ".join(ids)
        if price.long_prompt is not None:
            over = f"{price.long_prompt_over:,}"
            rows.append(row(f"{names}, prompts up to {over} tokens", price))
            rows.append(
                row(f"{names}, longer prompts (every token of the request)", price.long_prompt)
            )
        else:
            rows.append(row(names, price))
    head = ("model id", "input", "5m cache write", "1h cache write", "cache read", "output",
            "web searches per 1,000")  # fmt: skip
    return text + table(head, rows)


# ---------------------------------------------------------------- all of them


def pages() -> dict[str, str]:
    """Each reference page's file name and text."""
    return {
        "cli.md": cli_page(),
        "environment.md": environment_page(),
        "exit-codes.md": exit_codes_page(),
        "events.md": events_page(),
        "spec.md": spec_page(),
        "prices.md": prices_page(),
    }


def stale() -> list[str]:
    """The reference pages whose committed text is not what the code makes."""
    return [
        name
        for name, text in pages().items()
        if not (REFERENCE / name).exists() or (REFERENCE / name).read_text() != text
    ]


def write() -> list[str]:
    """Write every page that changed; their names."""
    REFERENCE.mkdir(parents=True, exist_ok=True)
    changed = stale()
    for name, text in pages().items():
        if name in changed:
            (REFERENCE / name).write_text(text)
    return changed

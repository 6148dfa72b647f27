"""Pydantic's validation errors of a run spec, in a user's words: each error
becomes a SpecProblem with the path a user wrote (union tags left out), and a
plain reason — what the field is, what was given — instead of "Input should be
a valid tuple". The spec's own models say which keys exist where."""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from agentledger.schemas.errors import SpecProblem
from agentledger.schemas.spec import MODELS, RunSpec
from agentledger.services.pydantic_words import plain_reason, shown

Path = tuple[str | int, ...]

# what a part of the spec is, for a value of the wrong shape there ("*": any index)
WHAT: dict[str, str] = {
    "model": "the model is one of  " + "  ".join(f"{k}: {c.shape}" for k, c in MODELS.items()),
    "model.scripted": "a scripted model is a list of turns, played in order; each turn is a "
    'mapping with one of  tool_use: [{id, name, input}]  end_turn: "text"  refusal: "text"',
    "model.scripted.*": 'a scripted turn is a mapping with one of  tool_use: [calls]  end_turn: "text"  '
    'refusal: "text"',
    "model.scripted.*.tool_use": "tool_use is a list of calls, each {id: c1, name: a_tool, input: {…}}",
    "model.scripted.*.tool_use.*": "a scripted call is {id: c1, name: a_tool, input: {…}}",
    "model.anthropic": "anthropic settings are a mapping, e.g. {model: claude-sonnet-4-5, max_tokens: 4096}",
    "model.replay": "a replay is a mapping: {run_id: r-…}, the recorded run whose replies are played",
    "principal": "the principal is who the run acts for: {id: alice, tenant: shop-1, scopes: […]}",
    "tools": "tools is a list of tool module names, e.g. [inventory_tools]",
    "acceptance": "acceptance is a list of checks, each with one of command, tool, file or python",
    "acceptance.*": "a check is a mapping with one of  command: …  tool: …  file: …  python: …",
    "budgets": "budgets is a mapping, e.g. {max_turns: 8, max_cost_usd: 0.5}",
    "policies": "policies is a mapping, e.g. {on_refusal: escalate}",
    "secrets": "secrets is a list of environment variable names",
    "context": "context is a mapping, e.g. {budget_tokens: 150000, keep_recent_turns: 4}",
}
_SHAPE_ERRORS = {
    "tuple_type", "list_type", "dict_type", "model_type", "model_attributes_type",
    "string_type", "missing_key", "union_tag_invalid",
}  # fmt: skip


def problems_of(exc: ValidationError) -> list[SpecProblem]:
    errors = _without_echoes(exc.errors())
    found: list[SpecProblem] = []
    for err in errors:
        problem = problem_of(err)
        if all(str(p) != str(problem) for p in found):
            found.append(problem)
    return found


def problem_of(err: ErrorDetails) -> SpecProblem:
    path, parent = user_path(err["loc"])
    typo = _typo_of_tag(err, path, parent)
    if typo is not None:
        path, reason = typo
    else:
        reason = _reason(err, path, parent)
    return SpecProblem(".".join(str(p) for p in path), reason)


def _without_echoes(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Leave out "too short" of a list whose items were refused: pydantic counts
    only the items that passed, so a list of one bad turn is also "empty"."""
    locs = [e["loc"] for e in errors]

    def inside(loc: tuple[str | int, ...]) -> bool:
        return any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs)

    return [e for e in errors if e["type"] != "too_short" or not inside(e["loc"])]


def user_path(loc: tuple[str | int, ...]) -> tuple[Path, Any]:
    """The path as the user wrote it, and the type that holds its last part."""
    out: list[str | int] = []
    tp: Any = RunSpec
    parent: Any = None
    for part in loc:
        tp = _unwrap(tp)
        member = _tagged(tp, part)
        if member is not None:  # a union's tag: pydantic's, not the user's
            tp = member
            continue
        if isinstance(part, str) and part.startswith("function-"):
            continue
        out.append(part)
        parent, tp = tp, _child(tp, part)
    return tuple(out), _unwrap(parent)


def _reason(err: ErrorDetails, path: Path, parent: Any) -> str:
    kind, got = err["type"], shown(err.get("input"))
    if kind == "extra_forbidden":
        return _unknown_key(str(path[-1]) if path else "", parent)
    if kind == "missing":
        return "required" + _about(parent, path)
    if kind in _SHAPE_ERRORS and (what := WHAT.get(_pattern(path))):
        return f"{what}; got {got}"
    if kind == "string_pattern_mismatch" and (form := FORMS.get(_pattern(path))):
        return f"{form}; got {got}"
    return plain_reason(err)


def _typo_of_tag(err: ErrorDetails, path: Path, parent: Any) -> tuple[Path, str] | None:
    """A mapping of a tagged union (a check, the model) without its tag, one of whose
    keys is a typo of a tag (`comand:`): the key's path, and which tag it may mean."""
    given = err.get("input")
    if err["type"] not in _SHAPE_ERRORS or not path or not isinstance(given, dict):
        return None
    tags = _tags(_unwrap(_child(parent, path[-1])))
    listed = " or ".join(", ".join(repr(t) for t in tags).rsplit(", ", 1))
    for key in given:
        close = difflib.get_close_matches(str(key), tags, n=1, cutoff=0.6)
        if close:
            said = f"unknown key (did you mean {close[0]!r}? it needs one of {listed})"
            return (*path, str(key)), said
    members = _tags_fields(_unwrap(_child(parent, path[-1])))
    owners = [tag for tag, keys in members if given and set(given) <= keys]
    if len(owners) == 1:
        keys = " and ".join(repr(k) for k in given)
        verb = "goes" if len(given) == 1 else "go"
        return path, f"needs the key {owners[0]!r} ({keys} {verb} with it); got {shown(given)}"
    return None


# what a field with a pattern holds, for a value that does not match it
FORMS: dict[str, str] = {
    "queue": "a queue name is letters, digits, '.', '_' or '-' (at most 64, a letter or digit first)",
    "secrets.*": "a secret is named by its environment variable: letters, digits and '_', "
    "not a digit first",
    "acceptance.*.python": "a python check is module:function, e.g. my_checks:stock_is_right",
    "model.anthropic.server_tools.*.type": "a server tool's type is lowercase letters, digits "
    "and '_', e.g. web_search_20250305",
    "model.anthropic.server_tools.*.name": "a name is letters, digits, '_' or '-' (at most 64)",
}


def _unknown_key(key: str, model: Any) -> str:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return "unknown key"
    known = list(model.model_fields)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key ({hint}the keys here are {', '.join(known)})"


def _about(model: Any, path: Path) -> str:
    if path and isinstance(model, type) and issubclass(model, BaseModel):
        info = model.model_fields.get(str(path[-1]))
        if info is not None and info.description:
            return f": {info.description}"
    what = WHAT.get(_pattern(path))
    return f": {what}" if what else ""


def _pattern(path: Path) -> str:
    return ".".join("*" if isinstance(p, int) else p for p in path)


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and Optional."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif _is_union(tp) and type(None) in get_args(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            tp = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
        else:
            return tp


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _tags(tp: Any) -> list[str]:
    """The tags of a tagged union's members, in order ([] for any other type)."""
    return [tag for tag, _ in _tags_fields(tp)]


def _tags_fields(tp: Any) -> list[tuple[str, set[str]]]:
    """Each member of a tagged union: its tag and its keys ([] for any other type)."""
    if not _is_union(tp):
        return []
    found: list[tuple[str, set[str]]] = []
    for member in get_args(tp):
        if get_origin(member) is Annotated:
            inner, *meta = get_args(member)
            is_model = isinstance(inner, type) and issubclass(inner, BaseModel)
            fields = set(inner.model_fields) if is_model else set()
            found += [(m.tag, fields) for m in meta if isinstance(getattr(m, "tag", None), str)]
    return found


def _tagged(tp: Any, part: str | int) -> Any:
    """The member of a tagged union whose tag is `part`, else None."""
    if not _is_union(tp) or not isinstance(part, str):
        return None
    for member in get_args(tp):
        if get_origin(member) is Annotated:
            inner, *meta = get_args(member)
            if any(getattr(m, "tag", None) == part for m in meta):
                return inner
    return None


def _child(tp: Any, part: str | int) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        info = tp.model_fields.get(part)
        return info.annotation if info is not None else None
    origin, args = get_origin(tp), get_args(tp)
    if origin in (tuple, list) and args and isinstance(part, int):
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None

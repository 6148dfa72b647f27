"""`replace` for the fold's frozen dataclasses, about four times as fast as
`dataclasses.replace`.

The fold makes three or four new objects per event, and `dataclasses.replace`
spends most of its time finding the fields again and going through the frozen
`__init__`. This one writes, once per class, a function that copies every
field, then sets the changed ones (as `dataclasses` itself writes `__init__`).
For a class with slots (the state classes) each field is written through its
slot's own setter, bound in the function: no name lookup per field, which
makes a copy about a third cheaper than `object.__setattr__`; and the changes
come as the one dict they were passed in, not as keyword arguments: a call
with one of 25 keyword-only parameters costs the other 24 defaults. Same
result for classes whose fields are all init fields and that have no
`__post_init__`, which the state classes are; any other dataclass is handed to
`dataclasses.replace`. An unknown field name is a TypeError, as there."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

T = TypeVar("T")
Replacer = Callable[[Any, dict[str, Any]], Any]  # (object, its changes) -> the copy
_REPLACERS: dict[type, Replacer] = {}


def replace(obj: T, /, **changes: Any) -> T:
    make = _REPLACERS.get(type(obj))
    if make is None:
        make = _REPLACERS[type(obj)] = _replacer(type(obj))
    result: T = make(obj, changes)
    return result


def prepare(*classes: type) -> None:
    """Write the copy functions of `classes` now (a worker does, before its threads
    start): writing one costs ~0.2 ms, which the first fold of a process paid."""
    for cls in classes:
        if cls not in _REPLACERS:
            _REPLACERS[cls] = _replacer(cls)


def _replacer(cls: type) -> Replacer:
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        return lambda obj, changes: dataclasses.replace(obj, **changes)
    names = [f.name for f in fields]
    slots = [s for n in names if isinstance(s := getattr(cls, n, None), MemberDescriptorType)]
    if len(slots) == len(names):  # the slots' own __set__, by position and by name
        setters: dict[str, Callable[[Any, Any], None]] = {
            n: s.__set__ for n, s in zip(names, slots, strict=True)
        }
    else:
        setters = {n: _by_name(n) for n in names}
    lines = [f"def make(_new, cls, _setters, {', '.join(f'_set_{i}' for i in range(len(names)))}):"]
    lines.append("    def replace(obj, changes, /):")
    lines.append("        new = _new(cls)")
    lines += [f"        _set_{i}(new, obj.{n})" for i, n in enumerate(names)]
    lines.append("        for name, value in changes.items():")
    lines.append("            try:")
    lines.append("                set_ = _setters[name]")
    lines.append("            except KeyError:")
    lines.append(
        "                raise TypeError(f'{cls.__name__} has no field {name!r}') from None"
    )
    lines.append("            set_(new, value)")
    lines.append("        return new")
    lines.append("    return replace")
    scope: dict[str, Any] = {}
    exec("\n".join(lines), scope)  # the source is made of the class's own field names
    made: Replacer = scope["make"](object.__new__, cls, setters, *setters.values())
    return made


def _by_name(name: str) -> Callable[[Any, Any], None]:
    return lambda obj, value: object.__setattr__(obj, name, value)


def fill(obj: T, /, **changes: Any) -> T:
    """Set fields of a frozen object that the caller has just made (a `replace`) and
    that nobody else holds yet, as its __init__ would have: no second copy. Anything
    already shared is `replace`d. An unknown field name is an AttributeError (slots)."""
    for name, value in changes.items():
        object.__setattr__(obj, name, value)
    return obj

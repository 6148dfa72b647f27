"""Models built on first use (`agentledger.schemas.model_build`): only where the CLI
chooses it, before any model is imported, for a command whose process runs one
thread; a model built late validates as one built at import does. Each case runs
in a fresh interpreter (a class keeps the choice it was made with)."""

from __future__ import annotations

import argparse
import subprocess
import sys

from agentledger.services.entrypoints.cli.main import ONE_THREAD, one_thread
from agentledger.services.entrypoints.cli.parser import parser

LATE = """
from agentledger.schemas.model_build import defer
defer()
from pydantic import ValidationError
from agentledger.events.types import FieldError, ToolCallFailed
assert not FieldError.__pydantic_complete__ and not ToolCallFailed.__pydantic_complete__
error = FieldError(loc="sku", msg="missing")
assert FieldError.__pydantic_complete__ and error.msg == "missing"
assert FieldError.model_validate({"loc": "a", "msg": "b"}) == FieldError(loc="a", msg="b")
assert FieldError(loc="a", msg="b").model_dump() == {"loc": "a", "msg": "b"}
try:
    FieldError.model_validate({"loc": "a", "msg": "b", "extra": 1})
except ValidationError as exc:
    assert "extra" in str(exc), exc
else:
    raise AssertionError("an unknown field was taken")
assert not ToolCallFailed.__pydantic_complete__  # never used: never built
print("ok")
"""
AT_IMPORT = """
from pydantic import BaseModel
import agentledger.events.types, agentledger.schemas.spec, agentledger.schemas.inbox
stack = list(BaseModel.__subclasses__())
while stack:
    c = stack.pop()
    stack.extend(c.__subclasses__())
    if c.__module__.startswith("agentledger.") and not c.__pydantic_complete__:
        raise AssertionError(f"{c.__name__} was not built at import")
print("ok")
"""


def python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_model_made_after_defer_builds_on_first_use_and_refuses_as_before() -> None:
    assert python(LATE) == "ok"


def test_without_defer_every_model_is_built_at_import() -> None:
    """A worker, the intake, a library user: as before."""
    assert python(AT_IMPORT) == "ok"


def test_only_the_commands_running_one_thread_defer() -> None:
    p = parser(raising=True)
    [sub] = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(sub.choices)
    assert ONE_THREAD <= commands
    for threaded in ("run", "workers", "intake", "ui", "archive"):
        assert threaded in commands and threaded not in ONE_THREAD
    assert not one_thread(p.parse_args(["replay", "r-1", "--rerun"]))
    assert one_thread(p.parse_args(["replay", "r-1"]))
    assert not one_thread(p.parse_args(["toolset", "--tools", "m", "--mcp", "servers.yaml"]))
    assert one_thread(p.parse_args(["status", "r-1"]))

"""Reading a run spec file (YAML): every problem becomes InvalidSpec naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from schemas.errors import InvalidSpec
from schemas.spec import RunSpec


def load_spec_file(path: str) -> tuple[RunSpec, str]:
    """The spec and the absolute folder its relative paths resolve from."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise InvalidSpec("", f"cannot read {path!r}: {exc.strerror}") from None
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidSpec("", f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidSpec("", f"{path}: a spec is a mapping, got {type(data).__name__}")
    return parse_spec(data), str(file.resolve().parent)


def parse_spec(data: dict[str, Any]) -> RunSpec:
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidSpec(where, f"{err['msg']}{more}") from None

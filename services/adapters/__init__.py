"""Adapters: every outside effect behind a small port (event store, broker,
locks, ledger, model APIs, tools, the local Redis)."""

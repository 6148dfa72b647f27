"""The idempotency ledger by operation key."""

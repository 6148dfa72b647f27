"""The event store port and its adapters (Redis, in memory)."""

"""Data contracts: the envelope, run specs, tool specs, content blocks, budgets,
inbox messages for outside publishers, and the one msgpack codec."""

"""Model adapters behind one Protocol: scripted (demos, tests), the anthropic
SDK, and replay of a recorded run."""

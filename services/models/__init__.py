"""Model adapters behind one Protocol: scripted (demos, tests), and later the
anthropic SDK and replay of a recorded run."""

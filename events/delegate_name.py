"""The built-in `delegate` tool's name, where rules that must not import the tool's
own module (`agentledger.events.delegate`) read it."""

from __future__ import annotations

DELEGATE = "delegate"

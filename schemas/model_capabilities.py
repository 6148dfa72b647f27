"""The capabilities the core asks of a run's model spec, whichever provider serves it."""

from __future__ import annotations

from typing import Any, ClassVar


class ModelCapabilities:
    """What the core asks of a run's model, whichever provider serves it (the spec is
    asked, never its type): the GenAI conventions' provider name and model id, the
    most output a reply may bring (None: the model says per turn, as the scripted
    one does), the fallback model after a refusal, the prompt cache and its TTL,
    and the provider's server tools as its API defines them. A spec that names its
    own endpoint or credential variable says which (the deployment allows them or
    not: `agentledger.services.handlers.spec_check`), and `problems` are what the
    spec's provider refuses whatever the deployment."""

    provider: ClassVar[str]
    names_model: ClassVar[bool] = False  # whether a request names the model it goes to
    shape: ClassVar[str] = "{…}"  # what its settings look like, for a message about a bad one

    @property
    def model_id(self) -> str:
        return self.provider.rsplit(".", 1)[-1]

    @property
    def output_limit(self) -> int | None:
        return None

    def output_after(self, turns_done: int) -> int | None:
        """The most output the next reply may bring once `turns_done` turns were answered
        (a model whose replies are written down knows it; others say `output_limit`)."""
        return self.output_limit

    @property
    def fallback_model(self) -> str | None:
        return None

    @property
    def caching(self) -> tuple[str, str]:
        return "off", "5m"

    def server_tool_definitions(self) -> tuple[dict[str, Any], ...]:
        return ()

    @property
    def named_endpoint(self) -> str | None:
        """The base URL the spec names for its requests (None: its provider's default)."""
        return None

    @property
    def named_key_variable(self) -> str | None:
        """The worker variable the spec names as its credential (None: its provider's own)."""
        return None

    def problems(self) -> tuple[tuple[str, str], ...]:
        """(field, reason) of what the provider refuses in this spec, whatever the deployment."""
        return ()

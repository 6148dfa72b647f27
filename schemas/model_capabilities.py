"""The capabilities the core asks of a run's model spec, whichever provider serves it."""

from __future__ import annotations

from typing import Any, ClassVar


class ModelCapabilities:
    """What the core asks of a run's model, whichever provider serves it (the spec is
    asked, never its type): the GenAI conventions' provider name and model id, the
    most output a reply may bring (None: the model says per turn, as the scripted
    one does), the fallback model after a refusal, the prompt cache and its TTL,
    and the provider's server tools as its API defines them."""

    provider: ClassVar[str]
    names_model: ClassVar[bool] = False  # whether a request names the model it goes to

    @property
    def model_id(self) -> str:
        return self.provider.rsplit(".", 1)[-1]

    @property
    def output_limit(self) -> int | None:
        return None

    @property
    def fallback_model(self) -> str | None:
        return None

    @property
    def caching(self) -> tuple[str, str]:
        return "off", "5m"

    def server_tool_definitions(self) -> tuple[dict[str, Any], ...]:
        return ()

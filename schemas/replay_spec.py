"""The replay model: a run's model requests answered with the replies another run
recorded (`replay --rerun`, `branch`, `whatif`)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from agentledger.schemas.model_capabilities import ModelCapabilities
from agentledger.schemas.spec_base import Spec as _Spec


class ReplaySettings(_Spec):
    run_id: str = Field(min_length=1, description="the recorded run whose replies are played")
    fallback_model: str | None = Field(
        default=None,
        min_length=1,
        description="the recorded run's fallback model: a replayed refusal goes on as it did",
    )
    stop_at_divergence: bool = Field(
        default=False,
        description="`whatif`: no reply once a call's input or outcome departed from the "
        "recorded run's (its replies no longer apply): the run fails there",
    )


class ReplayModel(ModelCapabilities, _Spec):
    """Answers each model request with the reply another run recorded for that turn."""

    provider: ClassVar[str] = "agentledger.replay"
    shape: ClassVar[str] = "{run_id: …}"
    replay: ReplaySettings

    @property
    def fallback_model(self) -> str | None:
        return self.replay.fallback_model

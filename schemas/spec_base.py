"""The base of every part of a run spec: frozen, and unknown keys refused (a typo
never silently changes what a run does)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agentledger.schemas.model_build import deferred


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())

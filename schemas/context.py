"""What the context view decided when it assembled a model request. Recorded in
`ModelRequested`, so that what the model saw at a turn can be rebuilt from the
log and explained: which turns were shortened or left out, and by how much."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentledger.schemas.model_build import deferred


class ContextDecision(BaseModel):
    """One assembly decision over a range of turns.

    withdrawn:   `items` refused turns left out (the log keeps them), between
                 `first_turn` and `last_turn`; what a person said after one stays
    shortened:   `items` older tool results cut to a preview and a marker
    omitted:     `items` whole turns left out (a tool_use always with its result)
    over_budget: even so the view needs `chars_before` chars; the budget is `chars_after`"""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())
    action: Literal["withdrawn", "shortened", "omitted", "over_budget"]
    first_turn: int = Field(ge=0)
    last_turn: int = Field(ge=0)
    items: int = Field(default=0, ge=0)
    chars_before: int = Field(ge=0)
    chars_after: int = Field(ge=0)

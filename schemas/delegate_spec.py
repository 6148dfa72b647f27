"""`delegate:` in a run spec: the run's model may start child runs through the
built-in `delegate(task, tools, budgets)` tool, within these limits (off unless set).
A child acts for its parent's principal, with at most the tools named here (and
the parent's), its budgets held to what the parent has left, and this setting
with one less level of depth (none at the last level: it cannot delegate)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentledger.schemas.spec_base import Spec


class DelegateSpec(Spec):
    max_depth: int = Field(
        default=1, ge=1, le=5, description="levels of children below this run (1: children only)"
    )
    max_children: int = Field(default=4, ge=1, le=64, description="children the run may start")
    max_at_once: int = Field(default=2, ge=1, le=16, description="children running at once")
    tools: tuple[str, ...] = Field(
        default=(),
        description="tool modules a child may be given (among the run's); none: the run's",
    )
    model: dict[str, Any] | None = Field(
        default=None, description="the children's model, as a run's `model:` (unset: the run's)"
    )
    budgets: dict[str, Any] = Field(
        default_factory=dict, description="each child's default budgets (held to what is left)"
    )

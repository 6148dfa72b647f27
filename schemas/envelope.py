"""The event envelope: the one shape every entry of a run's log has.

`seq` is the run's version (1, 2, 3… with no gaps); `data` is the event itself,
a frozen model whose `type` tag equals the envelope's `type`."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentledger.schemas.ids import EventId, RunId
from agentledger.schemas.model_build import deferred

E = TypeVar("E", bound=BaseModel)


class Envelope(BaseModel, Generic[E]):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())

    id: EventId = Field(min_length=1)
    run_id: RunId = Field(min_length=1)
    seq: int = Field(ge=1)
    type: str = Field(min_length=1)
    at: float = Field(description="seconds since the Unix epoch, UTC, from the writer's clock")
    source: str = Field(description="which service or publisher wrote it")
    causation_id: EventId | None = None
    v: int = Field(default=1, ge=1, description="version of the payload's shape")
    data: E


_ANY = Envelope[Any]  # parametrised once: a subscription costs a cache lookup each time
_FIELDS = frozenset(_ANY.model_fields)
_set = object.__setattr__


def construct(fields: dict[str, Any]) -> Envelope[Any]:
    """`Envelope.model_construct(**fields)` with every field given, in half the time:
    what model_construct does for a model without aliases, extras, private
    attributes or a post-init hook (tests/unit/test_codec.py holds it to that).
    The caller gives every field, in their order, already of their types."""
    made = _ANY.__new__(_ANY)
    _set(made, "__dict__", fields)
    _set(made, "__pydantic_fields_set__", set(_FIELDS))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made

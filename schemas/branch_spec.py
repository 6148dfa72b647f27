"""Where a branch starts: the run it branched from and the turn it departs at."""

from __future__ import annotations

from pydantic import Field

from agentledger.schemas.spec_base import Spec


class Branch(Spec):
    """The run a branch started from (`agentledger branch`) and the turn it departs at;
    the turns before are that run's, taken from its log (nothing runs again)."""

    run_id: str = Field(min_length=1, max_length=200)
    turn: int = Field(ge=1)

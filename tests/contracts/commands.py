"""The commands that outgoing messages carry, read back from the dramatiq message
(its actor and args): what a test sees of what the writer dispatched."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from agentledger.events.commands import (
    Command,
    DriveCall,
    DriveFlow,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    StopChild,
)
from agentledger.services.adapters.store.port import Outgoing

ACTORS: dict[str, Callable[..., Command]] = {
    "request_model": RequestModel,
    "drive_call": DriveCall,
    "resolve_call": ResolveCall,
    "run_acceptance": RunAcceptance,
    "drive_flow": DriveFlow,
    "stop_child": StopChild,
}


def decoded(messages: Sequence[Outgoing]) -> list[Command]:
    return [ACTORS[m["actor_name"]](*m["args"]) for m in (json.loads(o.data) for o in messages)]

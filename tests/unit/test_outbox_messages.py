"""The outbox writes each command as the dramatiq message its pool's actor takes:
the fields `dramatiq.Message(...).encode()` writes, in its order, which the
broker decodes back into the actor's call."""

from __future__ import annotations

import json

import pytest
from dramatiq.message import Message

from agentledger.events.commands import Command, DriveCall, RequestModel, ResolveCall, RunAcceptance
from agentledger.services.adapters.broker.outbox import TENANT, encoded


@pytest.mark.parametrize(
    ("command", "actor", "args"),
    [
        (RequestModel("run-1"), "request_model", ("run-1",)),
        (DriveCall("run-1", "c1"), "drive_call", ("run-1", "c1")),
        (ResolveCall("run-1", "c2"), "resolve_call", ("run-1", "c2")),
        (RunAcceptance("run-1"), "run_acceptance", ("run-1",)),
    ],
)
def test_a_command_is_the_message_dramatiq_would_encode(
    command: Command, actor: str, args: tuple[str, ...]
) -> None:
    data = encoded("model.default.tools", command)
    decoded = Message.decode(data)
    made = Message(queue_name="model.default.tools", actor_name=actor, args=args, kwargs={},
                   options={}, message_id=decoded.message_id,
                   message_timestamp=decoded.message_timestamp)  # fmt: skip

    assert decoded == made
    assert data == made.encode(), "the same bytes, field for field"
    assert list(json.loads(data)) == list(made.asdict()), "in dramatiq's order"


def test_every_message_has_an_id_of_its_own() -> None:
    ids = {Message.decode(encoded("q", RequestModel("run-1"))).message_id for _ in range(100)}

    assert len(ids) == 100


def test_a_runs_tenant_rides_in_the_messages_options_for_the_threads_turns() -> None:
    decoded = Message.decode(encoded("q", RequestModel("run-1"), "shop-1"))

    assert decoded.options == {TENANT: "shop-1"}
    assert decoded.args == ("run-1",)

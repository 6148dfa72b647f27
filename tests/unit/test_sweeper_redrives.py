"""The sweeper's re-drives over the memory adapters, as over Redis
(`tests/integration/test_redrive_lag.py`): a step whose message still waits in
its queue is not queued a second time however many leases pass; once the
message is gone (taken and lost) it is sent again, after each lease."""

from __future__ import annotations

from pathlib import Path

from handlerkit import new_unit, spec

from agentledger.events.commands import RequestModel
from agentledger.services.adapters.broker.outbox import command_key, encoded
from agentledger.services.adapters.store.memory import MemoryOutbox
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.loops.sweeper import sweep_once

DONE = {"end_turn": "done"}


def test_a_step_still_waiting_in_its_queue_is_not_queued_again(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    unit.create("run-a", spec(DONE))  # its request waits: no worker takes it
    lease = unit.app.settings.lease_s

    for _ in range(4):
        unit.clock.advance(lease + 0.1)
        sweep_once(unit.app, [0])

    assert unit.sent == [], "nothing re-sent while the first message waits"
    assert unit.take() == [RequestModel("run-a")]


def test_a_step_whose_message_is_gone_is_sent_again_after_each_lease(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    unit.create("run-a", spec(DONE))
    lease = unit.app.settings.lease_s

    found = []
    for _ in range(3):
        found += unit.take()  # taken by a worker that lost it
        unit.clock.advance(lease + 0.1)
        sweep_once(unit.app, [0])

    assert found + unit.take() == [RequestModel("run-a")] * 4


def test_the_memory_outbox_keys_commands_by_actor_and_arguments_per_stream() -> None:
    outbox = MemoryOutbox()
    a, b = (encoded("model.q.t", RequestModel(r)) for r in ("run-a", "run-b"))
    assert command_key(a) == "request_model\0run-a"
    assert command_key(b"\x00garbage") is None
    assert command_key(b"[1, 2]") is None

    sent = outbox.resend([Outgoing("s1", a), Outgoing("s1", a), Outgoing("s2", a)])
    sent += outbox.resend([Outgoing("s1", b), Outgoing("s1", b"\x00garbage")])

    assert [(m.stream, m.data) for m in sent] == [
        ("s1", a),
        ("s2", a),
        ("s1", b),
        ("s1", b"\x00garbage"),
    ]

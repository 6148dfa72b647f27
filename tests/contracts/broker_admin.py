"""The broker admin contract (`agentledger.services.adapters.broker.admin_port`): one suite
the memory admin passes in the unit tier and the Redis admin on a real
redis-server — queues, live workers and what they hold, dead letters with the
actor and run of their message, re-driving one back to its queue exactly once.

A tier subclasses `BrokerAdminContract` and gives `admin` (a new, empty
adapter) and `pools` (the pools' side: `serve(worker, queue, toolset, pools,
modules)`, `hold(worker, queue, toolset, pool, count)`, `kill(stream, data,
reason=, deliveries=)` returning the dead letter's entry, `queued(stream)`)."""

from __future__ import annotations

from typing import Any

from dramatiq import Message

from agentledger.services.adapters.broker.admin_port import BrokerAdmin

STREAM = ("default", "fp1", "tools", 0)


def message(run_id: str) -> bytes:
    return Message(
        queue_name="tools", actor_name="drive_call", args=(run_id,), kwargs={}, options={}
    ).encode()


class BrokerAdminContract:
    def test_nothing_is_there_in_an_empty_broker(self, admin: BrokerAdmin) -> None:
        assert (admin.queues(), admin.members(), admin.dead_letters()) == ([], [], [])

    def test_live_workers_are_listed_with_their_pools_modules_and_held_messages(
        self, admin: BrokerAdmin, pools: Any
    ) -> None:
        pools.serve("w1", "default", "fp1", ["model", "tools"], ["shop"])
        pools.serve("w2", "billing", "fp2", ["accept"], [])
        pools.hold("w1", "default", "fp1", "tools", 2)

        found = {w.worker: w for w in admin.members()}

        assert admin.queues() == ["billing", "default"]
        assert (found["w1"].queue, found["w1"].toolset, sorted(found["w1"].pools)) == (
            "default",
            "fp1",
            ["model", "tools"],
        )
        assert (found["w1"].modules, found["w1"].in_flight) == (["shop"], 2)
        assert (found["w2"].queue, found["w2"].pools, found["w2"].in_flight) == (
            "billing",
            ["accept"],
            0,
        )

    def test_a_tool_sets_manifest_and_its_pools_live_workers_are_found_by_queue(
        self, admin: BrokerAdmin, pools: Any
    ) -> None:
        pools.serve("w1", "default", "fp1", ["model", "tools"], ["shop"])

        assert admin.manifest("default", "fp1") == {"modules": ["shop"]}
        assert (admin.manifest("default", "fp2"), admin.manifest("other", "fp1")) == (None, None)
        assert (admin.live("default", "fp1", "tools"), admin.live("default", "fp1")) == (
            ["w1"],
            ["w1"],
        )
        assert admin.live("default", "fp1", "accept") == []

    def test_a_dead_letter_says_its_actor_run_reason_and_deliveries_and_its_handle(
        self, admin: BrokerAdmin, pools: Any
    ) -> None:
        pools.serve("w1", "default", "fp1", ["tools"], [])
        entry = pools.kill(STREAM, message("r-1"), reason="too many deliveries", deliveries=3)

        (letter,) = admin.dead_letters()

        assert (letter.actor, letter.run_id, letter.reason, letter.deliveries) == (
            "drive_call",
            "r-1",
            "too many deliveries",
            3,
        )
        assert (letter.handle, letter.entry) == (f"default:fp1:tools:0:{entry}", entry)
        assert admin.dead_letters("billing") == []
        assert admin.dead_letters("default") == [letter]

    def test_an_undecodable_letter_is_shown_not_raised(
        self, admin: BrokerAdmin, pools: Any
    ) -> None:
        pools.serve("w1", "default", "fp1", ["tools"], [])
        pools.kill(STREAM, b"not a message", reason="poison", deliveries=1)

        (letter,) = admin.dead_letters()

        assert (letter.actor, letter.run_id) == ("?", None)

    def test_a_redriven_letter_goes_back_to_its_queue_once(
        self, admin: BrokerAdmin, pools: Any
    ) -> None:
        pools.serve("w1", "default", "fp1", ["tools"], [])
        data = message("r-2")
        entry = pools.kill(STREAM, data, reason="too many deliveries", deliveries=3)

        assert admin.redrive("default", "fp1", "tools", 0, entry) is True
        assert admin.redrive("default", "fp1", "tools", 0, entry) is False
        assert (admin.dead_letters(), pools.queued(STREAM)) == ([], [data])

"""What a CLI publisher learns about the inbox, on a real Redis: whether an intake
that reads its streams is alive (a deployment intake's membership heartbeat, or
the embedded run's intake of that very publisher, on Redis's clock), whether its
entry was taken, the intake's reason when it refused it, and taking back an
entry no intake has read. Entry ids are `partition/publisher/stream id`."""

from __future__ import annotations

import time

import redis

from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import GROUP
from agentledger.services.adapters.inbox.redis_inbox import (
    Liveness,
    intake_liveness,
    rejected_reason,
    taken,
    withdraw,
)
from agentledger.services.keys import Keys

TTL_S = 1.5  # the LIVE look right after the beat must not be later than this on a busy machine


def test_no_intake_is_live_until_one_heartbeats_and_none_once_it_stops(
    client: redis.Redis, keys: Keys
) -> None:
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.NONE
    Membership(client, keys.intake_members(), "host:1:ab", ttl_s=TTL_S).beat()
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.LIVE
    assert intake_liveness(client, keys, ttl_s=TTL_S, publisher="billing") is Liveness.LIVE
    time.sleep(TTL_S + 0.1)
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.NONE


def test_an_embedded_runs_intake_is_live_for_its_own_publisher_only(
    client: redis.Redis, keys: Keys
) -> None:
    Membership(client, keys.intake_members("local-0123456789ab"), "host:2:cd", ttl_s=TTL_S).beat()
    assert (
        intake_liveness(client, keys, ttl_s=TTL_S, publisher="local-0123456789ab") is Liveness.LIVE
    )
    assert intake_liveness(client, keys, ttl_s=TTL_S, publisher="billing") is Liveness.NONE
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.NONE


def test_an_entry_is_taken_once_the_intake_group_read_it(client: redis.Redis, keys: Keys) -> None:
    inbox = keys.inbox(1, "billing")
    client.xgroup_create(inbox, GROUP, id="0", mkstream=True)
    first = client.xadd(inbox, {"message": "{}"}).decode()
    client.xreadgroup(GROUP, "host:1", {inbox: ">"}, count=1)
    second = client.xadd(inbox, {"message": "{}"}).decode()
    assert taken(client, keys, f"1/billing/{first}") and not taken(
        client, keys, f"1/billing/{second}"
    )


def test_only_an_entry_no_intake_read_can_be_withdrawn(client: redis.Redis, keys: Keys) -> None:
    inbox = keys.inbox(2, "billing")
    client.xgroup_create(inbox, GROUP, id="0", mkstream=True)
    first = client.xadd(inbox, {"message": "{}"}).decode()
    client.xreadgroup(GROUP, "host:1", {inbox: ">"}, count=1)
    second = client.xadd(inbox, {"message": "{}"}).decode()
    assert not withdraw(client, keys, f"2/billing/{first}")
    assert withdraw(client, keys, f"2/billing/{second}")
    assert [e.decode() for e, _ in client.xrange(inbox)] == [first]


def test_the_reason_of_a_refused_entry_is_found_by_its_id(client: redis.Redis, keys: Keys) -> None:
    entry = client.xadd(keys.inbox(0, "billing"), {"message": "x"}).decode()
    client.xadd(keys.rejected(0), {"entry_id": f"0/ledger/{entry}", "reason": "another's, same id"})
    client.xadd(
        keys.rejected(0), {"entry_id": f"0/billing/{entry}", "reason": "message is not JSON"}
    )
    assert rejected_reason(client, keys, f"0/billing/{entry}") == "message is not JSON"
    assert rejected_reason(client, keys, "0/billing/9-9") is None

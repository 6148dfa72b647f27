"""What a CLI publisher learns about the inbox, on a real Redis: whether an intake
is alive (its membership heartbeat, on Redis's clock), whether its entry was
taken, the intake's reason when it refused it, and taking back an entry no
intake has read."""

from __future__ import annotations

import time

import redis

from services.adapters.broker.membership import Membership
from services.entrypoints.cli.inbox_watch import (
    Liveness,
    intake_liveness,
    rejected_reason,
    taken,
    withdraw,
)
from services.keys import Keys
from services.loops.intake import GROUP

TTL_S = 1.5  # the LIVE look right after the beat must not be later than this on a busy machine


def test_no_intake_is_live_until_one_heartbeats_and_none_once_it_stops(
    client: redis.Redis, keys: Keys
) -> None:
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.NONE
    Membership(client, keys.members("intake"), "host:1:ab", ttl_s=TTL_S).beat()
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.LIVE
    time.sleep(TTL_S + 0.1)
    assert intake_liveness(client, keys, ttl_s=TTL_S) is Liveness.NONE


def test_an_entry_is_taken_once_the_intake_group_read_it(client: redis.Redis, keys: Keys) -> None:
    inbox = keys.inbox(1)
    client.xgroup_create(inbox, GROUP, id="0", mkstream=True)
    first = client.xadd(inbox, {"message": "{}"}).decode()
    client.xreadgroup(GROUP, "host:1", {inbox: ">"}, count=1)
    second = client.xadd(inbox, {"message": "{}"}).decode()
    assert taken(client, keys, f"1/{first}") and not taken(client, keys, f"1/{second}")


def test_only_an_entry_no_intake_read_can_be_withdrawn(client: redis.Redis, keys: Keys) -> None:
    inbox = keys.inbox(2)
    client.xgroup_create(inbox, GROUP, id="0", mkstream=True)
    first = client.xadd(inbox, {"message": "{}"}).decode()
    client.xreadgroup(GROUP, "host:1", {inbox: ">"}, count=1)
    second = client.xadd(inbox, {"message": "{}"}).decode()
    assert not withdraw(client, keys, f"2/{first}")
    assert withdraw(client, keys, f"2/{second}")
    assert [e.decode() for e, _ in client.xrange(inbox)] == [first]


def test_the_reason_of_a_refused_entry_is_found_by_its_id(client: redis.Redis, keys: Keys) -> None:
    entry = client.xadd(keys.inbox(0), {"message": "x"}).decode()
    client.xadd(keys.rejected(0), {"entry_id": "0/0-1", "reason": "another"})
    client.xadd(keys.rejected(0), {"entry_id": f"0/{entry}", "reason": "message is not JSON"})
    assert rejected_reason(client, keys, f"0/{entry}") == "message is not JSON"
    assert rejected_reason(client, keys, "0/9-9") is None

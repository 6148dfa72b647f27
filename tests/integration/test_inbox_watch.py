"""What the CLI judges about the inbox from its consumer group, on a real
Redis: whether an intake reads it, and taking back an entry none has read."""

from __future__ import annotations

import time

import redis

from services.entrypoints.cli.inbox_watch import (
    Liveness,
    intake_liveness,
    rejected_reason,
    taken,
    withdraw,
)
from services.keys import Keys
from services.loops.intake import GROUP


def now_ms() -> int:
    return int(time.time() * 1000)


def test_no_inbox_or_no_group_means_no_intake(client: redis.Redis, keys: Keys) -> None:
    assert intake_liveness(client, keys, now_ms=now_ms()) is Liveness.NONE
    client.xadd(keys.inbox, {"message": "{}"})
    assert intake_liveness(client, keys, now_ms=now_ms()) is Liveness.NONE


def test_an_intake_that_just_read_is_live(client: redis.Redis, keys: Keys) -> None:
    client.xgroup_create(keys.inbox, GROUP, id="0", mkstream=True)
    client.xadd(keys.inbox, {"message": "{}"})
    client.xreadgroup(GROUP, "host:1", {keys.inbox: ">"}, count=1)
    assert intake_liveness(client, keys, now_ms=now_ms()) is Liveness.LIVE


def test_an_entry_unread_for_long_means_no_intake(client: redis.Redis, keys: Keys) -> None:
    client.xgroup_create(keys.inbox, GROUP, id="0", mkstream=True)
    old = now_ms() - 60_000
    client.xadd(keys.inbox, {"message": "{}"}, id=f"{old}-0")
    assert intake_liveness(client, keys, now_ms=now_ms()) is Liveness.NONE
    # a fresh unread entry with nobody having read for long: cannot tell yet
    client.xgroup_setid(keys.inbox, GROUP, id=f"{old}-0")
    client.xadd(keys.inbox, {"message": "{}"})
    assert intake_liveness(client, keys, now_ms=now_ms()) is Liveness.UNKNOWN


def test_an_unread_entry_is_withdrawn_and_a_read_one_is_not(client: redis.Redis, keys: Keys) -> None:
    client.xgroup_create(keys.inbox, GROUP, id="0", mkstream=True)
    first = client.xadd(keys.inbox, {"message": "{}"}).decode()
    client.xreadgroup(GROUP, "host:1", {keys.inbox: ">"}, count=1)
    second = client.xadd(keys.inbox, {"message": "{}"}).decode()

    assert taken(client, keys, first) and not taken(client, keys, second)
    assert not withdraw(client, keys, first)
    assert withdraw(client, keys, second)
    assert [e.decode() for e, _ in client.xrange(keys.inbox)] == [first]


def test_the_reason_of_a_rejection_is_found_by_its_entry(client: redis.Redis, keys: Keys) -> None:
    entry = client.xadd(keys.inbox, {"message": "x"}).decode()
    client.xadd(keys.rejected, {"entry_id": "0-1", "reason": "another"})
    client.xadd(keys.rejected, {"entry_id": entry, "reason": "message is not JSON"})
    assert rejected_reason(client, keys, entry) == "message is not JSON"
    assert rejected_reason(client, keys, "1-1") is None

"""The text of a streaming reply on a real Redis: one short-lived string under the
run's shard, read back as put; a value that is not ours reads as nothing; a Redis
that cannot take it never fails the model call."""

from __future__ import annotations

import redis

from agentledger.services.adapters.live_text import TTL_S, RedisLiveText, Said
from agentledger.services.keys import Keys


def test_the_text_so_far_reads_back_and_expires(client: redis.Redis, keys: Keys) -> None:
    live = RedisLiveText(client, keys)
    assert live.get("r-1.s3") is None
    live.put("r-1.s3", Said(2, 1, "There are 42"))
    assert live.get("r-1.s3") == Said(2, 1, "There are 42")
    key = keys.live_text("r-1.s3")
    assert f":{{{keys.shard('r-1.s3')}}}:" in key  # under the run's shard (a cluster's slot)
    assert 0 < client.pttl(key) <= TTL_S * 1000
    client.set(key, b"not json")
    assert live.get("r-1.s3") is None


def test_a_redis_that_cannot_take_it_does_not_fail_the_reply(keys: Keys) -> None:
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    RedisLiveText(gone, keys).put("r-1.s3", Said(1, 1, "text"))  # logged, not raised

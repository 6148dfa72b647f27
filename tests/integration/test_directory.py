"""The directory of tool sets on a real Redis: a tool set's manifest is read once
and kept (its fingerprint names the code it is made from), a tool set nobody
registered is asked for again each time, so one registered later is found."""

from __future__ import annotations

import redis

from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.keys import Keys

MANIFEST = {"modules": ["m"], "tools": [{"name": "t", "read_only": True, "scope": None}]}


def test_a_manifest_found_is_kept_and_one_not_found_is_asked_again(
    client: redis.Redis, keys: Keys
) -> None:
    directory = Directory(client, keys, member_ttl_s=2.0)
    assert directory.manifest("q", "fp-1") is None

    Directory(client, keys, member_ttl_s=2.0).register("q", "fp-1", MANIFEST)  # another worker
    assert directory.manifest("q", "fp-1") == MANIFEST

    client.hdel(keys.toolsets("q"), "fp-1")
    assert directory.manifest("q", "fp-1") == MANIFEST, "kept: no round trip per run"
    assert directory.manifest("q", "fp-2") is None

"""`status` of a run that does not exist says why when the intake refused its
request: the newest refusals of the run's inbox partition are searched, a page at
a time, and never more than a bounded number of them or bytes (a refusal keeps at
most 4 kB, and a hostile publisher's flood must still not make `status` read
without end). The publisher named is the stream's, who really wrote the entry."""

from __future__ import annotations

import pytest
import redis

from agentledger.services.adapters.inbox import redis_inbox
from agentledger.services.adapters.inbox.publishing import partition_of
from agentledger.services.adapters.inbox.redis_inbox import refusal_of_run
from agentledger.services.keys import Keys

RUN = "r-0123456789abcdef.s1"


def refuse(client: redis.Redis, keys: Keys, run_id: str, reason: str, *, pad: int = 0) -> None:
    message = f'{{"type":"RunRequested","run_id":"{run_id}"}}'.encode() + b" " * pad
    stream = keys.rejected(partition_of(RUN, keys.inbox_partitions))
    client.xadd(stream, {"entry_id": "0/billing-svc/1-0", "reason": reason, "field:message": message,
                         "publisher": "billing-svc", "field:publisher": "claimed"})  # fmt: skip


def test_the_newest_refusal_naming_the_run_is_found_pages_down(
    client: redis.Redis, keys: Keys
) -> None:
    refuse(client, keys, RUN, "invalid spec: no tool 'x'")
    for _ in range(3 * redis_inbox.REFUSALS_PAGE + 1):  # newer refusals of other runs
        refuse(client, keys, "r-ffffffffffffffff.s2", "bad signature")
    assert refusal_of_run(client, keys, RUN) == ("invalid spec: no tool 'x'", "billing-svc")
    assert refusal_of_run(client, keys, "r-1111111111111111.s3") is None


def test_the_search_stops_at_its_byte_budget(
    client: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_inbox, "REFUSALS_MAX_BYTES", 50_000)
    refuse(client, keys, RUN, "too old to be looked at")
    for _ in range(2 * redis_inbox.REFUSALS_PAGE):  # 200 x 10 kB: past the budget
        refuse(client, keys, "r-ffffffffffffffff.s2", "bad signature", pad=10_000)
    assert refusal_of_run(client, keys, RUN) is None
    monkeypatch.setattr(redis_inbox, "REFUSALS_MAX_BYTES", 4 << 20)
    assert refusal_of_run(client, keys, RUN) == ("too old to be looked at", "billing-svc")

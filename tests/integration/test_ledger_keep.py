"""The idempotency ledger forgets a done operation after its keep time, and a spec
that sets a sampling parameter the SDK refuses is refused before anything runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from agentledger.schemas.errors import InvalidSpec
from agentledger.services.adapters.ledger.redis_ledger import RedisLedger
from agentledger.services.entrypoints.cli.spec_file import parse_spec
from agentledger.services.handlers.spec_check import check_spec
from agentledger.services.keys import Keys


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    p = f"t-{uuid.uuid4().hex[:10]}"
    yield p
    for key in client.scan_iter(match=f"{p}*"):
        client.delete(key)


def test_a_done_operation_is_remembered_for_its_keep_time_then_forgotten(
    client: redis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 8)
    ledger = RedisLedger(client, keys, keep_s=60)
    assert ledger.begin("op:1", "req", "run/c1/1", now=1.0).action == "run"
    ledger.finish("op:1", "req", "run/c1/1", {"ok": True}, now=2.0)
    key = keys.ledger("op:1")
    assert 0 < client.ttl(key) <= 60
    assert ledger.begin("op:1", "req", "run/c2/1", now=3.0).action == "replay"
    client.delete(key)  # what the expiry does
    assert ledger.begin("op:1", "req", "run/c3/1", now=4.0).action == "run"


def test_a_pending_operation_never_expires(client: redis.Redis, prefix: str) -> None:
    keys = Keys(prefix, 8)
    ledger = RedisLedger(client, keys, keep_s=60)
    ledger.begin("op:2", "req", "run/c1/1", now=1.0)
    assert client.ttl(keys.ledger("op:2")) == -1  # an unknown outcome is not forgotten


def test_a_temperature_in_an_anthropic_spec_is_refused_naming_the_field() -> None:
    spec = parse_spec(
        {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"anthropic": {"model": "claude-sonnet-4-5", "temperature": 0.2}},
        }
    )
    with pytest.raises(InvalidSpec) as err:
        check_spec(spec, None)
    assert err.value.field == "model.anthropic.temperature"


def test_a_ledger_key_is_a_digest_that_names_no_argument(client: redis.Redis, prefix: str) -> None:
    keys = Keys(prefix, 8)
    key = keys.ledger("pay:card-4111-1111-1111-1111")
    assert "4111" not in key and "pay" not in key.removeprefix(prefix)

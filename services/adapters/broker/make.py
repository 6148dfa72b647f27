"""The dramatiq broker the worker pools talk over, chosen by `Settings.broker`:
"streams" (ours, on Redis streams: `services.adapters.broker.streams_broker`) or "redis"
(dramatiq's stock Redis broker, kept for comparison). Both live on the same
Redis, namespaced under the key prefix. Messages carry ids only."""

from __future__ import annotations

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from services.adapters.broker.streams_broker import StreamsBroker
from services.errors import ConfigError
from services.keys import Keys
from services.settings import Settings


def make_broker(client: redis.Redis, keys: Keys, settings: Settings) -> dramatiq.Broker:
    broker: dramatiq.Broker
    match settings.broker:
        case "streams":
            broker = StreamsBroker(
                client,
                keys,
                claim_idle_ms=int(settings.broker_claim_idle_s * 1000),
                max_deliveries=settings.broker_max_deliveries,
            )
        case "redis":
            broker = RedisBroker(client=client, namespace=keys.dramatiq_namespace)
        case other:
            raise ConfigError("AGENTLEDGER_BROKER", f"unknown broker {other!r}")
    dramatiq.set_broker(broker)
    return broker

"""The dramatiq broker the worker pools talk over: dramatiq's Redis broker on
the same Redis, namespaced under the key prefix. Messages carry ids only."""

from __future__ import annotations

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from services.keys import Keys


def make_broker(client: redis.Redis, keys: Keys) -> dramatiq.Broker:
    broker = RedisBroker(client=client, namespace=keys.dramatiq_namespace)
    dramatiq.set_broker(broker)
    return broker

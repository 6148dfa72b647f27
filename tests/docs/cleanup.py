"""A documentation session's keys deleted when it is done (SCAN + DEL of its own
prefix: a shared server is never flushed)."""

from __future__ import annotations

import redis


def delete_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        batch = []
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
    except redis.ConnectionError:
        pass  # a private server that is gone took its keys with it
    finally:
        client.close()

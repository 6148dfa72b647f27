"""The inbox on Redis (`port.Inbox`): `RedisInbox` publishes (`publishing`) and
answers what a publisher can learn about the inbox: whether an intake is
reading its streams (`intake_liveness`, the one place that judges it: the
membership heartbeats of the deployment's intakes and of the embedded run's
intake of that publisher), whether an entry was taken, what the intake said
about it, a run's request still waiting in the inbox (`request_waiting`: the
run does not exist yet), and taking back an entry no intake has read (so a
message nobody took never acts later by surprise). Entry ids are
`partition/publisher/stream id`, as `publish` returns them."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import redis

from agentledger.schemas.inbox import Control, RunRequested
from agentledger.services.adapters.inbox.port import Liveness, WaitingRequest
from agentledger.services.adapters.inbox.publishing import GROUP, partition_of, publish
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.errors import ConfigError
from agentledger.services.keys import Keys

# what `status` searches of the newest refusals in a run's partition: a refusal keeps at
# most 4 kB (`agentledger.services.loops.rejections`), so a page of 100 is at most ~400 kB
REFUSALS_SEARCHED = 2000
REFUSALS_PAGE = 100
REFUSALS_MAX_BYTES = 8 << 20
# what `status` searches of each publisher's stream of a run's partition for its request:
# the newest entries (a request just published is among them; the intake deletes each
# entry it has handled, so a stream holds only what waits)
REQUESTS_SEARCHED = 100

_WITHDRAW = files("agentledger.services.adapters.inbox").joinpath("withdraw.lua").read_text()


def intake_liveness(
    client: redis.Redis, keys: Keys, *, ttl_s: float, publisher: str | None = None
) -> Liveness:
    """Live when some deployment intake (or an embedded intake of `publisher`)
    heartbeated within `ttl_s` (Redis's own clock)."""
    now_s, now_us = client.time()
    now_ms = now_s * 1000 + now_us // 1000
    sets = [keys.intake_members(), *([keys.intake_members(publisher)] if publisher else [])]
    with client.pipeline(transaction=False) as pipe:
        for members in sets:
            pipe.zrangebyscore(members, now_ms - ttl_s * 1000, "+inf")
        live = any(pipe.execute())
    return Liveness.LIVE if live else Liveness.NONE


def taken(client: redis.Redis, keys: Keys, entry_id: str) -> bool:
    """The intake group has read the entry (or it is gone)."""
    part, publisher, stream_id = _split(entry_id)
    for group in client.xinfo_groups(keys.inbox(part, publisher)):
        if group["name"].decode() == GROUP:
            return _id(group["last-delivered-id"].decode()) >= _id(stream_id)
    return False


def withdraw(client: redis.Redis, keys: Keys, entry_id: str) -> bool:
    """Delete the entry if no intake has read it yet; True when it was deleted."""
    part, publisher, stream_id = _split(entry_id)
    return bool(client.eval(_WITHDRAW, 1, keys.inbox(part, publisher), GROUP, stream_id))


def rejected_reason(client: redis.Redis, keys: Keys, entry_id: str) -> str | None:
    """Why the intake refused the entry, if it did (its rejection comes after it: a
    stream id of another stream, so the search starts a little before, in time)."""
    part, _, stream_id = _split(entry_id)
    ms, _ = _id(stream_id)
    rejected: Any = client.xrange(keys.rejected(part), min=f"{max(0, ms - 1000)}-0", count=1000)
    for _, fields in rejected:
        if fields.get(b"entry_id", b"").decode() == entry_id:
            return str(fields.get(b"reason", b"").decode())
    return None


def refusal_of_run(client: redis.Redis, keys: Keys, run_id: str) -> tuple[str, str] | None:
    """The newest refusal of an inbox entry that named `run_id` (what the intake said,
    and the publisher whose stream held it), among the newest of its partition: a
    run whose request was refused never exists, and this says why. Requests
    published by `submit` and `run` go to the partition of their run id."""
    stream = keys.rejected(partition_of(run_id, keys.inbox_partitions))
    needle = f'"run_id":"{run_id}"'.encode()
    searched, read, before = 0, 0, "+"
    while searched < REFUSALS_SEARCHED and read < REFUSALS_MAX_BYTES:
        page: Any = client.xrevrange(stream, max=before, count=REFUSALS_PAGE)
        for entry_id, fields in page:
            if needle in fields.get(b"field:message", b""):
                publisher = fields.get(b"publisher", b"?").decode(errors="replace")
                return fields.get(b"reason", b"").decode(errors="replace"), publisher
            read += sum(len(v) for v in fields.values())
            before = _just_before(entry_id.decode())  # the next page starts below it
        searched += len(page)
        if len(page) < REFUSALS_PAGE:
            return None
    return None


def request_waiting(
    client: redis.Redis, keys: Keys, run_id: str, publishers_path: str
) -> WaitingRequest | None:
    """The request for `run_id` waiting in the inbox stream of a publisher of the
    publishers file at `publishers_path` (requests go to the partition of their run
    id), if one is there."""
    try:
        names = sorted(publishers_file.read(publishers_path).publishers)
    except ConfigError:  # a broken file: no request could have been signed with it
        return None
    if not names:
        return None
    part = partition_of(run_id, keys.inbox_partitions)
    now_s, now_us = client.time()
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.xrevrange(keys.inbox(part, name), count=REQUESTS_SEARCHED)
        pages: list[Any] = pipe.execute()
    for name, page in zip(names, pages, strict=True):
        for stream_id, fields in page:
            if _requests(fields.get(b"message", b""), run_id):
                entry = f"{part}/{name}/{stream_id.decode()}"
                ms, _ = _id(stream_id.decode())
                age_s = max(0.0, (now_s * 1000 + now_us // 1000 - ms) / 1000)
                return WaitingRequest(run_id, name, entry, taken(client, keys, entry), age_s)
    return None


def _requests(message: bytes, run_id: str) -> bool:
    """The inbox message is a RunRequested for `run_id` (parsed only when it names it)."""
    if run_id.encode() not in message or b"RunRequested" not in message:
        return False
    try:
        data = json.loads(message)
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get("type") == "RunRequested"
        and data.get("run_id") == run_id
    )


def _just_before(stream_id: str) -> str:
    """The greatest stream id below this one (an exclusive bound before Redis 6.2)."""
    ms, seq = _id(stream_id)
    return f"{ms}-{seq - 1}" if seq > 0 else f"{ms - 1}-{2**64 - 1}"


def _split(entry_id: str) -> tuple[int, str, str]:
    part, publisher, stream_id = entry_id.split("/", 2)
    return int(part), publisher, stream_id


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def newest(client: redis.Redis, keys: Keys, publisher: str) -> list[str]:
    """The newest entry of each of the publisher's inbox streams (none: nothing waits)."""
    found: list[str] = []
    for part in range(keys.inbox_partitions):
        last: Any = client.xrevrange(keys.inbox(part, publisher), count=1)
        if last:
            found.append(f"{part}/{publisher}/{last[0][0].decode()}")
    return found


def waiting(client: redis.Redis, keys: Keys, entry_id: str) -> bool:
    """The entry, or one published before it, is still in its stream (the intake
    deletes each entry it has handled)."""
    part, publisher, stream_id = _split(entry_id)
    return bool(client.xrange(keys.inbox(part, publisher), "-", stream_id, count=1))


class RedisInbox:
    """The inbox port on one Redis (or cluster) and key prefix."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._r = client
        self._keys = keys

    def publish(self, message: RunRequested | Control, *, signer: Signer) -> str:
        return publish(self._r, self._keys, message, signer=signer)

    def withdraw(self, entry_id: str) -> bool:
        return withdraw(self._r, self._keys, entry_id)

    def taken(self, entry_id: str) -> bool:
        return taken(self._r, self._keys, entry_id)

    def waiting(self, entry_id: str) -> bool:
        return waiting(self._r, self._keys, entry_id)

    def newest(self, publisher: str) -> list[str]:
        return newest(self._r, self._keys, publisher)

    def rejected_reason(self, entry_id: str) -> str | None:
        return rejected_reason(self._r, self._keys, entry_id)

    def refusal_of_run(self, run_id: str) -> tuple[str, str] | None:
        return refusal_of_run(self._r, self._keys, run_id)

    def request_waiting(self, run_id: str, publishers_path: str) -> WaitingRequest | None:
        return request_waiting(self._r, self._keys, run_id, publishers_path)

    def intake_liveness(self, *, ttl_s: float, publisher: str | None = None) -> Liveness:
        return intake_liveness(self._r, self._keys, ttl_s=ttl_s, publisher=publisher)

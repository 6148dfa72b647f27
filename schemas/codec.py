"""The one msgpack codec. Only this module calls msgpack.

Payload types come from a `type -> model` table handed in by the caller (the
core's event table), never from class paths stored in data. Old payload
shapes are upgraded by small pure functions keyed by (type, v). Every decoding
failure becomes `InvalidEvent`, naming the field and keeping the raw bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgpack
from pydantic import BaseModel, ValidationError

from agentledger.schemas.envelope import Envelope, construct
from agentledger.schemas.errors import InvalidEvent

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_HEADER: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "run_id": (str,),
    "seq": (int,),
    "type": (str,),
    "at": (float, int),
    "source": (str,),
    "causation_id": (str, type(None)),
    "v": (int,),
}
_KNOWN = frozenset(_HEADER) | {"data"}
_MISSING = object()


class EventCodec:
    def __init__(
        self,
        table: Mapping[str, type[BaseModel]],
        *,
        upcasters: Mapping[tuple[str, int], Upcaster] | None = None,
        current_version: Mapping[str, int] | None = None,
    ):
        self._table = dict(table)
        self._upcasters = dict(upcasters or {})
        self._current = dict(current_version or {})

    def encode(self, envelope: Envelope[Any]) -> bytes:
        if envelope.type not in self._table:
            raise InvalidEvent(f"unknown event type {envelope.type!r}", field="type")
        head = {k: getattr(envelope, k) for k in _HEADER}
        head["data"] = envelope.data.model_dump(mode="json")
        if envelope.data.type != envelope.type:
            raise InvalidEvent(f"payload is a {envelope.data.type!r}", field="type")
        return pack(head)

    def decode(self, raw: bytes) -> Envelope[Any]:
        try:
            obj = msgpack.unpackb(raw, raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types
            raise InvalidEvent(f"not msgpack: {exc}", raw=raw) from exc
        if not isinstance(obj, dict):
            raise InvalidEvent(f"expected a map, got {type(obj).__name__}", raw=raw)
        return self.from_mapping(obj, raw=raw)

    def from_mapping(self, obj: Mapping[str, Any], *, raw: bytes | None = None) -> Envelope[Any]:
        """Build an envelope from a decoded mapping (also used for JSON publishers)."""
        for name, kinds in _HEADER.items():
            if type(obj.get(name, _MISSING)) not in kinds:  # type(True) is bool, never int
                _check_field(obj, name, kinds, raw)  # missing, or of a subclass: rare
        if not _KNOWN.issuperset(obj):
            extra = sorted(set(obj) - _KNOWN)
            raise InvalidEvent(f"unexpected fields {extra}", field=extra[0], raw=raw)
        etype, version = obj["type"], obj.get("v", 1)
        model = self._table.get(etype)
        if model is None:
            raise InvalidEvent(f"unknown event type {etype!r}", field="type", raw=raw)
        data = obj.get("data")
        if not isinstance(data, dict):
            raise InvalidEvent("missing or not a map", field="data", raw=raw)
        if version != self._current.get(etype, 1):
            data, version = self._upcast(etype, version, data, raw)
        try:
            event = model.__pydantic_validator__.validate_python(data)  # model_validate's own call
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in ("data", *err["loc"]))
            raise InvalidEvent(err["msg"], field=where, raw=raw) from exc
        if obj["seq"] < 1 or not (obj["id"] and obj["run_id"] and etype):
            raise _out_of_range(obj, raw)
        return _envelope(
            {
                "id": obj["id"],
                "run_id": obj["run_id"],
                "seq": obj["seq"],
                "type": etype,
                "at": float(obj["at"]),
                "source": obj["source"],
                "causation_id": obj.get("causation_id"),
                "v": version,
                "data": event,
            }
        )

    def _upcast(
        self, etype: str, v: int, data: dict[str, Any], raw: bytes | None
    ) -> tuple[dict[str, Any], int]:
        target = self._current.get(etype, 1)
        if v > target:
            raise InvalidEvent(
                f"version {v} is newer than this reader knows ({target})", field="v", raw=raw
            )
        while v < target:
            step = self._upcasters.get((etype, v))
            if step is None:
                raise InvalidEvent(f"no upcaster from version {v} of {etype!r}", field="v", raw=raw)
            data, v = step(data), v + 1
        return data, v


_envelope = construct  # every field given (checked above)


def _check_field(
    obj: Mapping[str, Any], name: str, kinds: tuple[type, ...], raw: bytes | None
) -> None:
    """Raise when a header field whose type is not exactly one of `kinds` is missing
    (and required) or of another type; pass an optional field left out."""
    value = obj.get(name, _MISSING)
    if value is _MISSING:
        if name in ("causation_id", "v"):
            return
        raise InvalidEvent("missing", field=name, raw=raw)
    if not isinstance(value, kinds) or isinstance(value, bool):
        raise InvalidEvent(f"wrong type {type(value).__name__}", field=name, raw=raw)


def _out_of_range(obj: Mapping[str, Any], raw: bytes | None) -> InvalidEvent:
    """What is wrong with a header whose seq is below 1 or whose id, run id or type is
    empty: the first of them."""
    if obj["seq"] < 1:
        return InvalidEvent("must be >= 1", field="seq", raw=raw)
    empty = next(name for name in ("id", "run_id", "type") if not obj[name])
    return InvalidEvent("must not be empty", field=empty, raw=raw)


_DATA_KEY = b"\xa4data"  # the key "data" as msgpack writes it (a fixstr of 4)


def payload_at(raw: bytes) -> int:
    """Where the payload of an envelope `encode` packed starts: its `data` key, the
    map's last (0 when not found). Were a header value spelled "data", the offset
    found is that value's, before the payload: what follows it still holds all of it."""
    return max(raw.find(_DATA_KEY), 0)


def pack(obj: Any) -> bytes:
    """msgpack; a value it cannot hold (an integer beyond 64 bits) is InvalidEvent."""
    try:
        packed: bytes = msgpack.packb(obj, use_bin_type=True)
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidEvent(f"cannot be packed: {exc}") from exc
    return packed


def unpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False)
    except Exception as exc:
        raise InvalidEvent(f"not msgpack: {exc}", raw=raw) from exc

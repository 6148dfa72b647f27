"""Errors of the contract layer. Each carries what is wrong; decoding errors
keep the raw bytes so a bad entry can be inspected and moved aside."""

from __future__ import annotations


class SchemaError(Exception):
    """Base of the contract layer's errors. Retrying never helps: the data is wrong."""

    retryable = False


class InvalidEvent(SchemaError):
    """An encoded event that cannot be decoded: names the field and keeps the bytes."""

    def __init__(self, reason: str, *, field: str | None = None, raw: bytes | None = None):
        self.reason = reason
        self.field = field
        self.raw = raw
        where = f" (field {field!r})" if field else ""
        super().__init__(f"invalid event{where}: {reason}")


class InvalidSpec(SchemaError):
    """A run spec that cannot be accepted; `field` is a dotted path into the spec."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)

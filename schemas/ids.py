"""Identifier types. Ids are made at the edges (services/) and passed in; the
pure core never invents one."""

from typing import NewType

RunId = NewType("RunId", str)
CallId = NewType("CallId", str)
EventId = NewType("EventId", str)

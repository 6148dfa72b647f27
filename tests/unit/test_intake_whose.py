"""Whose an inbox entry is, read only to take a window's run requests in turn
(`agentledger.services.loops.intake_entries.whose`): a request is its stream's
publisher's and its spec's tenant's, a control stands where it is, an entry that
cannot be read is its publisher's alone. A publisher that names another
publisher's tenant takes turns with its own requests only (the attack)."""

from __future__ import annotations

import json

from agentledger.events.admission import window_order
from agentledger.services.loops.intake_entries import Entry, whose

MAX = 1 << 20


def entry(publisher: str, message: object) -> Entry:
    raw = message if isinstance(message, bytes) else json.dumps(message).encode()
    return Entry(0, publisher, b"1-0", {b"message": raw})


def request(tenant: str) -> dict[str, object]:
    return {"type": "RunRequested", "spec": {"principal": {"id": "u", "tenant": tenant}}}


def test_a_request_is_its_publishers_and_its_tenants() -> None:
    assert whose(entry("pa", request("shop-1")), MAX) == (False, "pa\0shop-1")


def test_a_control_stands_where_it_is() -> None:
    assert whose(entry("pa", {"type": "RunCancelRequested", "run_id": "r"}), MAX) == (True, "pa")


def test_an_entry_that_cannot_be_read_is_its_publishers_alone() -> None:
    for garbage in (b"not json", b"[1, 2]", {"type": "RunRequested"}, b"\xff\xfe"):
        assert whose(entry("pa", garbage), MAX) == (False, "pa\0")
    deep = b"[" * 5000 + b"]" * 5000
    assert whose(entry("pa", deep), MAX) == (False, "pa\0")
    assert whose(entry("pa", request("x")), 10) == (False, "pa\0"), "over the size: not read"


def test_a_publisher_naming_another_tenant_does_not_share_that_tenants_turn() -> None:
    window = [entry("mallory", request("b")) for _ in range(50)]
    window += [entry("pa", request("a")) for _ in range(50)]
    window.append(entry("pb", request("b")))  # tenant b's own request, through its publisher

    order = window_order([whose(e, MAX) for e in window])

    assert order.index(100) == 2, "b's request is third: one of mallory's, one of a's, then b's"

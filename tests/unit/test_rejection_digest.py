"""What the rejected stream keeps of a refused inbox entry (`agentledger.services.loops.rejections`):
at most 4 kB in all whatever the entry holds — any number of fields, any names,
any sizes — at most 16 original fields, each one cut said with its full size and
sha256, and the start of the `message` (where a request's run id is) kept first."""

from __future__ import annotations

import hashlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger.services.loops.rejections import MAX_BYTES, MAX_FIELDS, digest

fields_st = st.dictionaries(
    st.binary(min_size=1, max_size=300),
    st.one_of(st.binary(max_size=64), st.binary(min_size=5000, max_size=20_000)),
    max_size=40,
)


def size(d: dict[str, bytes]) -> int:
    return sum(len(k.encode()) + len(v) for k, v in d.items())


# large entries on purpose (the caps are what is tested): generating them may be slow on a
# busy machine, which is no fault of the digest
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(fields=fields_st, reason=st.text(max_size=3000), message=st.binary(max_size=50_000))
def test_a_rejection_keeps_at_most_4_kB_and_16_fields_whatever_the_entry_holds(
    fields: dict[bytes, bytes], reason: str, message: bytes
) -> None:
    out = digest("0/p/1-0", "p", reason, {**fields, b"message": message})
    assert size(out) <= MAX_BYTES
    assert len([k for k in out if k.startswith("field:")]) <= MAX_FIELDS


def test_a_small_entry_is_kept_whole_with_who_wrote_it() -> None:
    entry = {b"message": b'{"run_id":"r-1"}', b"publisher": b"billing", b"signature": b"ab" * 32}
    out = digest("2/billing/5-0", "billing", "bad signature: no", entry)
    assert out["entry_id"] == b"2/billing/5-0" and out["publisher"] == b"billing"
    assert {k: v for k, v in out.items() if k.startswith("field:")} == {
        f"field:{k.decode()}": v for k, v in entry.items()
    }
    assert not [k for k in out if k.startswith(("size:", "sha256:"))]


def test_a_huge_message_keeps_its_start_its_size_and_its_sha256() -> None:
    message = b'{"type":"RunRequested","run_id":"r-abc.s1",' + b"x" * (8 << 20)
    out = digest("0/p/1-0", "p", "too big", {b"message": message, b"publisher": b"p"})
    assert (
        message.startswith(out["field:message"]) and b'"run_id":"r-abc.s1"' in out["field:message"]
    )
    assert out["size:message"] == str(len(message)).encode()
    assert out["sha256:message"] == hashlib.sha256(message).hexdigest().encode()
    assert len(out["field:message"]) > 1500  # the message has most of the room


def test_fields_past_the_sixteenth_are_only_counted() -> None:
    entry = {f"f{i:02d}".encode(): b"v" for i in range(100)} | {b"message": b"m"}
    out = digest("0/p/1-0", "p", "unsigned", entry)
    kept = [k for k in out if k.startswith("field:")]
    assert len(kept) == MAX_FIELDS and "field:message" in kept and out["fields"] == b"101"

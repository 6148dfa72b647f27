"""The signature rule and the grant rule (agentledger.events.grants), without Redis: an
entry is its publisher's only when signed with that publisher's key over the
exact message bytes; a request or control is taken only within the grant, and
a run never holds a scope the grant does not allow."""

from __future__ import annotations

import hashlib
import hmac
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger.events.grants import (
    authentication_refusal,
    control_refusal,
    held_scopes,
    request_refusal,
)
from agentledger.schemas.publishers import GrantedPrincipal, Publisher, PublishersFile
from agentledger.schemas.signature import entry, sign
from agentledger.schemas.spec import Principal

KEY = "3f9c" * 16
OTHER = "a1b2" * 16
MESSAGE = b'{"type":"RunRequested"}'
BILLING = Publisher(
    key=KEY,
    principals=(GrantedPrincipal(id="alice", tenant="shop-1"),),
    scopes=("stock:read", "stock:write"),
    queues=("default",),
)


def alice(*scopes: str, tenant: str = "shop-1") -> Principal:
    return Principal(id="alice", tenant=tenant, scopes=scopes)


def test_the_signature_is_lowercase_hex_hmac_sha256_of_the_raw_message_keyed_with_the_hex_key() -> (
    None
):
    expected = hmac.new(bytes.fromhex(KEY), MESSAGE, hashlib.sha256).hexdigest()
    assert sign(KEY, MESSAGE) == expected == expected.lower()
    assert entry("billing-svc", KEY, MESSAGE) == {
        "message": MESSAGE, "publisher": "billing-svc", "signature": expected,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "signature", "message", "starts"),
    [
        (None, None, MESSAGE, "unsigned: the entry has no 'publisher' and no 'signature' field"),
        (b"billing-svc", None, MESSAGE, "unsigned: the entry has no 'signature' field"),
        (None, b"00", MESSAGE, "unsigned: the entry has no 'publisher' field"),
        (b"nobody", sign(KEY, MESSAGE).encode(), MESSAGE, "unknown publisher: 'nobody'"),
        (b"billing-svc", sign(OTHER, MESSAGE).encode(), MESSAGE, "bad signature"),
        (b"billing-svc", sign(KEY, MESSAGE).encode(), MESSAGE + b" ", "bad signature"),
        (b"billing-svc", sign(KEY, MESSAGE).upper().encode(), MESSAGE, "bad signature"),
        (b"billing-svc", b"not hex at all", MESSAGE, "bad signature"),
        (
            b"keyless",
            sign(KEY, MESSAGE).encode(),
            MESSAGE,
            "unknown publisher: 'keyless' has no key",
        ),
    ],
)
def test_an_entry_not_signed_by_its_publishers_key_is_refused_with_the_reason(
    name: bytes | None, signature: bytes | None, message: bytes, starts: str
) -> None:
    keys = {"billing-svc": KEY, "keyless": None}
    reason = authentication_refusal(name, signature, message, keys=keys)
    assert reason is not None and reason.startswith(starts), reason


def test_an_entry_signed_with_its_publishers_key_is_its_publishers() -> None:
    signature = sign(KEY, MESSAGE).encode()
    assert (
        authentication_refusal(b"billing-svc", signature, MESSAGE, keys={"billing-svc": KEY})
        is None
    )


@pytest.mark.parametrize(
    ("principal", "queue", "starts"),
    [
        (alice("stock:read"), "default", None),
        (alice("stock:read", "stock:write"), "default", None),
        (alice(), "default", None),
        (alice("stock:read", "stock:admin"), "default", "not granted: 'b' may not grant the scopes ['stock:admin']"),
        (alice("stock:read", tenant="shop-2"), "default", "not granted: 'b' may not act for principal alice@shop-2"),
        (Principal(id="mallory", tenant="shop-1"), "default", "not granted: 'b' may not act for principal mallory@shop-1"),
        (alice("stock:read"), "payments", "not granted: 'b' may not publish to task queue 'payments'"),
    ],
)  # fmt: skip
def test_a_request_is_taken_only_within_its_publishers_grant(
    principal: Principal, queue: str, starts: str | None
) -> None:
    reason = request_refusal("b", BILLING, principal, queue)
    assert (reason is None) if starts is None else (reason or "").startswith(starts), reason


def test_a_run_holds_only_the_scopes_its_spec_asks_for_and_the_grant_allows() -> None:
    asked = ("stock:write", "stock:admin", "stock:write", "stock:read")
    assert held_scopes(asked, BILLING) == ("stock:write", "stock:read")
    assert held_scopes((), BILLING) == ()


def test_a_star_in_a_grant_matches_any_text_and_nothing_else_is_a_pattern() -> None:
    local = Publisher(
        key=KEY, principals=(GrantedPrincipal(id="*", tenant="*"),), scopes=("stock:*",),
        queues=("run.*",),
    )  # fmt: skip
    assert (
        request_refusal(
            "local", local, Principal(id="x", tenant="y", scopes=("stock:read",)), "run.ab12"
        )
        is None
    )
    assert request_refusal("local", local, alice(), "default") is not None, "private queues only"
    assert held_scopes(("stock:read", "admin", "stockXread"), local) == ("stock:read",)
    dotted = Publisher(
        key=KEY, principals=(GrantedPrincipal(id="a.b", tenant="t"),), scopes=("a.?",)
    )
    assert request_refusal("d", dotted, Principal(id="aXb", tenant="t"), "default") is not None
    assert held_scopes(("a.b", "a.?"), dotted) == ("a.?",)


def test_a_control_is_taken_only_from_a_publisher_granted_the_runs_principal() -> None:
    assert control_refusal("b", BILLING, alice("stock:read")) is None
    reason = control_refusal("b", BILLING, Principal(id="bob", tenant="shop-1"))
    assert reason == "not granted: 'b' may not control runs of principal bob@shop-1"


def test_the_publishers_file_is_read_exactly_as_the_issue_writes_it() -> None:
    data = {"publishers": {"billing-svc": {
        "key": KEY, "principals": [{"id": "alice", "tenant": "shop-1"}],
        "scopes": ["stock:read", "stock:write"], "queues": ["default"],
    }}}  # fmt: skip
    assert PublishersFile.model_validate(data).publishers["billing-svc"] == BILLING
    by_env = PublishersFile.model_validate(
        {"publishers": {"p": {"key_env": "P_KEY", "principals": [{"id": "a", "tenant": "t"}]}}}
    ).publishers["p"]
    assert (by_env.key, by_env.key_env, by_env.queues) == (None, "P_KEY", ("default",))


@pytest.mark.parametrize(
    "entry_",
    [
        {"principals": [{"id": "a", "tenant": "t"}]},  # no key
        {"key": KEY, "key_env": "K", "principals": [{"id": "a", "tenant": "t"}]},  # both
        {"key": "not-hex", "principals": [{"id": "a", "tenant": "t"}]},
        {"key": "ab", "principals": [{"id": "a", "tenant": "t"}]},  # too short
        {"key": KEY, "principals": []},
        {"key": KEY, "principals": [{"id": "a", "tenant": "t"}], "admin": True},
        {"key": KEY, "principals": [{"id": "a", "tenant": "t"}], "workspaces": ["srv/ws"]},
        {"key": KEY, "principals": [{"id": "a", "tenant": "t"}], "workspaces": "/srv/ws"},
    ],
)
def test_a_malformed_publisher_entry_is_refused(entry_: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PublishersFile.model_validate({"publishers": {"p": entry_}})


def test_a_grant_names_its_workspace_roots_as_absolute_folders_and_none_by_default() -> None:
    entry_ = {"key": KEY, "principals": [{"id": "a", "tenant": "t"}], "workspaces": ["/srv/ws"]}
    assert PublishersFile.model_validate({"publishers": {"p": entry_}}).publishers[
        "p"
    ].workspaces == ("/srv/ws",)
    assert BILLING.workspaces == ()


def _as_regex(pattern: str) -> re.Pattern[str]:
    """The reference: what a `*` pattern meant when grants were matched by `re`."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@given(
    st.text(alphabet="ab*", max_size=8),
    st.text(alphabet="ab", max_size=12),
)
def test_a_star_pattern_matches_exactly_what_the_equivalent_regex_matches(
    pattern: str, value: str
) -> None:
    grant = BILLING.model_copy(update={"scopes": (pattern,)})
    assert bool(held_scopes([value], grant)) == (_as_regex(pattern).fullmatch(value) is not None)


def test_a_pattern_of_many_stars_costs_no_backtracking_on_a_long_value() -> None:
    grant = BILLING.model_copy(update={"scopes": ("a*a*a*a*a*a*a*a*a*a*b",)})
    began = time.perf_counter()
    assert held_scopes(["a" * 100_000], grant) == ()  # `re` backtracks for hours here
    assert time.perf_counter() - began < 1.0

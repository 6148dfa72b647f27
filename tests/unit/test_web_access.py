"""The web view's door as rules: which Host names it answers to, what a session
cookie is worth and for how long, what counts as the view's own origin, and
where the sign-in page may send the browser afterwards."""

from __future__ import annotations

import pytest

from agentledger.services.entrypoints.web.access import (
    SESSION_S,
    Access,
    allowed_hosts,
    bearer_ok,
    host_allowed,
    host_name,
    safe_next,
    same_origin,
    session_ok,
    session_value,
)

TOKEN = "t" * 43
ACCESS = Access(TOKEN, allowed_hosts("127.0.0.1", ["ui.example.com"]))


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8765", "localhost"), ("LOCALHOST", "localhost"), ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]:8765", "[::1]"), ("[::1]", "[::1]"), ("ui.example.com.", "ui.example.com"),
        ("", None), ("evil.example:notaport", None), ("user@localhost", None), ("local host", None),
        ("[::1]x", None), ("localhost/path", None),
    ],
)  # fmt: skip
def test_a_host_header_is_read_as_its_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    "header",
    ["localhost:1", "127.0.0.1:8765", "[::1]:8765", "ui.example.com", "UI.Example.com:443"],
)
def test_loopback_and_the_operators_names_are_answered(header: str) -> None:
    assert host_allowed(ACCESS, header)


@pytest.mark.parametrize(
    "header", [None, "", "evil.example", "evil.example:8765", "127.0.0.2", "localhost.evil.example",
               "ui.example.com.evil.example", "0.0.0.0:8765", "192.168.1.10:8765"],
)  # fmt: skip
def test_any_other_host_is_not(header: str | None) -> None:
    assert not host_allowed(ACCESS, header)


def test_the_bound_address_is_answered_unless_it_is_every_address() -> None:
    assert "10.0.0.5" in allowed_hosts("10.0.0.5", [])
    assert "[fd00::5]" in allowed_hosts("fd00::5", [])
    assert (
        allowed_hosts("0.0.0.0", [])
        == allowed_hosts("::", [])
        == {"localhost", "127.0.0.1", "[::1]"}
    )


def test_the_token_is_taken_only_as_a_bearer_token() -> None:
    assert bearer_ok(ACCESS, f"Bearer {TOKEN}") and bearer_ok(ACCESS, f"bearer {TOKEN}")
    for wrong in (
        None,
        TOKEN,
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        "Bearer ",
        f"Bearer {TOKEN[:-1]}",
    ):
        assert not bearer_ok(ACCESS, wrong)


def test_a_session_lasts_its_time_and_no_longer_and_only_for_its_token() -> None:
    value = session_value(ACCESS, 1_000_000.0)
    assert session_ok(ACCESS, value, 1_000_000.0 + SESSION_S - 1)
    assert not session_ok(ACCESS, value, 1_000_000.0 + SESSION_S)
    assert not session_ok(ACCESS, value, 999_999.0)  # issued in the future
    assert not session_ok(Access("u" * 43, ACCESS.hosts), value, 1_000_000.0)  # a new token ends it
    issued, mac = value.split(".")
    assert not session_ok(ACCESS, f"{int(issued) + 3600}.{mac}", 1_000_000.0 + 3600)
    assert not session_ok(ACCESS, None, 1_000_000.0) and not session_ok(
        ACCESS, "garbage", 1_000_000.0
    )


def test_two_tokens_have_two_cookie_names() -> None:
    assert ACCESS.cookie != Access("u" * 43, ACCESS.hosts).cookie
    assert TOKEN[:8] not in ACCESS.cookie


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        ("http://127.0.0.1:8765", None, True),
        ("https://127.0.0.1:8765", None, True),
        (None, "http://127.0.0.1:8765/runs/r-1", True),
        ("http://127.0.0.1:9999", "http://127.0.0.1:8765/", False),  # Origin decides when given
        ("http://localhost:8765", None, False),  # another name: another origin
        ("null", None, False),
        ("null", "http://127.0.0.1:8765/", True),
        (None, None, False),
        ("javascript:alert(1)", None, False),
    ],
)
def test_the_views_own_origin_is_its_host_header(
    origin: str | None, referer: str | None, ok: bool
) -> None:
    assert same_origin(origin, referer, "127.0.0.1:8765") is ok


@pytest.mark.parametrize(
    ("asked", "goes"),
    [("/runs/r-1", "/runs/r-1"), (None, "/"), ("", "/"), ("//evil.example/", "/"),
     ("https://evil.example/", "/"), ("/\\evil.example", "/")],
)  # fmt: skip
def test_sign_in_sends_the_browser_only_to_a_page_of_this_view(
    asked: str | None, goes: str
) -> None:
    assert safe_next(asked) == goes

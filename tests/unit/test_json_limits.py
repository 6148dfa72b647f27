"""The inbox's nesting limit (`agentledger.schemas.json_limits`): its depth is a JSON text's
real nesting, checked against a plain character-by-character scanner, whatever
the strings hold (brackets, quotes, backslashes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger.schemas.json_limits import TooDeep, check_depth, json_depth


def scanned(text: str) -> int:
    """The reference: one character at a time, a string's escapes followed."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


TRICKY = st.text(alphabet='[]{}"\\ab\n\u00e9\U0001f600', max_size=12)
VALUES: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4),
    max_leaves=40,
)


@given(VALUES, st.booleans())
def test_the_depth_of_any_json_text_is_its_nesting(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_depth(text) == scanned(text)


@pytest.mark.parametrize(
    "text, depth",
    [
        ('{"a": "[[[["}', 1),  # brackets in a string
        ('["\\"[[", [1]]', 2),  # an escaped quote does not end the string
        ('["\\\\", [[1]]]', 3),  # an escaped backslash does not escape the quote after it
        ('["\\\\\\"[", []]', 2),  # \\ then \" : still inside
        ('[["unterminated [[[[', 2),  # the rest is a string that never ends
        ('[[["ends in a backslash \\', 3),
        ("]]][[", 0),  # not JSON: counted as it stands (closes first never go below 0)
        ("", 0),
        ("no brackets", 0),
    ],
)
def test_strings_escapes_and_broken_texts(text: str, depth: int) -> None:
    assert json_depth(text) == depth == scanned(text)


def test_a_backslash_outside_any_string_never_hides_brackets_before_it() -> None:
    """Outside strings a backslash is not JSON: a parser stops there, having read
    only what came before, which is counted as the scanner counts it."""
    text = "[" * 70 + '\\" "' + "]" * 70
    assert json_depth(text) >= 70 == scanned(text[: text.index("\\")])


def test_check_depth_refuses_past_the_limit_and_skips_texts_with_few_brackets() -> None:
    check_depth("[" * 64 + "]" * 64)
    with pytest.raises(TooDeep, match="nested 65 deep"):
        check_depth("[" * 65 + "]" * 65)
    check_depth(json.dumps(["[" * 1000]))  # many brackets, all in a string
    with pytest.raises(TooDeep, match="nested 100000 deep"):
        check_depth("[" * 100_000)

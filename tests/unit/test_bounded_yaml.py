"""YAML a user hands us is read within limits (`agentledger.services.bounded_yaml`), checked
on the parser's event stream before any node is built: a billion laughs of
thirteen lines is refused at once, naming the line where its aliases pass the
size limit; brackets nested thousands deep are refused at the depth limit, not
by a RecursionError; a file larger than the limit (or endless, /dev/zero) is
refused having read no more than the limit. Anchors and aliases used as people
use them stay welcome, and a document without aliases never expands past its
own size."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from agentledger.services.bounded_yaml import Limits, OverLimit, check, read_text, safe_load

LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "task: *i",
        "principal: {id: a, tenant: t}",
        "model:",
        "  scripted: [{end_turn: done}]",
    ]
)


def test_thirteen_lines_of_aliases_are_refused_at_once_naming_the_line() -> None:
    assert len(LAUGHS.splitlines()) == 13
    began = time.perf_counter()
    with pytest.raises(OverLimit) as refused:
        check(LAUGHS)
    assert time.perf_counter() - began < 1.0  # a walk of the expanded document: hours
    assert "aliases written out" in refused.value.reason
    assert refused.value.line is not None and refused.value.line <= 10


def test_brackets_nested_five_thousand_deep_are_refused_at_the_depth_limit() -> None:
    deep = "task: " + "[" * 5000 + "]" * 5000
    with pytest.raises(OverLimit) as refused:
        check(deep)
    assert refused.value.reason == "nested deeper than 64 (the limit)"
    check("task: " + "[" * 63 + "]" * 63)  # 64 deep with the top mapping: allowed


def test_an_alias_nests_as_deep_as_what_it_stands_for() -> None:
    deep = "[" * 40 + "x" + "]" * 40
    with pytest.raises(OverLimit, match=r"alias \*d nests it deeper than 64"):
        check(f"d: &d {deep}\ne: " + "[" * 30 + "*d" + "]" * 30)


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(OverLimit, match="recursive"):
        check("a: &a [x, *a]")


def test_a_file_larger_than_the_limit_is_refused_having_read_only_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("task: " + "x" * 2000)
    with pytest.raises(OverLimit, match="larger than 1,000 bytes"):
        read_text(big, Limits(max_bytes=1000))
    with pytest.raises(OverLimit):
        read_text("/dev/zero", Limits(max_bytes=1000))  # endless: read up to the limit, no more
    assert read_text(big, Limits(max_bytes=4000)).startswith("task: x")


def test_anchors_and_aliases_as_people_use_them_load_as_yaml_does() -> None:
    text = (
        "defaults: &defaults {timeout_s: 30, retries: 2}\n"
        "a: {<<: *defaults, name: a}\n"
        "b: *defaults\n"
    )
    assert safe_load(text) == yaml.safe_load(text)


def test_a_syntax_error_is_yamls_own_with_its_mark() -> None:
    with pytest.raises(yaml.MarkedYAMLError):
        check("task: fine\nprincipal: {id: a\nmodel: x\n")


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=40,
)


@given(json_like, st.sampled_from([None, True]))
def test_a_document_without_aliases_never_counts_larger_than_its_own_text(
    value: object, flow: bool | None
) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    check(text, Limits(max_bytes=len(text.encode())))


def test_the_operators_files_are_read_within_the_same_limits(tmp_path: Path) -> None:
    from agentledger.services.adapters.publishers.publishers_file import read
    from agentledger.services.adapters.tools.mcp.config import McpConfigError, load_servers_file
    from agentledger.services.errors import ConfigError

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(LAUGHS.replace("task: *i", "publishers: *i"))
    with pytest.raises(ConfigError, match="aliases written out"):
        read(str(bomb))
    with pytest.raises(McpConfigError, match="aliases written out"):
        load_servers_file(str(bomb))
    with pytest.raises(ConfigError, match="larger than"):
        read("/dev/zero")

"""The policy MCP tools run under, decided from the operator's servers file and
never loosened by the server's own hints; the names they are offered and asked
under; the resources their templates name; how their errors are coded."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentledger.events.mcp_policy import (
    Hints,
    TemplateError,
    asks_for,
    code_for_error_text,
    code_for_protocol_error,
    decide_policy,
    expand,
    modules_of,
    unknown_asks,
)
from agentledger.events.tool_step import Lost
from agentledger.schemas.mcp_servers import McpServersFile, McpToolPolicy

READ = McpToolPolicy(read_only=True, reads=("file:{path}",), scope="fs:read")
WRITE = McpToolPolicy(writes=("file:{path}",), scope="fs:write")


def test_a_tool_the_file_does_not_list_is_a_write_on_the_whole_server_that_needs_approval() -> None:
    p = decide_policy("fs", "rm_rf", None, Hints(read_only=True, destructive=False), timeout_s=30)
    assert (p.read_only, p.writes, p.approval) == (False, ("mcp:fs",), "always")
    assert p.approval_reason and "fs__rm_rf" in p.approval_reason


def test_read_only_holds_only_where_the_operator_says_so_whatever_the_server_hints() -> None:
    p = decide_policy("fs", "write_file", WRITE, Hints(read_only=True), timeout_s=30)
    assert not p.read_only and p.writes == ("file:{path}",) and p.approval == "never"


def test_a_destructive_hint_makes_a_listed_read_a_write_that_needs_approval() -> None:
    p = decide_policy("fs", "read_file", READ, Hints(destructive=True), timeout_s=30)
    assert not p.read_only and p.writes == ("file:{path}",) and p.approval == "always"


def test_a_destructive_hint_asks_approval_for_a_write_unless_the_operator_decided() -> None:
    hinted = decide_policy("fs", "write_file", WRITE, Hints(destructive=True), timeout_s=30)
    decided = WRITE.model_copy(update={"approval": "never"})
    kept = decide_policy("fs", "write_file", decided, Hints(destructive=True), timeout_s=30)
    assert hinted.approval == "always" and kept.approval == "never"


def test_a_hint_that_it_is_not_destructive_never_loosens_an_approval() -> None:
    strict = WRITE.model_copy(update={"approval": "always"})
    p = decide_policy(
        "fs", "write_file", strict, Hints(read_only=True, destructive=False), timeout_s=30
    )
    assert p.approval == "always" and not p.read_only


def test_a_listed_write_with_no_resources_locks_the_server() -> None:
    p = decide_policy("db", "vacuum", McpToolPolicy(), Hints(), timeout_s=5)
    assert p.writes == ("mcp:db",) and p.timeout_s == 5


def test_templates_fill_in_arguments_lists_and_the_workspace() -> None:
    found = expand(
        ["file:{path}", "file:{paths}", "ws:{workspace}"],
        {"path": "a/../b.txt", "paths": ["c", "/w/d"]},
        "/w",
    )
    assert found == ["file:/w/b.txt", "file:/w/c", "file:/w/d", "ws:/w"]


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "/w2/x", "//etc"])
def test_a_file_resource_outside_the_workspace_is_refused(path: str) -> None:
    with pytest.raises(TemplateError, match="outside the workspace"):
        expand(["file:{path}"], {"path": path}, "/w")


def test_a_template_whose_argument_is_missing_names_it() -> None:
    with pytest.raises(TemplateError) as err:
        expand(["order:{order_id}"], {}, None)
    assert err.value.field == "order_id"


def test_a_run_spec_asks_for_mcp_tools_by_name_or_by_server_and_modules_stay_modules() -> None:
    entries = ("inventory_tools", "mcp:fs", "db__query")
    assert modules_of(entries) == ("inventory_tools",)
    assert asks_for(entries, "fs", "fs__write_file") and asks_for(entries, "db", "db__query")
    assert not asks_for(entries, "db", "db__drop")


def test_asks_nothing_answers_are_named_with_their_index() -> None:
    problems = unknown_asks(("mcp:git", "fs__nope", "fs__read_file"), {"fs": ["fs__read_file"]})
    assert [i for i, _ in problems] == [0, 1]
    assert "no MCP server 'git'" in problems[0][1] and "no MCP tool 'fs__nope'" in problems[1][1]


def test_errors_map_to_our_codes() -> None:
    assert (
        code_for_error_text("Access denied - path outside allowed directories")
        == "permission_denied"
    )
    assert code_for_error_text("ENOENT: no such file or directory") == "not_found"
    assert code_for_error_text("boom") == "internal"
    assert code_for_protocol_error(-32602) == "invalid_arguments"
    assert code_for_protocol_error(-32601) == "unknown_tool"
    assert code_for_protocol_error(-1) == "internal"


def test_the_servers_file_refuses_what_it_cannot_mean() -> None:
    for bad in (
        {"servers": {}},
        {"servers": {"fs": {}}},
        {"servers": {"fs": {"command": ["x"], "url": "http://127.0.0.1:1/mcp"}}},
        {"servers": {"f__s": {"command": ["x"]}}},
        {"servers": {"fs": {"url": "file:///etc"}}},
        {
            "servers": {
                "fs": {"command": ["x"], "tools": {"t": {"read_only": True, "writes": ["a"]}}}
            }
        },
        {"servers": {"fs": {"command": ["x"], "tools": {"t": {"sope": "x"}}}}},
    ):
        with pytest.raises(ValidationError):
            McpServersFile.model_validate(bad)


def test_a_lost_call_is_an_outcome_of_its_own() -> None:
    assert Lost("the server died").reason == "the server died"


def test_an_mcp_tools_concurrency_keys_come_from_the_servers_file_and_are_checked() -> None:
    listed = McpToolPolicy.model_validate(
        {"writes": ["order:{id}"], "limits": [{"key": "tenant:{tenant}:orders", "max": 2}]}
    )
    policy = decide_policy("orders", "place", listed, Hints(), timeout_s=30)
    assert [(lim.key, lim.max) for lim in policy.limits] == [("tenant:{tenant}:orders", 2)]
    assert decide_policy("orders", "place", None, Hints(), timeout_s=30).limits == ()
    for bad in ({"key": "{tenant}:orders", "max": 2}, {"key": "svc:x", "max": 0}):
        with pytest.raises(ValidationError):
            McpToolPolicy.model_validate({"limits": [bad]})


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ({"command": ["x"], "headers": {"Authorization": "TOKEN"}}, "only a `url:` server"),
        ({"url": "http://api.example.com/mcp", "headers": {"A": "T"}}, "only over https"),
        ({"url": "https://api.example.com/mcp", "headers": {"A": "Bearer x"}}, "never the value"),
    ],
)
def test_a_servers_headers_name_variables_and_go_only_to_a_url_server_over_https(
    server: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        McpServersFile.model_validate({"servers": {"api": server}})


def test_a_header_whose_variable_is_unset_is_refused_naming_it() -> None:
    from agentledger.services.adapters.tools.mcp.config import McpConfigError, header_values

    file = McpServersFile.model_validate(
        {"servers": {"api": {"url": "https://h/mcp", "headers": {"Authorization": "API_T"}}}}
    )
    assert header_values("f", file, {"API_T": "Bearer 1"}) == {"api": {"Authorization": "Bearer 1"}}
    with pytest.raises(McpConfigError, match=r"servers.api.headers.Authorization: .*'API_T'"):
        header_values("f", file, {})

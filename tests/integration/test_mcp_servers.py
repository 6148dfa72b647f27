"""MCP servers as a tool source, against real servers: the SDK server written in
the tests (`tests/mcp_servers/ledger_server.py`) over stdio in the sandbox and
over streamable HTTP on loopback, and the npm reference servers
(server-everything, server-filesystem). Through the hub and the tools it makes,
as the executor uses them (`run_tool`)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import mcp_types
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ : the shared MCP kit

from mcp_servers.kit import (  # noqa: E402
    HttpLedger,
    fs_server,
    ledger_stdio,
    npm_server,
    pids_serving,
    wait_for,
)

from agentledger.events.tool_step import Errored, Lost, Stopped, Succeeded, TimedOut  # noqa: E402
from agentledger.schemas.mcp_servers import McpServersFile  # noqa: E402
from agentledger.services.adapters.tools.context import ToolContext  # noqa: E402
from agentledger.services.adapters.tools.mcp.hub import McpHub  # noqa: E402
from agentledger.services.adapters.tools.mcp.tool import McpTool  # noqa: E402
from agentledger.services.adapters.tools.runner import run_tool  # noqa: E402
from agentledger.services.adapters.tools.sandbox import SandboxPolicy  # noqa: E402
from agentledger.services.adapters.tools.toolset import load_toolset  # noqa: E402

BASE = load_toolset([])


def hub_of(tmp_path: Path, **servers: Any) -> McpHub:
    hub = McpHub(
        McpServersFile.model_validate({"servers": servers}), policy=SandboxPolicy(),
        scratch_dir=str(tmp_path / "scratch"), ping_s=0.2, ping_timeout_s=3.0,
    )  # fmt: skip
    down = hub.start(90)
    assert not down, down
    return hub


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[McpHub]:
    hub = hub_of(tmp_path, ledger=ledger_stdio())
    yield hub
    hub.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpHub]:
    """One ledger server for the tests that neither break nor change it: their calls
    go to the instance with no workspace (its own scratch folder)."""
    hub = hub_of(tmp_path_factory.mktemp("shared"), ledger=ledger_stdio())
    yield hub
    hub.close()


def ctx(ws: Path | None, call_id: str = "c1", op_key: str | None = None) -> ToolContext:
    return ToolContext("r1", call_id, str(ws) if ws else None, "alice", "t1", op_key=op_key)


def tool(hub: McpHub, name: str) -> McpTool:
    found = hub.toolset(BASE).get(name)
    assert isinstance(found, McpTool), f"no MCP tool {name!r}"
    return found


def run(t: McpTool, args: dict[str, Any], c: ToolContext, timeout_s: float = 60, **kw: Any) -> Any:
    return run_tool(t, args, c, timeout_s=timeout_s, **kw)


def test_a_servers_tools_join_the_tool_set_and_its_fingerprint_with_the_operators_policy(
    ledger: McpHub,
) -> None:
    toolset = ledger.toolset(BASE)
    names = [n for n in toolset.names if n.startswith("ledger__")]
    assert {"ledger__get_order", "ledger__place_order", "ledger__mystery"} <= set(names)
    assert toolset.fingerprint != BASE.fingerprint
    assert toolset.fingerprint == ledger.toolset(BASE).fingerprint  # stable while nothing changes
    offered = [t.name for t in toolset.offered(["ledger__get_order"])]
    assert offered == ["ledger__get_order", "read_output"]  # a run sees only what its spec asks
    assert len(toolset.offered(["mcp:ledger"])) == len(names) + 1
    builtins = tuple(s for s in BASE.specs if s.name != "delegate")  # offered when a spec sets it
    assert toolset.offered([]) == builtins and toolset.offered(["delegate"])[-1].name == "delegate"
    get, place, mystery, wipe = (
        tool(ledger, f"ledger__{n}") for n in ("get_order", "place_order", "mystery", "wipe")
    )
    assert get.spec.read_only and get.spec.scope == "orders:read"
    assert not place.spec.read_only and place.approval_reason({}, None) is None  # type: ignore[arg-type]
    assert not mystery.spec.read_only and "not listed" in (mystery.approval_reason({}, None) or "")  # type: ignore[arg-type]
    assert not wipe.spec.read_only and wipe.resources({}, "/w")[1] == ["mcp:ledger"]  # destructive


def test_arguments_are_checked_against_the_input_schema_before_anything_is_sent(
    ledger: McpHub, ws: Path
) -> None:
    place = tool(ledger, "ledger__place_order")
    _, errors = place.check({"order_id": 7})
    assert {e.loc for e in errors} == {"order_id", "(input)"}  # wrong type; qty missing
    outcome = run(place, {"order_id": 7}, ctx(ws))
    assert isinstance(outcome, Errored) and outcome.error.code == "invalid_arguments"
    assert not (ws / "orders.json").exists()


def test_a_write_is_sent_with_its_operation_key_and_the_lookup_finds_it(
    ledger: McpHub, ws: Path
) -> None:
    place = tool(ledger, "ledger__place_order")
    outcome = run(place, {"order_id": "A", "qty": 2}, ctx(ws, op_key="k-1"))
    assert outcome == Succeeded("placed A x2")
    assert json.loads((ws / "orders.json").read_text())["A"]["op_key"] == "k-1"
    assert place.lookup is not None
    found = place.lookup("k-1", {"order_id": "A", "qty": 2}, ctx(ws))
    assert found.done is True and found.result == "placed A x2"
    assert place.lookup("k-2", {}, ctx(ws)).done is False


def test_is_error_results_map_to_our_error_codes(ledger: McpHub, ws: Path) -> None:
    outcome = run(tool(ledger, "ledger__fail"), {"why": "order Z"}, ctx(ws))
    assert isinstance(outcome, Errored)
    assert outcome.error.code == "not_found" and "order Z" in outcome.error.message


def test_a_server_killed_mid_call_loses_the_call_restarts_and_is_withdrawn_while_down(
    ledger: McpHub, ws: Path
) -> None:
    before = ledger.toolset(BASE).fingerprint
    changes: list[str] = []
    ledger.on_change(lambda: changes.append(ledger.toolset(BASE).fingerprint))
    slow = tool(ledger, "ledger__slow")
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("o", run(slow, {"seconds": 60}, ctx(ws)))
    )
    thread.start()
    wait_for(lambda: (ws / "slow.count").exists(), what="the slow call starting")
    [pid] = pids_serving(ws)
    os.kill(pid, signal.SIGKILL)
    thread.join(30)
    assert isinstance(box["o"], Lost), box
    wait_for(lambda: len(changes) >= 2, what="the server going down and coming back")
    assert changes[0] == BASE.fingerprint  # its tools withdrawn while it was down
    assert changes[-1] == before
    assert run(tool(ledger, "ledger__get_order"), {"order_id": "slow"}, ctx(ws)) == Succeeded(
        "none"
    )


def test_a_server_that_hangs_is_restarted_and_its_call_lost(ledger: McpHub, ws: Path) -> None:
    outcome = run(tool(ledger, "ledger__freeze"), {"seconds": 600}, ctx(ws))
    assert isinstance(outcome, Lost) and "ping" in outcome.reason, outcome
    wait_for(lambda: "ledger" in ledger.up(), what="the server coming back")
    assert run(tool(ledger, "ledger__get_order"), {"order_id": "A"}, ctx(ws)) == Succeeded("none")


def test_a_cancelled_write_sends_notifications_cancelled_then_its_server_is_stopped(
    ledger: McpHub, ws: Path
) -> None:
    slow = tool(ledger, "ledger__slow")
    began = ws / "slow.count"  # the server writes it when the call starts: then the run cancels
    outcome = run(
        slow, {"seconds": 60, "order_id": "x"}, ctx(ws),
        stop_requested=lambda: 1.0 if began.exists() else None, grace_s=1.0,
    )  # fmt: skip
    assert isinstance(outcome, Stopped) and outcome.killed  # a write: the server was stopped
    wait_for(lambda: (ws / "cancelled.txt").exists(), what="the server seeing the cancel")
    assert "x" not in json.loads(
        (ws / "orders.json").read_text() if (ws / "orders.json").exists() else "{}"
    )


def test_a_call_that_times_out_is_a_timeout(ledger: McpHub, ws: Path) -> None:
    outcome = run(tool(ledger, "ledger__slow"), {"seconds": 60}, ctx(ws), timeout_s=1.0)
    assert outcome == TimedOut(after_s=1.0)
    wait_for(lambda: (ws / "cancelled.txt").exists(), what="the server seeing the cancel")


def test_a_server_that_dies_answering_leaves_its_write_unknown(ledger: McpHub, ws: Path) -> None:
    outcome = run(tool(ledger, "ledger__crash"), {"order_id": "C"}, ctx(ws))
    assert isinstance(outcome, Lost)
    assert json.loads((ws / "orders.json").read_text())["C"]["times"] == 1  # it did happen


def test_a_server_that_says_its_tools_changed_changes_the_tool_set_and_its_fingerprint(
    ledger: McpHub, ws: Path
) -> None:
    before = ledger.toolset(BASE)
    assert "ledger__grown" not in before.names
    changes: list[str] = []
    ledger.on_change(lambda: changes.append(ledger.toolset(BASE).fingerprint))
    assert run(tool(ledger, "ledger__grow"), {}, ctx(None)) == Succeeded("grew")  # the catalog's
    wait_for(lambda: changes, what="the hub telling its listeners")
    after = ledger.toolset(BASE)
    assert "ledger__grown" in after.names and changes == [after.fingerprint]
    assert after.fingerprint != before.fingerprint
    grown = tool(ledger, "ledger__grown")  # unlisted in the servers file: a write needing approval
    assert not grown.spec.read_only and grown.approval_reason({}, None)  # type: ignore[arg-type]


def test_a_result_against_the_tools_output_schema_is_a_failed_call_saying_why(
    shared: McpHub,
) -> None:
    shaped = tool(shared, "ledger__shaped")
    assert run(shaped, {"good": True}, ctx(None)) == Succeeded("total 3")
    bad = run(shaped, {"good": False}, ctx(None))
    assert isinstance(bad, Errored) and not bad.error.retryable, bad
    assert "against its own outputSchema" in bad.error.message
    assert "'three' is not of type 'integer'" in bad.error.message


def test_progress_notifications_are_taken_and_the_call_answers(shared: McpHub) -> None:
    before = shared.instance("ledger", None).progress_seen
    assert run(tool(shared, "ledger__steps"), {"n": 3}, ctx(None)) == Succeeded("3 steps")
    assert shared.instance("ledger", None).progress_seen == before + 3


def test_resources_and_prompts_are_read_through_tools_of_the_server(shared: McpHub) -> None:
    ledger, ws = shared, None
    run(tool(ledger, "ledger__place_order"), {"order_id": "A", "qty": 2}, ctx(ws, op_key="k"))
    listing = run(tool(ledger, "ledger__mcp_list_resources"), {}, ctx(ws))
    assert isinstance(listing, Succeeded)
    found = json.loads(listing.output)
    assert [r["uri"] for r in found["resources"]] == ["ledger://book"]
    assert [t["uri_template"] for t in found["templates"]] == ["ledger://order/{order_id}"]
    read = tool(ledger, "ledger__mcp_read_resource")
    assert read.spec.read_only and read.resources({"uri": "ledger://book"}, ws) == (
        ["mcp:ledger"], [],
    )  # fmt: skip
    book = run(read, {"uri": "ledger://book"}, ctx(ws))
    assert isinstance(book, Succeeded) and json.loads(book.output)["A"]["qty"] == 2
    one = run(read, {"uri": "ledger://order/A"}, ctx(ws))
    assert isinstance(one, Succeeded) and json.loads(one.output)["qty"] == 2
    missing = run(read, {"uri": "ledger://nothing"}, ctx(ws))
    assert isinstance(missing, Errored), missing
    prompts = run(tool(ledger, "ledger__mcp_list_prompts"), {}, ctx(ws))
    assert isinstance(prompts, Succeeded) and '"name": "review"' in prompts.output
    got = run(
        tool(ledger, "ledger__mcp_get_prompt"),
        {"name": "review", "arguments": {"order_id": "A"}},
        ctx(ws),
    )
    assert got == Succeeded("[user] Review order A: is its quantity right?")


def test_a_file_resource_outside_the_workspace_is_refused_before_anything_is_sent(
    shared: McpHub, ws: Path
) -> None:
    read = tool(shared, "ledger__mcp_read_resource")
    hostile = ("file:///etc/passwd", "file://{ws}/../secret", "file://{ws}/%2e%2e/secret",
               "FILE:///etc/passwd", "file://evil/{ws}/a")  # fmt: skip
    for uri in hostile:
        with pytest.raises(ValueError, match="outside the workspace|another host"):
            read.resources({"uri": uri.format(ws=ws)}, str(ws))
    assert read.resources({"uri": f"file://{ws}/a.txt"}, str(ws))[0] == [
        "file:" + str(ws / "a.txt"),
        "mcp:ledger",
    ]
    with pytest.raises(ValueError, match="no workspace"):
        read.resources({"uri": f"file://{ws}/a.txt"}, None)


class Answers:
    """An answerer that says whose run asked (the run's model, as the worker's would)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def sample(self, asker: ToolContext, server: str, params: Any) -> Any:
        self.asked.append(asker.run_id)
        text = mcp_types.TextContent(type="text", text=f"{asker.run_id}'s model")
        return mcp_types.CreateMessageResult(role="assistant", content=text, model="m")

    def elicit(self, asker: ToolContext, server: str, params: Any) -> Any:
        return mcp_types.ElicitResult(action="decline")


def test_a_sampling_request_reaches_only_the_model_of_the_run_whose_call_asked(
    shared: McpHub,
) -> None:
    ledger = shared
    ledger.answer_with(None)
    ask = tool(ledger, "ledger__ask_model")
    assert run(ask, {"tag": "x"}, ctx(None)) == Succeeded(
        "refused: sampling refused: this worker routes no sampling requests"
    )
    answers = Answers()
    ledger.answer_with(answers)
    alone = ToolContext("r1", "c1", None, "alice", "t1")
    assert run(ask, {"tag": "a"}, alone) == Succeeded("r1's model")
    # the session with no workspace is shared: calls of two runs in flight on it at once
    box: dict[str, Any] = {}
    other = ToolContext("r2", "c2", None, "mallory", "t2")
    waiting = threading.Thread(
        target=lambda: box.setdefault("r2", run(ask, {"tag": "b", "wait_for": "asking-c"}, other))
    )
    waiting.start()
    both = run(ask, {"tag": "c", "wait_for": "asking-b"}, alone)
    waiting.join(60)
    refused = Succeeded("refused: sampling refused: calls of several runs are in flight")
    got = {"r1": both, "r2": box["r2"]}
    assert refused in got.values(), got  # the first to ask, at least, while both were in flight
    for run_id, outcome in got.items():  # one that asked alone got its own run's model only
        assert outcome in (refused, Succeeded(f"{run_id}'s model")), got


def test_a_streamable_http_server_serves_the_same_tools(tmp_path: Path) -> None:
    server = HttpLedger(tmp_path)
    hub = hub_of(tmp_path, remote={"url": server.url, "tools": {"get_order": {"read_only": True}}})
    try:
        toolset = hub.toolset(BASE)
        assert "remote__get_order" in toolset.names and toolset.fingerprint != BASE.fingerprint
        place = tool(hub, "remote__place_order")
        assert run(place, {"order_id": "H", "qty": 1}, ctx(None, op_key="h")) == Succeeded(
            "placed H x1"
        )
        assert json.loads((tmp_path / "orders.json").read_text())["H"]["op_key"] == "h"
    finally:
        hub.close()
        server.stop()


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpHub]:
    """One server-everything for the module's tests (each test its own workspace)."""
    hub = hub_of(tmp_path_factory.mktemp("ev"), ev=npm_server("server-everything", "stdio"))
    yield hub
    hub.close()


@pytest.fixture(scope="module")
def filesystem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpHub]:
    hub = hub_of(tmp_path_factory.mktemp("fs"), fs=fs_server())
    yield hub
    hub.close()


EVERYTHING_TOOLS = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
    "simulate-research-query",
    # offered only to a client that declares roots, sampling and elicitation (form and url)
    "get-roots-list", "trigger-sampling-request", "trigger-elicitation-request",
    "trigger-url-elicitation",
}  # fmt: skip
BUILTINS = {"mcp_list_resources", "mcp_read_resource", "mcp_list_prompts", "mcp_get_prompt"}
FS_TOOLS = {
    "create_directory", "directory_tree", "edit_file", "get_file_info",
    "list_allowed_directories", "list_directory", "list_directory_with_sizes", "move_file",
    "read_file", "read_media_file", "read_multiple_files", "read_text_file", "search_files",
    "write_file",
}  # fmt: skip


def served(hub: McpHub, server: str) -> set[str]:
    return {n.split("__", 1)[1] for n in hub.toolset(BASE).names if n.startswith(f"{server}__")}


def test_the_reference_servers_offer_our_client_all_their_tools_and_see_the_workspace_as_root(
    everything: McpHub, filesystem: McpHub, ws: Path
) -> None:
    assert served(everything, "ev") == EVERYTHING_TOOLS | BUILTINS  # it serves both
    assert served(filesystem, "fs") == FS_TOOLS
    roots = run(tool(everything, "ev__get-roots-list"), {}, ctx(ws))
    assert isinstance(roots, Succeeded)
    assert "(1 total)" in roots.output and f"URI: {ws.as_uri()}" in roots.output, roots.output
    allowed = run(tool(filesystem, "fs__list_allowed_directories"), {}, ctx(ws))
    assert allowed == Succeeded(f"Allowed directories:\n{ws}"), allowed


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records the headers of every request; redirects to `to` when set (else 404)."""

    seen: ClassVar[list[tuple[int, dict[str, str]]]] = []
    to: ClassVar[str | None] = None

    def _any(self) -> None:
        self.seen.append((self.server.server_address[1], dict(self.headers)))  # type: ignore[arg-type]
        self.send_response(307 if self.to else 404)
        if self.to:
            self.send_header("Location", self.to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET = do_DELETE = _any

    def log_message(self, *args: Any) -> None:
        pass


def recording_server(to: str | None) -> http.server.ThreadingHTTPServer:
    handler = type("R", (Recorder,), {"to": to})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_an_http_servers_headers_carry_the_operators_secret_to_it_and_never_to_another_host(
    tmp_path: Path,
) -> None:
    other = recording_server(None)  # another origin (another port)
    first = recording_server(f"http://127.0.0.1:{other.server_address[1]}/mcp")
    url = f"http://127.0.0.1:{first.server_address[1]}/mcp"
    file = McpServersFile.model_validate(
        {
            "servers": {
                "api": {"url": url, "headers": {"Authorization": "API_TOKEN"}, "start_timeout_s": 5}
            }
        }
    )
    hub = McpHub(
        file,
        policy=SandboxPolicy(),
        scratch_dir=str(tmp_path),
        headers={"api": {"Authorization": "Bearer s3cret"}},
    )
    try:
        down = hub.start(10)
        assert "api" in down  # its answer was a redirect off its origin: not followed
        assert Recorder.seen and {port for port, _ in Recorder.seen} == {first.server_address[1]}
        assert all(h.get("Authorization") == "Bearer s3cret" for _, h in Recorder.seen)
    finally:
        hub.close()
        first.shutdown()
        other.shutdown()


def test_the_reference_everything_server_answers_and_its_image_is_kept_for_the_model(
    everything: McpHub, ws: Path
) -> None:
    hub = everything
    assert run(tool(hub, "ev__get-sum"), {"a": 2, "b": 3}, ctx(ws)) == Succeeded(
        "The sum of 2 and 3 is 5."
    )
    image = run(tool(hub, "ev__get-tiny-image"), {}, ctx(ws))
    assert isinstance(image, Succeeded)
    [kept] = image.output["images"]
    assert kept["media_type"] == "image/png" and len(kept["data"]) > 100
    bad = run(tool(hub, "ev__get-sum"), {"a": "two"}, ctx(ws))
    assert isinstance(bad, Errored) and bad.error.code == "invalid_arguments"


def test_the_reference_filesystem_server_writes_inside_the_workspace_and_refuses_escapes(
    filesystem: McpHub, tmp_path: Path, ws: Path
) -> None:
    hub = filesystem
    write = tool(hub, "fs__write_file")
    assert isinstance(run(write, {"path": str(ws / "a.txt"), "content": "hi"}, ctx(ws)), Succeeded)
    assert (ws / "a.txt").read_text() == "hi"
    read = tool(hub, "fs__read_text_file")
    assert run(read, {"path": str(ws / "a.txt")}, ctx(ws)) == Succeeded("hi")
    assert write.resources({"path": "a.txt", "content": ""}, str(ws))[1] == [f"file:{ws}/a.txt"]
    with pytest.raises(ValueError, match="outside the workspace"):
        read.resources({"path": "../secret.txt"}, str(ws))
    (tmp_path / "secret.txt").write_text("s3cret")
    escaped = run(
        read, {"path": str(tmp_path / "secret.txt")}, ctx(ws)
    )  # past our check: the server and the sandbox
    assert isinstance(escaped, Errored) and escaped.error.code == "permission_denied"

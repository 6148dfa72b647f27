"""One MCP server instance kept alive: connect (start the process in the
sandbox, or open the HTTP session), initialise, list its tools, then ping it
every `ping_s`. A server that dies, or does not answer a ping within
`ping_timeout_s`, is dropped and started again with back-off (doubling up to
`backoff_max_s`); the calls it had in flight end as lost (`CallLost`: sent, and
whether they happened is unknown), never resent. Each change of state is told
to `on_state`, so the hub can withdraw the server's tools while it is down —
and so is a change of its tools (`notifications/tools/list_changed`: listed
again by the watch loop). The session declares roots, sampling and elicitation
(`client_side`), knowing which run's calls are in flight; a result against its
tool's outputSchema is `BadResult`; progress notifications are counted."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO, cast

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, PaginatedRequestParams

from agentledger.schemas.mcp_servers import McpServer
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.adapters.tools.mcp.client_side import Answerer, ClientSide
from agentledger.services.adapters.tools.mcp.loop import AsyncLoop
from agentledger.services.adapters.tools.mcp.transport import connect
from agentledger.services.adapters.tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)
State = Literal["starting", "up", "down", "closed"]


@dataclass(frozen=True)
class Catalog:
    """What the server said of itself when it started."""

    server: str  # its own name
    version: str
    tools: tuple[types.Tool, ...]
    resources: bool = False  # it serves resources (resources/list, resources/read)
    prompts: bool = False  # it serves prompts (prompts/list, prompts/get)


class ServerDown(Exception):
    """The server is not up: nothing was sent."""


class BadResult(Exception):
    """The server answered with a result its own declarations say is wrong (the
    structured content does not match the tool's outputSchema): the call happened."""


class CallLost(Exception):
    """The call was sent and its answer will never come (the server died or was restarted)."""


class Supervisor:
    def __init__(
        self,
        name: str,
        config: McpServer,
        *,
        workspace: str | None,
        policy: SandboxPolicy,
        loop: AsyncLoop,
        on_state: Callable[[Supervisor], None] = lambda s: None,
        errlog: TextIO | None = None,
        ping_s: float = 1.0,
        ping_timeout_s: float = 5.0,
        backoff_s: float = 0.2,
        backoff_max_s: float = 10.0,
        client: ClientSide | None = None,
        answerer: Callable[[], Answerer | None] = lambda: None,
        headers: Mapping[str, str] | None = None,
    ):
        self._headers = dict(headers or {})
        self.name, self.config, self.workspace = name, config, workspace
        self._policy, self._loop, self._on_state, self._errlog = policy, loop, on_state, errlog
        self._ping_s, self._ping_timeout_s = ping_s, ping_timeout_s
        self._backoff, self._backoff_max = backoff_s, backoff_max_s
        self.state: State = "starting"
        self._announced: State = "starting"
        self.catalog: Catalog | None = None
        self.last_error = ""
        self.restarts = 0
        self._session: ClientSession | None = None
        self._in_flight: dict[asyncio.Task[Any], str | None] = {}  # task -> why it was lost
        self._poke: asyncio.Event | None = None
        self._relist = False
        self.tool_changes = 0
        self.progress_seen = 0
        self._askers: dict[asyncio.Task[Any], ToolContext] = {}  # the calls in flight, whose
        self.client = client or ClientSide(name, workspace, asker=self._asker, answerer=answerer)
        self._restart_reason: str | None = None
        self._ending: str | None = None  # why the session is being left
        self._up = threading.Event()
        self._first = threading.Event()
        self._task: concurrent.futures.Future[None] | None = None

    def start(self) -> Supervisor:
        self._task = self._loop.submit(self._life())
        return self

    def wait_up(self, timeout_s: float) -> bool:
        return self._up.wait(timeout_s)

    def wait_first(self, timeout_s: float) -> bool:
        """Wait for the first start to end, up or down; whether it is up."""
        self._first.wait(timeout_s)
        return self.state == "up"

    def call(
        self,
        remote: str,
        args: dict[str, Any],
        meta: dict[str, Any],
        asker: ToolContext | None = None,
    ) -> concurrent.futures.Future[types.CallToolResult]:
        """Send a tools/call; cancelling the future sends notifications/cancelled."""
        sent_meta = cast(types.RequestParamsMeta, meta)  # a TypedDict open to our own keys

        def send(session: ClientSession) -> Awaitable[types.CallToolResult]:
            return session.call_tool(remote, args, meta=sent_meta, progress_callback=self._progress)

        return self._loop.submit(self._call(send, asker))

    def request(
        self, send: Callable[[ClientSession], Awaitable[types.CallToolResult]]
    ) -> concurrent.futures.Future[types.CallToolResult]:
        """Send another request (resources, prompts) as a call is sent, its answer as a result."""
        return self._loop.submit(self._call(send))

    def restart(self, reason: str) -> None:
        """Stop the server process now (its in-flight calls are lost) and start it again."""
        self._loop.call_soon(self._ask_restart, reason)

    def close(self) -> None:
        self.state = "closed"
        if self._task is not None:
            self._loop.loop.call_soon_threadsafe(self._task.cancel)

    def _closed(self) -> bool:
        return self.state == "closed"  # set from another thread by close()

    def _ask_restart(self, reason: str) -> None:
        self._restart_reason = reason
        if self._poke is not None:
            self._poke.set()

    def _asker(self) -> ToolContext | str:
        """The call a server's request came during: the in-flight calls' one run."""
        askers = list(self._askers.values())
        runs = {a.run_id for a in askers}
        if len(runs) != 1:
            return "no call is in flight" if not runs else "calls of several runs are in flight"
        return askers[0]  # several calls of the run: which one asked is not said; the first

    async def _call(
        self,
        send: Callable[[ClientSession], Awaitable[types.CallToolResult]],
        asker: ToolContext | None = None,
    ) -> types.CallToolResult:
        session = self._session
        if session is None or self.state != "up":
            raise ServerDown(
                f"MCP server {self.name!r} is {self.state}: {self.last_error or 'not started yet'}"
            )
        task = asyncio.current_task()
        assert task is not None
        self._in_flight[task] = None
        if asker is not None:
            self._askers[task] = asker
        try:
            return await send(session)
        except RuntimeError as exc:  # the SDK's check of the result against the outputSchema
            raise BadResult(str(exc)) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                why = self._ending or "it closed the connection"
                self._mark_down(why)
                self._ask_restart(why)
                raise CallLost(
                    f"MCP server {self.name!r} went down mid-call ({why}); the call was sent"
                ) from None
            raise
        except asyncio.CancelledError:
            lost = self._in_flight.get(task)
            if lost is not None:
                raise CallLost(lost) from None
            raise
        finally:
            self._in_flight.pop(task, None)
            self._askers.pop(task, None)

    async def _life(self) -> None:
        delay = self._backoff
        while self.state != "closed":
            began = time.monotonic()
            reason = await self._session_once()
            self._down(reason)
            if self._closed():
                return
            if time.monotonic() - began > 30:
                delay = self._backoff  # it ran a good while: start again quickly
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff_max)
            self.restarts += 1

    async def _session_once(self) -> str:
        try:
            async with connect(
                self.config, workspace=self.workspace, policy=self._policy, errlog=self._errlog,
                headers=self._headers,
            ) as (read, write):  # fmt: skip
                async with ClientSession(
                    read, write, list_roots_callback=self.client.list_roots,  # type: ignore[arg-type]
                    sampling_callback=self.client.sample, elicitation_callback=self.client.elicit,
                    message_handler=self._on_message,
                ) as session:  # fmt: skip
                    with anyio.fail_after(self.config.start_timeout_s):
                        init = await session.initialize()
                        tools = await _list_tools(session)
                    info = init.server_info
                    caps = init.capabilities
                    self.catalog = Catalog(
                        info.name, info.version or "", tools,
                        resources=caps.resources is not None, prompts=caps.prompts is not None,
                    )  # fmt: skip
                    self._session = session
                    self._poke = asyncio.Event()
                    self._restart_reason = None
                    self._ending = None
                    self.state, self.last_error = "up", ""
                    self._up.set()
                    self._announce()
                    self._ending = await self._watch(session)
                    return self._ending  # leaving the session: calls still in flight are lost
        except Exception as exc:  # noqa: BLE001 -- whatever ended the session: it is down, say why (the supervisor lives on)
            return _describe(exc)

    async def _watch(self, session: ClientSession) -> str:
        assert self._poke is not None
        while True:
            try:
                await asyncio.wait_for(self._poke.wait(), self._ping_s)
            except TimeoutError:
                pass
            if self._restart_reason is not None:
                return self._restart_reason
            if self._relist:
                await self._list_again(session)
            try:
                with anyio.fail_after(self._ping_timeout_s):
                    await session.send_ping()
            except TimeoutError:
                return f"it did not answer a ping within {self._ping_timeout_s:g}s"
            except Exception as exc:  # noqa: BLE001 -- any failed ping ends the session, said why
                return _describe(exc)

    async def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A call's progress (`notifications/progress`): counted and logged, not recorded."""
        self.progress_seen += 1
        log.debug("MCP %s progress %s/%s %s", self.name, progress, total, message or "")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True  # listed again by the watch loop, not inside the dispatcher
            if self._poke is not None:
                self._poke.set()

    async def _list_again(self, session: ClientSession) -> None:
        """The server said its tools changed: list them again and tell the hub."""
        assert self._poke is not None and self.catalog is not None
        self._relist = False
        self._poke.clear()
        with anyio.fail_after(self._ping_timeout_s):
            tools = await _list_tools(session)
        if tools != self.catalog.tools:
            self.catalog = dataclasses.replace(self.catalog, tools=tools)
            self.tool_changes += 1
            log.warning("MCP server %r (%s) changed its tools", self.name, self.workspace or "-")
            self._on_state(self)

    def _mark_down(self, reason: str) -> None:
        if self.state != "closed":
            self.state = "down"
        self._up.clear()
        self.last_error = self.last_error if self.state == "down" and self.last_error else reason

    def _down(self, reason: str) -> None:
        self._session, self._poke = None, None
        self.last_error = ""
        self._mark_down(reason)
        lost = f"MCP server {self.name!r} went down mid-call ({reason}); the call was sent"
        for task in list(self._in_flight):
            self._in_flight[task] = lost
            task.cancel()
        if self._announced != self.state:
            log.warning("MCP server %r (%s) is down: %s", self.name, self.workspace or "-", reason)
            self._announce()

    def _announce(self) -> None:
        self._announced = self.state
        self._first.set()
        self._on_state(self)


async def _list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    found: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        found += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tuple(found)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

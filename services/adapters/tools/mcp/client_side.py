"""What our MCP client tells a server when the server asks (the client
capabilities it declares): its roots — the run's workspace, and only it (a
`url:` server, one session per worker and no workspace, is told none) — and
sampling and elicitation, answered for the run whose call the request came
during (the one run with a call in flight on this session; none, or several:
refused) by the worker's answerer (the run's model; a person, through the run),
or refused with a one-line reason. Answering runs in a thread: the session's
loop serves the other calls meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import mcp_types as types
from mcp.client.session import ClientRequestContext

from agentledger.services.adapters.tools.context import ToolContext


class Answerer(Protocol):
    """Answers a server's requests for the run of the call they came during."""

    def sample(
        self, asker: ToolContext, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData: ...

    def elicit(
        self, asker: ToolContext, server: str, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData: ...


def roots_of(workspace: str | None) -> list[types.Root]:
    """The roots a server instance is told: its workspace, as a file:// URI."""
    if workspace is None:
        return []
    return [types.Root(uri=Path(workspace).resolve().as_uri(), name="workspace")]


def refused(what: str, why: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"{what} refused: {why}")


class ClientSide:
    """The callbacks of one session (one server instance, one workspace)."""

    def __init__(
        self,
        server: str,
        workspace: str | None,
        *,
        asker: Callable[[], ToolContext | str] = lambda: "no call is in flight",
        answerer: Callable[[], Answerer | None] = lambda: None,
    ):
        self.server = server
        self.workspace = workspace
        self._asker = asker
        self._answerer = answerer

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=roots_of(self.workspace))

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        answerer, asker = self._answerer(), self._asker()
        if answerer is None:
            return refused("sampling", "this worker routes no sampling requests")
        if isinstance(asker, str):
            return refused("sampling", asker)
        return await asyncio.to_thread(answerer.sample, asker, self.server, params)

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answerer, asker = self._answerer(), self._asker()
        if answerer is None:
            return refused("elicitation", "this worker asks no person")
        if isinstance(asker, str):
            return refused("elicitation", asker)
        return await asyncio.to_thread(answerer.elicit, asker, self.server, params)

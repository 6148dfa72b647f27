"""What our MCP client tells a server when the server asks (the client
capabilities it declares): its roots — the run's workspace, and only it (a
`url:` server, one session per worker and no workspace, is told none) — and
sampling and elicitation, each answered by a handler the worker gives (the
run's model, a human's reply) or refused with a one-line reason."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import mcp_types as types
from mcp.client.session import ClientRequestContext

SamplingHandler = Callable[
    [types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | types.ErrorData]
]
ElicitationHandler = Callable[
    [types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]
]


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
        workspace: str | None,
        *,
        sampling: SamplingHandler | None = None,
        elicitation: ElicitationHandler | None = None,
    ):
        self.workspace = workspace
        self._sampling = sampling
        self._elicitation = elicitation

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=roots_of(self.workspace))

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        if self._sampling is None:
            return refused("sampling", "this worker routes no sampling requests")
        return await self._sampling(params)

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if self._elicitation is None:
            return refused("elicitation", "this worker asks no human")
        return await self._elicitation(params)

"""An MCP server's tool in our tool set, offered as `<server>__<tool>`, under the
same guarantees as an `@tool`: its arguments are checked against its
`inputSchema` before anything is sent; its resources, scope, approval and
operation key come from the operator's policy (events/mcp_policy.py); a write
goes through the ledger (the executor's `run_once`) and is sent with its
operation key in `_meta` (`agentledger/op_key`) so the server can dedupe.
A server's resources and prompts are tools of this kind too (`builtins.py`).

Running a call: a timeout abandons the request (the SDK sends
`notifications/cancelled`) and is a timeout; a server that dies mid-call
makes the call lost — an unknown outcome, resolved by the operator's lookup tool
or escalated, never resent; a result against the tool's `outputSchema` is a
failure saying so. A cancelled run's call gets `notifications/cancelled`;
a read then counts as stopped; a stdio server still working on a write is
stopped (and started again) after the grace."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from agentledger.events.mcp_policy import Policy, asks_for, expand
from agentledger.events.tool_step import Errored, Lost, Outcome, StillRunning, Stopped, TimedOut
from agentledger.events.types import FieldError, ToolError
from agentledger.schemas.mcp_servers import McpLookup
from agentledger.schemas.spec import Principal
from agentledger.services.adapters.tools.context import Lookup, ToolContext
from agentledger.services.adapters.tools.mcp import builtins
from agentledger.services.adapters.tools.mcp.results import outcome_of, parsed, protocol_error
from agentledger.services.adapters.tools.mcp.supervisor import (
    BadResult,
    CallLost,
    ServerDown,
    Supervisor,
)
from agentledger.services.adapters.tools.registry import ExternalTool

if TYPE_CHECKING:
    from agentledger.services.adapters.tools.mcp.hub import McpHub

POLL_S = 0.05
OP_KEY_META = "agentledger/op_key"
LOOKUP_TIMEOUT_S = 30.0


def _nothing(**_: Any) -> None:
    return None


@dataclass(frozen=True)
class McpTool(ExternalTool):
    server: str = ""
    remote: str = ""  # the tool's name on its server
    policy: Policy | None = None
    validator: Any = None  # a jsonschema validator of the tool's inputSchema
    lookup_spec: McpLookup | None = None
    kind: str = "tool"  # or a built-in's name: a resources or prompts request (builtins.py)
    hub: McpHub | None = field(default=None, compare=False, repr=False)

    def offered_to(self, asked: tuple[str, ...] | list[str]) -> bool:
        return asks_for(list(asked), self.server, self.spec.name)

    def check(self, raw: dict[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
        assert self.validator is not None
        errors = [
            FieldError(loc=".".join(str(p) for p in e.absolute_path) or "(input)", msg=e.message)
            for e in sorted(self.validator.iter_errors(raw), key=lambda e: list(map(str, e.path)))
        ]
        return (dict(raw), []) if not errors else ({}, errors)

    def canonical(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(args)  # sent as given: the schema's defaults are the server's business

    def resources(self, args: dict[str, Any], workspace: str | None) -> tuple[list[str], list[str]]:
        assert self.policy is not None
        reads = expand(self.policy.reads, args, workspace)
        if self.kind == builtins.READ_RESOURCE:  # a file: URI only inside the workspace
            reads = sorted({*reads, *builtins.uri_reads(str(args.get("uri", "")), workspace)})
        return reads, expand(self.policy.writes, args, workspace)

    def approval_reason(self, args: dict[str, Any], principal: Principal) -> str | None:
        assert self.policy is not None
        return self.policy.approval_reason if self.policy.approval == "always" else None

    def execute(
        self,
        args: dict[str, Any],
        ctx: ToolContext,
        *,
        timeout_s: float,
        stop_requested: Callable[[], float | None],
        grace_s: float,
    ) -> Outcome:
        assert self.hub is not None
        try:
            instance = self.hub.instance(self.server, ctx.workspace)
        except ServerDown as exc:
            return Errored(ToolError(code="internal", message=str(exc), retryable=True))
        meta = {OP_KEY_META: ctx.op_key} if ctx.op_key else {}
        future = (
            instance.call(self.remote, args, meta, asker=ctx)
            if self.kind == "tool"
            else instance.request(builtins.request(self.kind, args))
        )
        deadline = time.monotonic() + timeout_s
        while True:
            settled = _settled(self.spec.name, future)
            if settled is not None:
                return settled
            if (requested_at := stop_requested()) is not None:
                return self._stop(instance, future, requested_at, grace_s, ctx)
            if time.monotonic() >= deadline:
                future.cancel()  # notifications/cancelled; a hung server is restarted by its pings
                return TimedOut(after_s=timeout_s)

    def _stop(
        self,
        instance: Supervisor,
        future: concurrent.futures.Future[Any],
        requested_at: float,
        grace_s: float,
        ctx: ToolContext,
    ) -> Outcome:
        future.cancel()  # the SDK sends notifications/cancelled for an abandoned request
        if self.spec.read_only:
            return Stopped(requested_at, killed=False, detail="notifications/cancelled sent")
        if instance.config.url is not None:
            return StillRunning(requested_at)  # a remote server: we cannot know it stopped
        time.sleep(grace_s)  # the grace the run allows a call to stop in: it is what it is
        instance.restart(f"a cancelled write ({ctx.call_id}) was still running after {grace_s:g}s")
        detail = (
            f"notifications/cancelled sent; the server was stopped after the grace of {grace_s:g}s"
        )
        return Stopped(requested_at, killed=True, detail=detail)

    def look_up(self, op_key: str, args: dict[str, Any], ctx: ToolContext) -> Lookup:
        """The operator's lookup tool asked whether the write with `op_key` happened."""
        assert self.hub is not None and self.lookup_spec is not None
        values = {**args, "op_key": op_key}
        filled = {k: _fill(v, values) for k, v in self.lookup_spec.args.items()} or {
            "op_key": op_key
        }
        instance = self.hub.instance(self.server, ctx.workspace)
        result = instance.call(self.lookup_spec.tool, filled, {}).result(LOOKUP_TIMEOUT_S)
        if result.is_error:
            return Lookup(done=None)
        answer = parsed(result)
        done = answer.get("done") if isinstance(answer, dict) else None
        return Lookup(done=done if isinstance(done, bool) else None, result=answer.get("result"))


def _settled(name: str, future: concurrent.futures.Future[Any]) -> Outcome | None:
    """The call's outcome once it has one; None while it runs."""
    try:
        return outcome_of(future.result(POLL_S))
    except concurrent.futures.TimeoutError:
        return None
    except ServerDown as exc:  # it went down before the request was sent
        return Errored(ToolError(code="internal", message=str(exc), retryable=True))
    except CallLost as exc:
        return Lost(str(exc))
    except BadResult as exc:
        message = f"{name} answered against its own outputSchema: {exc}"
        return Errored(ToolError(code="internal", message=message, retryable=False))
    except MCPError as exc:
        return protocol_error(exc.code, exc.message)
    except Exception as exc:  # noqa: BLE001 -- the transport failed after sending: it may have happened
        return Lost(f"the MCP call failed after it was sent: {type(exc).__name__}: {exc}")


def _fill(template: str, values: dict[str, Any]) -> Any:
    for name, value in values.items():
        if template == "{" + name + "}":
            return value  # a whole-value template keeps the argument's type
        template = template.replace("{" + name + "}", str(value))
    return template


class _NoArgs(BaseModel):
    pass


def make_tool(**fields: Any) -> McpTool:
    """An McpTool with the RegisteredTool fields no MCP tool uses filled in."""
    made = McpTool(fn=_nothing, args_model=_NoArgs, context_param=None, **fields)
    if made.lookup_spec is not None:
        object.__setattr__(made, "lookup", made.look_up)  # frozen: its lookup is its own method
    return made

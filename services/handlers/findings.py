"""What validation needs to know about the turn's undecided calls, gathered before
anything is decided: is the tool in this worker's tool set, are the arguments
valid against its schema, which resources does it touch, must a person approve
it, what is its operation key, and the operator's maximum for its timeout. The
tools' own rules (resources, approval predicates) are user code: they run here,
never inside a decision."""

from __future__ import annotations

from agentledger.events.delegate import DELEGATE, offered, refusal
from agentledger.events.idempotency import request_hash
from agentledger.events.limits import LimitError, resolve
from agentledger.events.state import Call, RunState
from agentledger.events.types import FieldError
from agentledger.events.validation_step import Finding, undecided
from agentledger.services.adapters.tools.context import ToolFailure
from agentledger.services.adapters.tools.registry import ExternalTool, RegisteredTool
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.settings import Settings


def findings(toolset: ToolSet, s: RunState, settings: Settings | None = None) -> dict[str, Finding]:
    """`settings`: the operator's maxima (none given: no maximum but the run's own)."""
    turn = s.current_turn
    calls = [turn.call(call_id) for call_id in undecided(s)] if turn else []
    return {c.call_id: finding(toolset, c, s, settings) for c in calls if c is not None}


def finding(toolset: ToolSet, call: Call, s: RunState, settings: Settings | None = None) -> Finding:
    t = toolset.get(call.name)
    if t is not None and call.name == DELEGATE and (why := refusal(s, call, now=s.updated_at)):
        return Finding(tool=t.spec, refused=("permission_denied", why))  # nothing started
    if t is None or not t.offered_to(offered(s.spec)):
        return Finding(tool=None)
    args, errors = t.check(call.input)
    if errors:
        return Finding(tool=t.spec, field_errors=tuple(errors))
    try:
        reads, writes = t.resources(args, s.workspace)
        approval = t.approval_reason(args, s.spec.principal)
        op_key = t.op_key(call.input, s.spec.principal.tenant, writes, run_id=s.run_id)
        digest = request_hash(t.canonical(call.input))
        limits = resolve(t.spec.limits, args, s.spec.principal.tenant, _operator(settings))
    except LimitError as exc:  # a key this call cannot fill in (or may not): the model is told
        return Finding(tool=t.spec, refused=("invalid_arguments", str(exc)))
    except ToolFailure as exc:  # a rule refused these arguments, saying why: the model is told
        return Finding(tool=t.spec, refused=(exc.code, exc.message))
    except Exception as exc:  # noqa: BLE001 -- the tool's rules raising anything: the model is told
        error = FieldError(loc="(input)", msg=f"{type(exc).__name__}: {exc}")
        return Finding(tool=t.spec, field_errors=(error,))
    return Finding(
        tool=t.spec,
        reads=tuple(reads),
        writes=tuple(writes),
        limits=limits,
        approval=approval,
        op_key=op_key,
        request_hash=digest,
        resolvable=t.lookup is not None,
        output_cap=t.output_cap,
        max_timeout_s=max_timeout_s(t, settings) if settings is not None else None,
    )


def _operator(settings: Settings | None) -> dict[str, int]:
    return dict(settings.limits) if settings is not None else {}


def max_timeout_s(t: RegisteredTool, settings: Settings) -> float:
    """The operator's maximum for a call of `t`: an MCP server's tool, or our own."""
    return (
        settings.max_mcp_timeout_s if isinstance(t, ExternalTool) else settings.max_tool_timeout_s
    )

"""`agentledger trace RUN`: the run's spans as its log implies them
(`agentledger.events.spans`), as a tree of one line each, or with `--json` as OTLP JSON (the
body an OTLP/HTTP collector takes at `/v1/traces`). Redacted like every print."""

from __future__ import annotations

from datetime import UTC, datetime

from agentledger.events.counted import counted
from agentledger.events.errors import CoreError
from agentledger.events.spans import Span, by_parent, spans_of, trace_id_of
from agentledger.services.adapters.tracing.otlp_json import otlp_json
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.parser import package_version
from agentledger.services.entrypoints.cli.redacted import RunRedactors
from agentledger.services.entrypoints.reply import emit, fail
from agentledger.services.session import Session


def trace(session: Session, run_id: str, *, as_json: bool) -> int:
    envelopes = session.store.read(run_id)
    if not envelopes:
        return fail(exit_codes.USAGE, "no run", f"no run {run_id!r}", as_json)
    try:
        spans = spans_of(envelopes)
    except CoreError as exc:
        return fail(
            exit_codes.CHECK_FAILED, "broken log", f"{exc} (see `agentledger replay`)", as_json
        )
    redactor = RunRedactors(session.store).of(run_id, envelopes[0])
    if as_json:
        emit(
            redactor.value(
                otlp_json(spans, service=session.settings.trace_service, version=package_version())
            )
        )
        return 0
    print(f"trace {trace_id_of(run_id)}  run {run_id}  {counted(len(spans), 'span')}")
    for depth, span in tree_lines(spans):
        print(redactor.text(f"{'  ' * depth}{describe(span, width=32 - 2 * depth)}"))
    return 0


def tree_lines(spans: list[Span]) -> list[tuple[int, Span]]:
    """(depth, span) in tree order: each span before its children, children by start."""
    children = by_parent(spans)
    known = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None or s.parent_id not in known]
    out: list[tuple[int, Span]] = []

    def walk(span: Span, depth: int) -> None:
        out.append((depth, span))
        for child in children.get(span.span_id, []):
            walk(child, depth + 1)

    for root in sorted(roots, key=lambda s: s.start_seq):
        walk(root, 0)
    return out


def describe(span: Span, *, width: int = 32) -> str:
    at = datetime.fromtimestamp(span.start, UTC).strftime("%H:%M:%S.%f")[:-3]
    took = "open" if span.end is None else f"{(span.end - span.start) * 1000:.1f} ms"
    outcome = "ok" if span.error is None else f"ERROR {span.error}"
    if span.end is None:
        outcome = "open"
    return f"{span.name:<{width}} {at}  {took:>10}  {_detail(span):<28} {outcome}".rstrip()


def _detail(span: Span) -> str:
    a = span.attributes
    match a.get("gen_ai.operation.name"):
        case "chat":
            tokens = ""
            if "gen_ai.usage.input_tokens" in a:
                tokens = (
                    f" {a['gen_ai.usage.input_tokens']}+{a['gen_ai.usage.output_tokens']} tokens"
                )
            return f"turn {a['agentledger.turn']}.{a['agentledger.attempt']}{tokens}"
        case "execute_tool":
            return f"{a['gen_ai.tool.call.id']} {a.get('agentledger.call.status', '')}".rstrip()
        case "invoke_agent":
            return f"{a.get('agentledger.run.status', 'live')} ${a.get('agentledger.cost_usd', 0)}"
    return ""

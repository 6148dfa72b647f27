"""A concurrency key a tool declares (`@tool(limits=[...])`, an MCP tool's policy):
a key shared by every run and worker of the deployment, and how many calls may
hold it at once. The key is a template of `:`-separated segments; the first is
always literal (so no filled-in value can pick the key's namespace), each other
is literal or one whole placeholder: `{tenant}` (the run's principal's tenant)
or `{field}` (the call's argument of that name). `agentledger.events.limits`
fills them in."""

from __future__ import annotations

from pydantic import Field

from agentledger.schemas.spec_base import Spec

_WORD = r"[A-Za-z0-9_.@-]{1,64}"
KEY_TEMPLATE = rf"^{_WORD}(:({_WORD}|\{{[A-Za-z_][A-Za-z0-9_]{{0,63}}\}}))*$"
MAX_KEY_CHARS = 200
MAX_LIMITS = 8  # keys one tool may name


class Limit(Spec):
    key: str = Field(
        max_length=MAX_KEY_CHARS,
        pattern=KEY_TEMPLATE,
        description="a key shared by every run, e.g. `svc:payments` or `tenant:{tenant}:payments`",
    )
    max: int = Field(ge=1, le=1_000_000, description="calls holding the key at once, across runs")

"""Where a run's model requests may go, and with which of a worker's secrets: a spec
may name only the endpoints and credential variables its deployment lists — else a
publisher could send the operator's key, or any variable of the worker, to a server
of its own. One rule, asked when a spec is submitted (the spec check, naming each
field) and again by the worker's adapter before it sends anything."""

from __future__ import annotations

from collections.abc import Sequence


def reach_refusals(
    where: str,
    url: str | None,
    variable: str | None,
    *,
    urls: Sequence[str],
    variables: Sequence[str],
) -> list[tuple[str, str]]:
    """(field, reason) for a base `url` and a credential `variable` the model's settings
    at `where` name (None: its provider's own) that the deployment does not list."""
    refused: list[tuple[str, str]] = []
    if url is not None and url.rstrip("/") not in urls:
        reason = (
            f"{url!r} is not one of this deployment's model endpoints "
            f"(AGENTLEDGER_MODEL_ENDPOINTS: {', '.join(urls) or 'none'})"
        )
        refused.append((f"{where}.base_url", reason))
    if variable is not None and variable not in variables:
        reason = (
            f"{variable!r} is not a variable this deployment lets a model spec name "
            f"(AGENTLEDGER_MODEL_KEY_VARS: {', '.join(variables) or 'none'})"
        )
        refused.append((f"{where}.api_key_env", reason))
    return refused

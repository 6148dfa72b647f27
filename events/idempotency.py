"""Operation keys. The call id identifies an attempt; the operation key
identifies the business operation, so the same write proposed again — under a
new call id — is recognised and not done twice.

Scoped by meaning: without `key_fields` a write's key is scoped to its run
(tenant + run + tool + canonical arguments + the resources it writes), so a retry
in the same run is replayed while the same arguments in another run are another
operation. With `key_fields` (an explicit business key, such as an order id)
the key spans runs: tenant + tool + those fields + the resources written.
Keys are digests: no argument value ever appears in one (nor in a Redis key
built from it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def operation_key(
    tenant: str,
    tool: str,
    args: Mapping[str, Any],
    key_fields: Sequence[str] | None,
    writes: Sequence[str] = (),
    *,
    run_id: str,
) -> str:
    if key_fields:
        what: list[Any] = [tenant, tool, {k: args.get(k) for k in key_fields}, sorted(writes)]
    else:
        what = [tenant, run_id, tool, dict(args), sorted(writes)]
    digest = hashlib.sha256(canonical(what).encode()).hexdigest()[:32]
    return f"{tool}:{digest}"


def request_hash(args: Mapping[str, Any]) -> str:
    """Same key with a different request is an idempotency conflict."""
    return hashlib.sha256(canonical(dict(args)).encode()).hexdigest()[:32]

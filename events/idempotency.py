"""Operation keys. The call id identifies an attempt; the operation key
identifies the business operation, so the same write proposed again — under a
new call id, or by another run — is recognised. Default: tenant + tool +
canonical arguments + the resources it writes (the objects it acts on: the
same arguments against another store are another operation); a tool may name
the fields that make the key instead of all its arguments."""

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
) -> str:
    chosen = {k: args.get(k) for k in key_fields} if key_fields else dict(args)
    what = [tenant, tool, chosen, sorted(writes)]
    digest = hashlib.sha256(canonical(what).encode()).hexdigest()[:32]
    return f"{tool}:{digest}"


def request_hash(args: Mapping[str, Any]) -> str:
    """Same key with a different request is an idempotency conflict."""
    return hashlib.sha256(canonical(dict(args)).encode()).hexdigest()[:32]

"""The operator's price table (AGENTLEDGER_PRICES_FILE): a YAML mapping of model id
(or id prefix) to its price in US dollars per million tokens, for the models the
built-in table does not know (a self-hosted model, a proxy's names) or prices
otherwise. The intake writes the price of each model a run names into the run's
spec when the spec does not price it itself (`agentledger.events.pricing.with_operator_prices`),
so the run's log says what it was priced at. Read when first asked and again when
the file changes; a bad file is a ConfigError naming the variable and the entry.

    # prices.yaml
    qwen3-coder: {input: 0.2, output: 0.8}
    gpt-5-mini: {input: 0.25, output: 2.0, cache_read: 0.025}
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from pydantic import ValidationError

from agentledger.schemas.spec import Price
from agentledger.services.bounded_yaml import OverLimit, problem, safe_load
from agentledger.services.errors import ConfigError
from agentledger.services.settings import Settings

VARIABLE = "AGENTLEDGER_PRICES_FILE"
MAX_BYTES = 1 << 20
_LOCK = threading.Lock()
_READ: dict[str, tuple[tuple[int, int], Mapping[str, Price]]] = {}  # path: (mtime, size), table


def operator_prices(settings: Settings) -> Mapping[str, Price]:
    """The operator's table ({} when no file is set)."""
    path = settings.prices_file
    if path is None:
        return {}
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(VARIABLE, f"cannot read {path!r}: {exc.strerror or exc}") from None
    stamp = (st.st_mtime_ns, st.st_size)
    with _LOCK:
        seen = _READ.get(path)
        if seen is not None and seen[0] == stamp:
            return seen[1]
    table = _read(path, st.st_size)
    with _LOCK:
        _READ[path] = (stamp, table)
    return table


def _read(path: str, size: int) -> Mapping[str, Price]:
    if size > MAX_BYTES:
        raise ConfigError(VARIABLE, f"{path!r} is {size:,} bytes, over {MAX_BYTES:,}")
    try:
        with open(path, encoding="utf-8") as f:
            data = safe_load(f.read())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(VARIABLE, f"cannot read {path!r}: {exc}") from None
    except OverLimit as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {problem(exc)}") from None
    except Exception as exc:  # noqa: BLE001 -- the YAML parser's own errors, said in one line
        raise ConfigError(VARIABLE, f"{path!r} is not YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and k for k in data):
        raise ConfigError(VARIABLE, f"{path!r} must map model ids to prices")
    table: dict[str, Price] = {}
    for model, given in data.items():
        try:
            table[model] = Price.model_validate(given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            said = f"{where}: {first['msg']}" if where else first["msg"]
            raise ConfigError(VARIABLE, f"{path!r}: {model}: {said}") from None
    return table

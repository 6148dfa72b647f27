"""The archive's list of its runs, so the runs list (`agentledger runs`, the web
view) pages over archived runs as over those Redis holds: an empty blob per
archived run named by when it was created and its id,
`<prefix>/catalog/<day>/<created ms>_<run id, base64url>` (the id encoded: no
run id names a path of its own), one folder per UTC day, so a page reads the
days it needs and no more. An entry is written before its run's segment: a
listed run whose segment is missing (a crash between the two) loads as no run
and is left out, while a segment is never archived unlisted."""

from __future__ import annotations

import base64
import binascii

from agentledger.services.adapters.archive.port import ColdStore
from agentledger.services.adapters.reading.port import Position

FOLDER = "catalog"
DAY_MS = 86_400_000


def entry_name(prefix: str, run_id: str, created_ms: int) -> str:
    code = base64.urlsafe_b64encode(run_id.encode()).decode().rstrip("=")
    return f"{prefix}/{FOLDER}/{created_ms // DAY_MS:08d}/{created_ms:015d}_{code}"


def position_of(name: str) -> Position | None:
    """The (created ms, run id) an entry's name says; None for a name no entry has."""
    ms, _, code = name.partition("_")
    if not ms.isdigit() or not code:
        return None
    try:
        padded = code + "=" * (-len(code) % 4)
        run_id = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (float(int(ms)), run_id) if run_id else None


def runs_before(
    cold: ColdStore, prefix: str, cursor: Position, floor_ms: float, n: int
) -> tuple[list[Position], bool]:
    """As `RunReader.runs_before`: up to `n` archived runs before `cursor` and created
    at or after `floor_ms`, newest first, and whether none are left beyond them."""
    days = sorted((int(d) for d in cold.names(f"{prefix}/{FOLDER}") if d.isdigit()), reverse=True)
    found: list[Position] = []
    for day in days:
        if day * DAY_MS > cursor[0]:
            continue  # the whole day is after the cursor
        if (day + 1) * DAY_MS <= floor_ms or len(found) > n:
            break
        listed = (position_of(name) for name in cold.names(f"{prefix}/{FOLDER}/{day:08d}"))
        found += [p for p in listed if p is not None and p < cursor and p[0] >= floor_ms]
    found.sort(reverse=True)
    return found[:n], len(found) <= n

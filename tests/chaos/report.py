"""The chaos figures as text."""

from __future__ import annotations

from tests.chaos.tally import Figures


def table(results: list[Figures]) -> str:
    lines = []
    for f in results:
        d = f.as_dict()
        rec = (
            f"recovery p50 {d['recovery_p50_s']}s max {d['recovery_max_s']}s"
            if d["recovery_p50_s"] is not None
            else "recovery -"
        )
        lines.append(
            f"{f.scenario}: runs {f.runs}, kills {f.kills}, lost {f.lost}, stuck {f.stuck}, "
            f"duplicate {f.duplicate}, missing {f.missing} (of {f.side_effects} side effects), "
            f"{rec}, {d['elapsed_s']}s"
        )
        lines.append(f"  ended {d['ended']}; sent to a human {d['to_human'] or 0}")
        if f.extra:
            lines.append("  " + ", ".join(f"{k} {v}" for k, v in f.extra.items()))
        for failure in f.failures:
            lines.append(f"  FAILED: {failure}")
    return "\n".join(lines)

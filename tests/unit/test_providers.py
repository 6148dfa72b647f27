"""Every model spec class has its provider's row, and the core asks the spec's
capabilities, never its type: no module of events/ names a provider's spec class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from agentledger.schemas.spec import ModelSpec
from agentledger.services.adapters.models.providers import PROVIDERS

ROOT = Path(__file__).resolve().parents[2]


def _spec_classes() -> list[type]:
    union = get_args(ModelSpec)[0]
    return [get_args(member)[0] for member in get_args(union)]


def test_every_model_spec_class_has_a_provider_row() -> None:
    classes = _spec_classes()
    assert len(classes) >= 3
    assert set(classes) == set(PROVIDERS), (
        "a spec class without its row, or a row without its class"
    )


def test_the_core_never_checks_a_provider_type() -> None:
    names = "|".join(c.__name__ for c in _spec_classes())
    checks = re.compile(rf"isinstance\([^)]*\b({names})\b|case ({names})\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "events").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if checks.search(line)
    ]
    assert found == []

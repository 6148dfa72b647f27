"""A tool whose model-facing interface is incomplete is registered with one
warning line naming the tool and what the model will not see: no docstring (an
empty description), parameters without type hints (`{}` in the input schema,
nothing checked). A documented, typed tool registers silently."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentledger.services.adapters.tools.registry import REGISTRY, ToolContext, tool

LOGGER = "agentledger.services.adapters.tools.registry"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING
    ]


def registered(name: str) -> Any:
    [found] = [t for t in REGISTRY.of_module(__name__) if t.spec.name == name]
    return found


def test_a_tool_with_neither_docstring_nor_hints_is_registered_with_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):

        @tool(read_only=True, name="bare_registration_test")
        def bare(sku, qty, ctx: ToolContext):
            return {}

    [said] = warnings_of(caplog)
    assert "\n" not in said
    assert said.startswith(f"tool 'bare_registration_test' of module {__name__!r} has no docstring")
    assert "the model sees an empty description" in said
    assert "no type hint for sku, qty: the model is told any value will do" in said
    schema = registered("bare_registration_test").spec.input_schema
    assert schema["properties"] == {"sku": {}, "qty": {}}  # what the model is told


def test_a_tool_missing_only_hints_names_only_the_parameters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):

        @tool(read_only=True, name="half_typed_registration_test")
        def half(sku: str, qty) -> dict:
            """Reserve some."""
            return {}

    [said] = warnings_of(caplog)
    assert said.endswith("has no type hint for qty: the model is told any value will do ({} in its "
                         "input schema) and none is checked")  # fmt: skip


def test_a_description_given_stands_for_the_docstring(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):

        @tool(read_only=True, name="described_registration_test", description="Look it up.")
        def described(sku: str, ctx: ToolContext) -> dict:
            return {}

    assert warnings_of(caplog) == []


def test_a_documented_typed_tool_registers_silently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):

        @tool(read_only=True, name="typed_registration_test")
        def typed(sku: str, ctx: ToolContext, qty: int = 1) -> dict:
            """Look up a SKU."""
            return {}

    assert warnings_of(caplog) == []

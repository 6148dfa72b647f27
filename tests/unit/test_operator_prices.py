"""The operator's price table: a model a spec does not price itself is priced by
the operator's entry (exact id, else its longest prefix), written into the run's
spec so the log says what it was priced at; the spec's own price wins, the
operator's wins over the built-in table; a bad file is refused naming the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger.events.pricing import price_of, with_operator_prices
from agentledger.schemas.spec import Price, RunSpec
from agentledger.services.errors import ConfigError
from agentledger.services.prices_file import operator_prices
from agentledger.services.settings import Settings

QWEN = Price(input=0.2, output=0.8)
CHEAP = Price(input=0.01, output=0.02)


def spec(model: dict[str, Any], prices: dict[str, Any] | None = None) -> RunSpec:
    return RunSpec.model_validate({
        "task": "t", "principal": {"id": "p", "tenant": "t"}, "model": model,
        "budgets": {"prices": prices or {}},
    })  # fmt: skip


def test_a_model_the_spec_does_not_price_gets_the_operators_entry_by_its_prefix() -> None:
    s = with_operator_prices(spec({"openai": {"model": "qwen3-coder-30b"}}), {"qwen3": QWEN})
    assert s.budgets.prices == {"qwen3": QWEN}
    assert price_of("qwen3-coder-30b", s.budgets.prices) == QWEN


def test_the_fallback_model_is_priced_too_and_the_specs_own_price_wins() -> None:
    own = {"gpt-5-mini": {"input": 9, "output": 9}}
    model = {"openai": {"model": "gpt-5-mini", "fallback_model": "gpt-5"}}
    s = with_operator_prices(spec(model, own), {"gpt-5": CHEAP, "gpt-5-mini": CHEAP})
    assert s.budgets.prices == {"gpt-5-mini": Price(input=9, output=9), "gpt-5": CHEAP}


def test_the_operators_price_wins_over_the_built_in_table_and_nothing_else_is_added() -> None:
    s = with_operator_prices(
        spec({"openai": {"model": "gpt-5-mini"}}), {"gpt-5-mini": CHEAP, "other": QWEN}
    )
    assert price_of("gpt-5-mini", s.budgets.prices) == CHEAP
    untouched = spec({"scripted": [{"end_turn": "x"}]})
    assert with_operator_prices(untouched, {"gpt": QWEN}) is untouched


def test_the_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("qwen3: {input: 0.2, output: 0.8}\n")
    settings = Settings(prices_file=str(path))
    assert operator_prices(settings) == {"qwen3": QWEN}
    path.write_text("qwen3: {input: 0.01, output: 0.02}\nllama: {input: 0.2, output: 0.8}\n")
    assert operator_prices(settings) == {"qwen3": CHEAP, "llama": QWEN}
    assert operator_prices(Settings()) == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "qwen3: {input: -1, output: 0.8}\n",
            "qwen3: input: Input should be greater than or equal to 0",
        ),
        ("qwen3: {input: 1}\n", "qwen3: output: Field required"),
        (
            "qwen3: {input: 1, output: 1, surcharge: 5}\n",
            "qwen3: surcharge: Extra inputs are not permitted",
        ),
        ("- qwen3\n", "must map model ids to prices"),
        ("a: &a [*a]\n", "inside its own anchor"),
        ("qwen3: {input: 1\n", "is not YAML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_variable_and_the_entry(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        operator_prices(Settings(prices_file=str(path)))
    assert raised.value.name == "AGENTLEDGER_PRICES_FILE"
    assert said in raised.value.reason


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        operator_prices(Settings(prices_file=str(tmp_path / "nope.yaml")))
    assert "nope.yaml" in raised.value.reason

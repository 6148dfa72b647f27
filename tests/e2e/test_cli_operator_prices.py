"""A cost budget on a model only the operator's price table prices: `run` refuses
it without the table (exit 2, naming `budgets.prices`), runs it with the table —
the run's spec then holds the price it was priced at — and a broken table
refuses to start, naming AGENTLEDGER_PRICES_FILE, before anything is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2ekit import Cli, copy_example, of_type


@pytest.fixture
def unpriced(tmp_path: Path) -> Path:
    steering = copy_example("steering", tmp_path)
    spec = steering / "cost_unpriced.yaml"
    text = (steering / "cost.yaml").read_text()
    spec.write_text(text.replace("  prices: {scripted: {input: 20.0, output: 20.0}}\n", ""))
    assert "prices" not in spec.read_text()
    return spec


def test_a_cost_budget_is_priced_by_the_operators_table(
    cli: Cli, unpriced: Path, tmp_path: Path
) -> None:
    refused = cli("run", unpriced)
    assert refused.returncode == 2
    assert "budgets.prices" in refused.stderr and "'scripted'" in refused.stderr
    assert cli.runs() == []

    table = tmp_path / "prices.yaml"
    table.write_text("scripted: {input: 20.0, output: 20.0}\n")
    cli.env["AGENTLEDGER_PRICES_FILE"] = str(table)
    code, summary = cli.run_json(unpriced)
    assert (code, summary["status"]) == (3, "budget_exhausted")
    events = cli.events(summary["run_id"])
    [created] = of_type(events, "RunCreated")
    assert created["spec"]["budgets"]["prices"]["scripted"]["input"] == 20.0
    [exhausted] = of_type(events, "RunBudgetExhausted")
    assert exhausted["budget"] == "cost" and 0 < exhausted["used"] <= exhausted["limit"]


def test_a_broken_price_table_refuses_to_start_naming_it(
    cli: Cli, unpriced: Path, tmp_path: Path
) -> None:
    table = tmp_path / "prices.yaml"
    table.write_text("scripted: {input: cheap, output: 1}\n")
    cli.env["AGENTLEDGER_PRICES_FILE"] = str(table)
    done = cli("run", unpriced)
    assert done.returncode == 2, done.stderr
    assert "AGENTLEDGER_PRICES_FILE" in done.stderr and "scripted: input" in done.stderr
    assert "Traceback" not in done.stderr
    assert cli.runs() == []

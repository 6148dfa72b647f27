"""Every user-given timeout has an operator maximum (AGENTLEDGER_MAX_COMMAND_
TIMEOUT_S, _TOOL_, _MCP_, 600 s each by default): a spec or servers file asking
more is refused when it is read, naming the field and the maximum, and what
runs anyway (a spec read elsewhere) is held to it. Checks count against the
run's wall clock: a check's timeout is held to what is left of it, and a run
whose wall clock ends during acceptance ends `timeout`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from journeys import reach
from runlog import LEASE_S, T0, Log, check, do_model_turn, make_spec, text

from agentledger.events.acceptance_step import (
    check_timeout_s,
    claim_s,
    may_take_long,
    record_acceptance,
    record_check_stopped,
    start_acceptance,
    wall_clock_left,
)
from agentledger.events.status import RunStatus
from agentledger.events.types import AcceptanceChecked, RunTimedOut, ToolCallValidated
from agentledger.events.validation_step import Finding, validate_call
from agentledger.schemas.spec import RunSpec, ToolSpec
from agentledger.services.adapters.tools.mcp.config import McpConfigError, load_servers_file
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.spec_check import spec_problems
from agentledger.services.settings import Settings, from_env

R = RunStatus
MAX = Settings()


def spec_with(**changes: Any) -> RunSpec:
    data: dict[str, Any] = {
        "task": "t",
        "principal": {"id": "p", "tenant": "t"},
        "model": {"scripted": [{"end_turn": "done"}]},
        **changes,
    }
    return RunSpec.model_validate(data)


# --- the settings ---------------------------------------------------------------------


def test_each_maximum_is_600_seconds_unless_the_operator_says() -> None:
    assert (MAX.max_command_timeout_s, MAX.max_tool_timeout_s, MAX.max_mcp_timeout_s) == (
        600.0, 600.0, 600.0,
    )  # fmt: skip
    chosen = from_env({"AGENTLEDGER_MAX_COMMAND_TIMEOUT_S": "3600"})
    assert chosen.max_command_timeout_s == 3600.0


@pytest.mark.parametrize(
    "var",
    [
        "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S",
        "AGENTLEDGER_MAX_TOOL_TIMEOUT_S",
        "AGENTLEDGER_MAX_MCP_TIMEOUT_S",
    ],
)
@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_a_maximum_that_is_no_bound_is_refused_naming_its_variable(var: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_env({var: value})
    assert err.value.name == var


# --- refused when read ------------------------------------------------------------------


def test_a_command_check_asking_more_than_the_maximum_is_refused_naming_field_and_maximum() -> None:
    spec = spec_with(
        acceptance=[{"file": "a", "contains": "x"}, {"command": "sleep 1", "timeout_s": 1e9}]
    )
    [problem] = spec_problems(spec, None, settings=MAX)
    assert problem.field == "acceptance.1.timeout_s"
    assert "1e+09 s is over this deployment's maximum of 600 s" in problem.reason
    assert "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S" in problem.reason


def test_a_spec_tool_timeout_over_the_maximum_is_refused() -> None:
    spec = spec_with(budgets={"tool_timeout_s": 601})
    [problem] = spec_problems(spec, None, settings=MAX)
    assert problem.field == "budgets.tool_timeout_s"
    assert "maximum of 600 s (AGENTLEDGER_MAX_TOOL_TIMEOUT_S)" in problem.reason


def test_timeouts_within_the_maxima_and_a_checks_default_are_never_refused() -> None:
    low = MAX.with_(max_command_timeout_s=60.0)
    spec = spec_with(acceptance=[{"command": "true"}, {"command": "true", "timeout_s": 60}])
    assert spec_problems(spec, None, settings=low) == []  # the default 300 s is held to 60 when run


def test_without_the_deployments_settings_no_maximum_is_checked() -> None:
    spec = spec_with(acceptance=[{"command": "sleep 1", "timeout_s": 1e9}])
    assert spec_problems(spec, None) == []  # `submit`: the intake checks with its own


def test_an_mcp_servers_file_asking_more_than_the_maximum_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "mcp.yaml"
    file.write_text(
        "servers:\n  fs:\n    command: [srv]\n    timeout_s: 30\n"
        "    tools:\n      slow: {timeout_s: 3600}\n"
    )
    assert load_servers_file(str(file)).servers["fs"].tools["slow"].timeout_s == 3600
    with pytest.raises(McpConfigError) as err:
        load_servers_file(str(file), max_timeout_s=600.0)
    assert "servers.fs.tools.slow.timeout_s: 3600 s is over this deployment's maximum" in str(
        err.value
    )
    assert "AGENTLEDGER_MAX_MCP_TIMEOUT_S" in str(err.value)


# --- held when run ----------------------------------------------------------------------


def test_a_tool_calls_timeout_is_held_to_the_operators_maximum() -> None:
    log = reach(R.VALIDATING)
    tool = ToolSpec(
        name="read_file", description="d", input_schema={}, read_only=True, timeout_s=3600
    )
    [validated] = validate_call(
        log.s, "a", found=Finding(tool=tool, max_timeout_s=600.0), known_tools=["read_file"], now=T0
    )
    assert isinstance(validated, ToolCallValidated) and validated.timeout_s == 600.0
    [own] = validate_call(log.s, "a", found=Finding(tool=tool), known_tools=["read_file"], now=T0)
    assert isinstance(own, ToolCallValidated) and own.timeout_s == 3600


def test_a_checks_timeout_is_its_own_held_to_the_maximum_and_the_wall_clock() -> None:
    free = Log.created().s  # no wall clock
    assert check_timeout_s(free, 300, now=T0 + 50, most_s=600) == 300
    assert check_timeout_s(free, 1e9, now=T0 + 50, most_s=600) == 600
    timed = Log.created(budgets={"max_wall_clock_s": 100}).s
    assert wall_clock_left(timed, now=T0 + 40) == 60
    assert check_timeout_s(timed, 300, now=T0 + 40, most_s=600) == 60
    assert check_timeout_s(timed, 300, now=T0 + 140, most_s=600) == 0  # over: it does not run


def test_an_acceptance_claim_lasts_the_checks_held_timeouts_plus_the_grace() -> None:
    spec = spec_with(
        acceptance=[{"command": "a", "timeout_s": 1e9}, {"command": "b", "timeout_s": 5}]
    )
    assert claim_s(spec, grace_s=2.0, most_s=600.0) == 2.0 + 600 + 5


def test_a_run_whose_wall_clock_ends_during_acceptance_times_out_with_its_checks_recorded() -> None:
    log = Log.created(budgets={"max_wall_clock_s": 100})
    do_model_turn(log, text("done"))
    [started] = log.decide(start_acceptance, now=T0 + 10, lease_s=LEASE_S)
    events = record_acceptance(log.s, attempt=started.attempt, results=[check(True)], now=T0 + 100)  # type: ignore[union-attr]
    assert [type(e) for e in events] == [AcceptanceChecked, RunTimedOut]
    assert record_acceptance(log.s, attempt=1, results=[check(True)], now=T0 + 99)[-1].type == (
        "RunCompleted"
    )


def test_a_stopped_check_is_recorded_once_and_only_on_a_run_that_was_cancelled_or_timed_out() -> (
    None
):
    log = Log.created(budgets={"max_wall_clock_s": 100})
    do_model_turn(log, text("done"))
    [started] = log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    stop = {
        "attempt": started.attempt, "index": 0, "check": "c", "requested_at": T0 + 1,  # type: ignore[union-attr]
        "stopped_at": T0 + 2, "signals": ("SIGTERM",), "detail": "SIGTERM",
    }  # fmt: skip
    assert record_check_stopped(log.s, **stop) == []  # still accepting: nothing stopped it
    log.append(RunTimedOut(limit_s=100, elapsed_s=101, detail="late"))
    assert record_check_stopped(log.s, **stop) != []
    log.decide(record_check_stopped, **stop)
    assert record_check_stopped(log.s, **stop) == []
    assert record_check_stopped(log.s, **{**stop, "attempt": 2}) == []


def test_only_checks_that_run_code_take_long() -> None:
    assert not may_take_long(spec_with(acceptance=[{"file": "a", "contains": "x"}]))
    assert may_take_long(make_spec())  # pytest -q

"""Each command imports what it uses, no more: `--version` and `--help` answer
from the argument parser alone, and the read commands never load the worker
pools (dramatiq), the model SDK, the web view, the MCP client, the metrics or
the trace exporter. What a command imported is read from Python's own
`-X importtime` report (PYTHONPROFILEIMPORTTIME) of a real CLI process: a
property of the code, not a timing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from e2ekit import Cli, copy_example

# the packages only `run`, `workers` or `ui` need; opentelemetry's exporter and
# trace SDK are our tracing adapter's; its metrics are what redis-py 7.2+ would
# load on `import redis` (first_import hides them: the report shows redis-py's
# attempt at each package, refused, and nothing of what they hold)
NOT_FOR_READS = (
    "anthropic", "dramatiq", "starlette", "uvicorn", "mcp", "prometheus_client", "httpx",
    "opentelemetry.exporter", "opentelemetry.sdk.trace", "opentelemetry.metrics._internal",
    "opentelemetry.sdk.metrics._internal",
)  # fmt: skip
# what answering `--version` or `--help` needs none of
NOT_FOR_ARGUMENTS = ("redis", "pydantic", "msgpack", "yaml", "events", "agentledger.schemas.spec")


def imported(cli: Cli, *args: str) -> set[str]:
    """The modules `agentledger ARGS` imported (each command's exit code is its own business)."""
    profiling = dataclasses.replace(cli, env={**cli.env, "PYTHONPROFILEIMPORTTIME": "1"})
    done = profiling(*args)
    report = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert report, f"no import report; stderr:\n{done.stderr}"
    return {line.rsplit("|", 1)[1].strip() for line in report[1:]}  # [0] is the header


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def ran(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> tuple[Cli, str]:
    cli = make_cli(tmp_path_factory.mktemp("imports"))
    copy_example("inventory", cli.cwd)
    code, summary = cli.run_json(cli.cwd / "inventory" / "spec.yaml")
    assert code == 0, summary
    return cli, str(summary["run_id"])


@pytest.mark.parametrize(
    "args", [("--version",), ("--help",), ("submit", "--help"), ("runs", "--bogus")]
)
def test_answering_from_the_arguments_imports_no_client_and_no_model(
    cli: Cli, args: tuple[str, ...]
) -> None:
    assert loaded(imported(cli, *args), NOT_FOR_ARGUMENTS) == []


@pytest.mark.parametrize(
    "command",
    [
        ("status", "{run}"), ("runs",), ("tail",), ("tail", "--run", "{run}"), ("replay", "{run}"),
        ("context", "{run}", "--turn", "1"), ("trace", "{run}"), ("raw", "{run}"),
        ("local", "status"), ("status", "r-none"),
    ],
)  # fmt: skip
def test_read_commands_load_no_worker_pools_model_sdk_web_or_exporter(
    ran: tuple[Cli, str], command: tuple[str, ...]
) -> None:
    cli, run = ran
    args = [part.format(run=run) for part in command]
    assert loaded(imported(cli, *args), NOT_FOR_READS) == [], args


def test_a_bad_setting_is_refused_before_any_client_or_model_is_imported(cli: Cli) -> None:
    """The environment is read right after the arguments: a setting it gets wrong is the
    same one line and exit 2 as from the command, without the command's imports."""
    bad = dataclasses.replace(cli, env={**cli.env, "AGENTLEDGER_LEASE_S": "lots"})
    profiling = dataclasses.replace(bad, env={**bad.env, "PYTHONPROFILEIMPORTTIME": "1"})
    done = profiling("status", "--json", "r-1")
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert said == [
        "agentledger: bad configuration: AGENTLEDGER_LEASE_S: expected a number, got 'lots'"
    ]
    assert '"variable": "AGENTLEDGER_LEASE_S"' in done.stdout
    modules = {
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()[1:] if "|" in line
    }
    assert loaded(modules, ("redis", "pydantic", "msgpack", "yaml")) == []

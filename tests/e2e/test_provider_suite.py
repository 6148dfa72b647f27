"""One suite, both model providers: Claude through the anthropic SDK against the
Messages API's stand-in, and an OpenAI-compatible server through the openai SDK
against the Chat Completions stand-in, driven through the real CLI with the same
provider-neutral script (`provider_kit`). Parallel calls answered in order, a call
cut at the output limit never run, a refusal (and its fallback model), token and
cost budgets, a worker killed while its request is in flight, `replay --rerun` and
`context` must hold alike for both. And a tenant's spec may not aim the openai
provider at an endpoint, or a credential variable, the deployment does not list."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, by_call, copy_example, of_type, start_workers, stop_workers, types
from provider_kit import Say, Side, Spec, Use, opened, turn_of

from tests.standin.chat_completions import ChatStandin

RUN_TIMEOUT_S = 180.0
PARALLEL = (
    Say("Checking both.", (Use("call_p1", "lookup_stock", {"sku": "A1"}),
                           Use("call_p2", "lookup_stock", {"sku": "B7"}))),
    Say(None, (Use("call_p3", "reserve_stock", {"sku": "A1", "qty": 2}),)),
    Say("A1: 3 were available; 2 are reserved."),
)  # fmt: skip


@pytest.fixture(scope="module", params=["anthropic", "openai"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def example(cli: Cli) -> Path:
    return copy_example("inventory", cli.cwd)


@pytest.fixture
def side(provider: str, cli: Cli) -> Iterator[Side]:
    with opened(provider, cli) as on:
        yield on


@dataclass
class Ran:
    cli: Cli
    side: Side
    code: int
    summary: dict[str, Any]
    said: str  # what `run` printed, stdout and stderr
    events: list[dict[str, Any]]
    bodies: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return str(self.summary["run_id"])


def run(cli: Cli, side: Side, example: Path, spec: Spec, *says: Say) -> Ran:
    """`run --json` of `spec` on `side`'s stand-in, playing `says` in order."""
    side.play(*says)
    done = cli("run", "--json", spec.on(side, example))
    assert done.stdout.strip(), f"no summary; stderr:\n{done.stderr}"
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert "run_id" in summary, summary
    said = done.stdout + done.stderr
    events = cli.events(summary["run_id"])
    return Ran(cli, side, done.returncode, summary, said, events, side.bodies())


@pytest.fixture(scope="module")
def parallel(
    provider: str, tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Ran]:
    cli = make_cli(tmp_path_factory.mktemp(f"suite_{provider}"))
    example = copy_example("inventory", cli.cwd)
    with opened(provider, cli) as on:
        yield run(cli, on, example, Spec(), *PARALLEL)


def rerun_matches(cli: Cli, side: Side, ran: Ran) -> dict[str, object]:
    """`replay RUN --rerun`: no divergence, no context that differs, no request to the API."""
    asked = len(side.requests())
    done = cli("replay", ran.run_id, "--rerun", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["divergence"] is None, report
    assert report["context_differs_at_turns"] == [], report
    assert len(side.requests()) == asked  # the rerun asked the log, not the API
    return report


# 1 -------------------------------------------------------------------------------------------


def test_parallel_calls_are_answered_in_order_with_one_request_per_turn(parallel: Ran) -> None:
    assert (parallel.code, parallel.summary["status"]) == (0, "completed"), parallel.summary
    calls = parallel.summary["tool_calls"]
    assert [(c["call_id"], c["status"]) for c in calls] == [
        ("call_p1", "succeeded"), ("call_p2", "succeeded"), ("call_p3", "succeeded"),
    ]  # fmt: skip
    assert len(parallel.bodies) == parallel.summary["turns"] == len(PARALLEL)
    assert [turn_of(b) for b in parallel.bodies] == [1, 2, 3]
    for body, before in zip(parallel.bodies[1:], PARALLEL, strict=False):
        assert parallel.side.asked(body) == before.ids
        assert parallel.side.answered(body) == before.ids
    started = [s["call_id"] for s in of_type(parallel.events, "ToolCallStarted")]
    assert sorted(started) == ["call_p1", "call_p2", "call_p3"]
    for recorded in parallel.side.requests():
        assert recorded.headers["authorization"] == f"Bearer {parallel.side.key}"
        assert recorded.body["model"] == parallel.side.model_id and recorded.body["stream"] is True
        assert parallel.side.key.encode() not in recorded.raw  # in its header only
    raw = parallel.cli("raw", parallel.run_id)
    assert raw.returncode == 0, raw.stderr
    shown = parallel.said + raw.stdout + raw.stderr + json.dumps(parallel.events)
    assert parallel.side.key not in shown


def test_a_rerun_of_parallel_calls_matches_whichever_order_they_ended_in(parallel: Ran) -> None:
    # the calls of one reply end in the scheduler's order, in the log and in the rerun
    assert rerun_matches(parallel.cli, parallel.side, parallel)["status"] == "completed"


# 2 -------------------------------------------------------------------------------------------

RESERVE = {"sku": "A1", "qty": 2}


def test_a_call_cut_at_the_output_limit_never_runs_the_model_is_told_and_the_run_goes_on(
    cli: Cli, side: Side, example: Path
) -> None:
    ran = run(
        cli, side, example, Spec(policies={"on_max_tokens": "continue"}),
        Say("Reserving.", (Use("call_c1", "reserve_stock", RESERVE, cut_at=12),), cut=True),
        Say(None, (Use("call_c2", "reserve_stock", RESERVE),)),
        Say("Reserved 2 of A1."),
    )  # fmt: skip
    assert (ran.code, ran.summary["status"]) == (0, "completed"), ran.summary
    assert by_call(ran.events, "call_c1") == ["ToolCallProposed", "ToolCallRejected"]
    assert "call_c1" not in [s["call_id"] for s in of_type(ran.events, "ToolCallStarted")]
    [rejected] = [r for r in of_type(ran.events, "ToolCallRejected") if r["call_id"] == "call_c1"]
    assert "cut off by max_tokens" in rejected["error"]["message"]
    assert of_type(ran.events, "ModelResponded")[0]["stop_reason"] == "max_tokens"
    told = side.answers(ran.bodies[1])
    assert list(told) == ["call_c1"] and "not executed" in told["call_c1"]
    assert by_call(ran.events, "call_c2")[-1] == "ToolCallSucceeded"
    assert json.loads((cli.workspace(ran.run_id) / "stock.json").read_text())["A1"]["reserved"] == 2
    # the rerun is told of the cut call as the run was: the same context, turn after turn
    assert rerun_matches(cli, side, ran)["status"] == "completed"


# 3 -------------------------------------------------------------------------------------------

REFUSED = "I can't help with that."


def test_a_refusal_sends_the_run_to_a_person(cli: Cli, side: Side, example: Path) -> None:
    ran = run(cli, side, example, Spec(), Say(refusal=REFUSED))
    assert (ran.code, ran.summary["status"]) == (6, "awaiting_human"), ran.summary
    assert types(ran.events)[-1] == "RunEscalated"
    [escalated] = of_type(ran.events, "RunEscalated")
    assert escalated["reason"] == "refusal"
    assert escalated["detail"].startswith("the model refused at turn 1")
    assert [r["stop_reason"] for r in of_type(ran.events, "ModelResponded")] == ["refusal"]
    assert len(ran.bodies) == 1


def test_a_refused_request_goes_once_to_the_fallback_model_without_the_refused_turn(
    cli: Cli, side: Side, example: Path
) -> None:
    fallback = f"{side.model_id}-fallback"
    ran = run(
        cli, side, example, Spec(model={"fallback_model": fallback}),
        Say(refusal=REFUSED), Say(None, (Use("call_f1", "lookup_stock", {"sku": "A1"}),)),
        Say("A1: 3 available."),
    )  # fmt: skip
    assert (ran.code, ran.summary["status"]) == (0, "completed"), ran.summary
    first, second, third = ran.bodies
    assert [b["model"] for b in ran.bodies] == [side.model_id, fallback, fallback]
    assert second["messages"] == first["messages"]  # the same request, without the refused turn
    assert REFUSED not in json.dumps(second) + json.dumps(third)
    requested = of_type(ran.events, "ModelRequested")
    assert [r["model"] for r in requested] == [side.model_id, fallback, fallback]
    assert [r["stop_reason"] for r in of_type(ran.events, "ModelResponded")] == [
        "refusal", "tool_use", "end_turn",
    ]  # fmt: skip
    # a rerun refuses where the run did and goes on to the fallback as it did
    assert rerun_matches(cli, side, ran)["status"] == "completed"


# 4 -------------------------------------------------------------------------------------------

BIG = (40, 5000)  # (input, output) tokens of one reply


def test_a_reply_past_the_output_token_budget_ends_the_run_budget_exhausted(
    cli: Cli, side: Side, example: Path
) -> None:
    ran = run(
        cli, side, example, Spec(budgets={"max_output_tokens": 100}),
        Say("Looking.", (Use("call_t1", "lookup_stock", {"sku": "A1"}),), usage=BIG),
        Say("A1: 3 available."),
    )  # fmt: skip
    assert (ran.code, ran.summary["status"]) == (3, "budget_exhausted"), ran.summary
    [exhausted] = of_type(ran.events, "RunBudgetExhausted")
    assert (exhausted["budget"], exhausted["limit"]) == ("output_tokens", 100)
    assert exhausted["used"] == 5000
    assert len(ran.bodies) == 1 and ran.summary["usage"]["output_tokens"] == 5000


def test_a_reply_past_the_cost_budget_ends_the_run_budget_exhausted(
    cli: Cli, side: Side, example: Path
) -> None:
    price = {"input": 1.0, "output": 1000.0}  # $ a million tokens: 5000 out is $5
    budgets = {"max_cost_usd": 1.0, "prices": {side.model_id: price}}
    ran = run(
        cli, side, example, Spec(budgets=budgets, model={"max_tokens": 100}),
        Say("Looking.", (Use("call_m1", "lookup_stock", {"sku": "A1"}),), usage=BIG),
        Say("A1: 3 available."),
    )  # fmt: skip
    assert (ran.code, ran.summary["status"]) == (3, "budget_exhausted"), ran.summary
    [exhausted] = of_type(ran.events, "RunBudgetExhausted")
    assert (exhausted["budget"], exhausted["limit"]) == ("cost", 1.0)
    assert exhausted["used"] == pytest.approx(5.0 + 40 / 1e6)
    assert len(ran.bodies) == 1 and ran.summary["cost_usd"] == pytest.approx(5.0 + 40 / 1e6)


# 5 -------------------------------------------------------------------------------------------


@pytest.fixture
def workers(cli: Cli, example: Path) -> Iterator[Callable[[], Any]]:
    procs: list[Any] = []

    def start() -> Any:
        procs.append(start_workers(cli, tools=["inventory_tools"], tool_path=example))
        return procs[-1]

    yield start
    stop_workers(procs)


def wait_for(what: Callable[[], bool], timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s"
        time.sleep(0.05)


def test_a_worker_killed_while_its_request_is_in_flight_is_replaced_and_nothing_is_done_twice(
    cli: Cli, side: Side, example: Path, workers: Callable[[], Any]
) -> None:
    cli.env["AGENTLEDGER_MODEL_LEASE_S"] = "3"  # the killed worker's claim runs out soon
    lookup = Use("call_k1", "lookup_stock", {"sku": "A1"})
    reserve = Use("call_k2", "reserve_stock", RESERVE)
    side.answer_by_turn({
        1: [Say("Looking.", (lookup,))],
        2: [Say(None, (reserve,), delay_s=120.0)],  # until the kill, turn 2 is never answered
        3: [Say("Reserved 2 of A1.")],
    })  # fmt: skip
    first = workers()
    done = cli("submit", "--as", cli.publisher(), Spec().on(side, example))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    wait_for(lambda: any(turn_of(b) == 2 for b in side.bodies()))
    first.workers.kill()  # SIGKILL while the turn-2 request waits for its answer
    first.workers.wait()
    side.answer_by_turn({2: [Say(None, (reserve,))]})  # the turn asked again is answered
    workers()
    events = cli.wait_events(run_id, lambda es: "RunCompleted" in types(es), RUN_TIMEOUT_S)
    assert [r["turn"] for r in of_type(events, "ModelResponded")] == [1, 2, 3]
    turn_2 = [r["attempt"] for r in of_type(events, "ModelRequested") if r["turn"] == 2]
    assert len(turn_2) >= 2 and turn_2 == sorted(set(turn_2))
    started = [s["call_id"] for s in of_type(events, "ToolCallStarted")]
    assert sorted(started) == ["call_k1", "call_k2"]
    assert [s["call_id"] for s in of_type(events, "ToolCallSucceeded")] == ["call_k1", "call_k2"]
    asked_2 = [b for b in side.bodies() if turn_of(b) == 2]
    assert len(asked_2) >= 2 and all(b["messages"] == asked_2[0]["messages"] for b in asked_2)
    assert json.loads((cli.workspace(run_id) / "stock.json").read_text())["A1"]["reserved"] == 2


# 6 -------------------------------------------------------------------------------------------


def test_a_rerun_re_drives_the_recorded_run_and_never_calls_the_api(
    cli: Cli, side: Side, example: Path
) -> None:
    ran = run(
        cli, side, example, Spec(),
        Say("Looking.", (Use("call_r1", "lookup_stock", {"sku": "A1"}),)),
        Say(None, (Use("call_r2", "reserve_stock", RESERVE),)),
        Say("Reserved 2 of A1."),
    )  # fmt: skip
    assert (ran.code, ran.summary["status"]) == (0, "completed"), ran.summary
    done = cli("replay", ran.run_id, "--rerun", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["divergence"] is None and report["status"] == "completed"
    assert report["recorded"] == ran.run_id and report["rerun"] != ran.run_id
    assert report["compared"] >= 10 and report["context_differs_at_turns"] == []
    assert len(side.requests()) == len(ran.bodies) == 3  # the rerun asked the log, not the API
    rerun = cli.events(report["rerun"])
    assert [s["call_id"] for s in of_type(rerun, "ToolCallSucceeded")] == ["call_r1", "call_r2"]


# 7 -------------------------------------------------------------------------------------------


def test_context_rebuilds_and_verifies_each_request_as_the_stand_in_received_it(
    parallel: Ran,
) -> None:
    recorded = of_type(parallel.events, "ModelRequested")
    for turn, body in enumerate(parallel.bodies, start=1):
        done = parallel.cli("context", parallel.run_id, "--turn", str(turn), "--json")
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["verified"] is True and shown["hash"] == recorded[turn - 1]["context_hash"]
        # the whole body, but `stream`: the anthropic SDK's streaming call adds it
        assert without_stream(shown["wire"]) == without_stream(body)


def without_stream(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "stream"}


# a hostile tenant ----------------------------------------------------------------------------

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("setting", ["base_url", "api_key_env"])
def test_a_spec_naming_an_unlisted_endpoint_or_key_variable_is_refused_and_nothing_is_sent(
    cli: Cli, example: Path, setting: str
) -> None:
    with ChatStandin() as api, ChatStandin() as listed:
        cli.env |= {"AWS_SECRET_ACCESS_KEY": AWS_SECRET, "NO_PROXY": "127.0.0.1,localhost"}
        model = {"model": "gpt-standin-1", "base_url": api.url, "max_tokens": 1024}
        if setting == "base_url":  # the deployment lists another server, not the tenant's
            cli.env["AGENTLEDGER_MODEL_ENDPOINTS"] = listed.url
        else:  # the server is listed; the tenant asks for another of the worker's secrets
            cli.env["AGENTLEDGER_MODEL_ENDPOINTS"] = api.url
            model["api_key_env"] = "AWS_SECRET_ACCESS_KEY"
        spec = Spec().write(example, {"openai": model})
        done = cli("run", spec)
        as_json = cli("run", "--json", spec)
        asked = len(api.requests) + len(listed.requests)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert line.startswith("agentledger: invalid spec: ") and f"model.openai.{setting}: " in line
    assert as_json.returncode == 2, as_json.stdout + as_json.stderr
    said = json.loads(as_json.stdout)
    assert [p["field"] for p in said["problems"]] == [f"model.openai.{setting}"]
    assert AWS_SECRET not in done.stdout + done.stderr + as_json.stdout + as_json.stderr
    assert asked == 0 and cli.runs() == []

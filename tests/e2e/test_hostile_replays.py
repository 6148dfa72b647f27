"""The hostile suite's replays and grants (issue 31.4, 31.5): publishers with
narrow grants put signed entries straight into the inbox (as anyone who can
XADD there can), next to real workers started with the CLI. The same signed
bytes are taken once; a stale message, an answer to an earlier escalation, a
replay model of another tenant's run and a run id naming a shard nobody reads
are refused with their reasons; request ids are each publisher's own; every
control's event names the publisher that signed it; a `python:` check calls only
a function declared with `@check`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types

from agentledger.schemas.inbox import HumanReplied, RunRequested
from agentledger.schemas.signature import entry as signed_entry
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.inbox.publishing import stamped
from agentledger.services.keys import Keys

WAIT_S = 40.0
SCOPES = "stock:read,stock:write"
TWICE_REFUSED = """\
task: "Something the model will not do, twice"
tools: [inventory_tools]
principal: {id: alice, tenant: shop-1, scopes: [stock:read]}
budgets: {max_turns: 4}
model:
  scripted:
    - refusal: "I can't help with that."
    - refusal: "I still can't."
    - end_turn: "done after all"
"""
RAW_TOOL_AS_CHECK = """\
task: "Accepted when a tool function called raw says so"
workspace: ./ws
copy_workspace: true
tools: [inventory_tools]
principal: {id: alice, tenant: shop-1, scopes: [stock:read]}
budgets: {max_turns: 1}
model:
  scripted:
    - end_turn: "done"
acceptance:
  - python: "inventory_tools:reserve_stock"
"""


@dataclass
class Suite:
    cli: Cli
    client: redis.Redis
    keys: Keys
    folder: Path  # the inventory example's copy, where the specs are
    keys_of: dict[str, str]  # publisher -> key

    def send(self, publisher: str, message: bytes, part: int = 0) -> str:
        """Put a signed entry into the inbox by hand; its entry id (`part/id`)."""
        fields = signed_entry(publisher, self.keys_of[publisher], message)
        # the publisher's own stream of the partition, named as `publish` names it
        entry_id = self.client.xadd(self.keys.inbox(part, publisher), fields)  # type: ignore[arg-type]
        return f"{part}/{publisher}/{entry_id.decode()}"

    def outcome(self, entry_id: str) -> str | None:
        """The rejection reason of an entry once the intake handled it (None: taken)."""
        part, publisher, raw_id = entry_id.split("/", 2)
        deadline = time.monotonic() + WAIT_S
        while self.client.xrange(self.keys.inbox(int(part), publisher), raw_id, raw_id):
            assert time.monotonic() < deadline, f"{entry_id} was not handled within {WAIT_S}s"
            time.sleep(0.1)
        for _, fields in self.client.xrange(self.keys.rejected(int(part))):
            if fields[b"entry_id"].decode() == entry_id:
                return str(fields[b"reason"].decode())
        return None

    def submit(self, publisher: str, spec: str) -> str:
        done = self.cli("submit", "--as", publisher, self.folder / spec)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def request(self, spec: str, **fields: Any) -> RunRequested:
        """A request of a spec file of the example, as a publisher would build it."""
        import yaml

        data = yaml.safe_load((self.folder / spec).read_text())
        return RunRequested(spec=RunSpec.model_validate(data), base_dir=str(self.folder), **fields)


def _add(cli: Cli, name: str, *args: str) -> str:
    done = cli("publishers", "add", name, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Suite]:
    cli = make_cli(tmp_path_factory.mktemp("hostile-replays"))
    folder = copy_example("inventory", cli.cwd)
    (folder / "twice_refused.yaml").write_text(TWICE_REFUSED)
    (folder / "raw_tool_as_check.yaml").write_text(RAW_TOOL_AS_CHECK)
    keys_of = {
        "billing-svc": _add(
            cli,
            "billing-svc",
            "--principal",
            "alice@shop-1",
            "--scopes",
            SCOPES,
            "--workspaces",
            str(folder),
        ),
        "squatter": _add(
            cli,
            "squatter",
            "--principal",
            "mallory@shop-2",
            "--scopes",
            SCOPES,
            "--workspaces",
            str(folder),
        ),
    }
    workers = start_workers(cli, tools=["inventory_tools"], tool_path=folder)
    client = cli.redis()
    try:
        yield Suite(cli, client, Keys(cli.env["AGENTLEDGER_PREFIX"], 16), folder, keys_of)
    finally:
        stop_workers([workers])
        client.close()


def _escalations(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events if e["type"] == "RunEscalated"]


def test_the_same_signed_request_sent_four_times_makes_one_run_and_three_replayed_rejections(
    suite: Suite,
) -> None:
    before = set(suite.cli.runs())
    signed = stamped(suite.request("spec.yaml")).model_dump_json().encode()  # no run or request id
    entries = [suite.send("billing-svc", signed, part) for part in range(4)]  # in every partition

    outcomes = [suite.outcome(e) for e in entries]

    assert sum(o is None for o in outcomes) == 1
    refused = [o for o in outcomes if o is not None]
    assert len(refused) == 3 and all(o.startswith("replayed: nonce ") for o in refused), refused
    assert len(set(suite.cli.runs()) - before) == 1


def test_a_message_issued_512_s_ago_is_refused_and_makes_no_run(suite: Suite) -> None:
    stale = stamped(suite.request("spec.yaml", run_id="r-stale"))
    stale = stale.model_copy(update={"issued_at": time.time() - 512})

    reason = suite.outcome(suite.send("billing-svc", stale.model_dump_json().encode()))

    assert reason == "replayed: issued_at is 512 s old; the window is 300 s"
    assert "r-stale" not in suite.cli.runs()


def test_a_signed_reply_replayed_against_a_later_escalation_is_refused_and_the_run_not_moved(
    suite: Suite,
) -> None:
    run_id = suite.submit("billing-svc", "twice_refused.yaml")
    events = suite.cli.wait_events(run_id, lambda seen: len(_escalations(seen)) == 1, WAIT_S)
    [first] = _escalations(events)
    reply = stamped(HumanReplied(run_id=run_id, by="alice", text="it is allowed", escalation=first))
    signed = reply.model_dump_json().encode()
    assert suite.outcome(suite.send("billing-svc", signed)) is None  # the answer to the first
    events = suite.cli.wait_events(run_id, lambda seen: len(_escalations(seen)) == 2, WAIT_S)
    second = _escalations(events)[1]

    replayed = suite.outcome(suite.send("billing-svc", signed))  # the same signed bytes
    restamped = stamped(reply).model_dump_json().encode()  # a late copy, stamped anew
    late = suite.outcome(suite.send("billing-svc", restamped))

    assert replayed is not None and replayed.startswith("replayed: nonce "), replayed
    assert late == (
        f"cannot reply: it answers the escalation at seq {first}, but the run waits on the one at seq {second}"
    )
    after = suite.cli.events(run_id)
    assert after[-1]["seq"] == second and after[-1]["type"] == "RunEscalated", (
        "the run did not move"
    )
    status = json.loads(suite.cli("status", run_id, "--json").stdout)
    assert (status["status"], status["escalation"]) == ("awaiting_human", second)

    # the CLI names the escalation the run waits on: its reply is taken
    done = suite.cli("reply", run_id, "go on", "--by", "alice", "--as", "billing-svc")
    assert done.returncode == 0, done.stderr
    assert "alice via billing-svc: 'go on'" in done.stdout
    events = suite.cli.wait_events(run_id, lambda seen: "RunCompleted" in types(seen), WAIT_S)
    replies = of_type(events, "HumanReplied")
    assert [(r["by"], r["publisher"]) for r in replies] == [("alice", "billing-svc")] * 2


def test_controls_events_record_the_publisher_that_signed_them(suite: Suite) -> None:
    run_id = suite.submit("billing-svc", "twice_refused.yaml")
    suite.cli.wait_events(run_id, lambda seen: len(_escalations(seen)) == 1, WAIT_S)

    done = suite.cli("abort", run_id, "enough", "--by", "alice", "--as", "billing-svc")

    assert done.returncode == 0, done.stderr
    [aborted] = of_type(suite.cli.events(run_id), "RunAborted")
    assert (aborted["by"], aborted["publisher"]) == ("alice", "billing-svc")
    tail = suite.cli("tail", "--run", run_id)
    assert "by alice via billing-svc enough" in tail.stdout
    status = json.loads(suite.cli("status", run_id, "--json").stdout)
    assert status["detail"] == "aborted by alice via billing-svc: enough"


def test_the_same_request_id_from_two_publishers_names_two_runs(suite: Suite) -> None:
    before = set(suite.cli.runs())
    mallory = suite.request("spec.yaml", request_id="order-42")
    mallory = mallory.model_copy(update={"spec": mallory.spec.model_copy(update={
        "principal": mallory.spec.principal.model_copy(update={"id": "mallory", "tenant": "shop-2"})})})  # fmt: skip
    squatted = suite.outcome(suite.send("squatter", stamped(mallory).model_dump_json().encode()))
    alice = stamped(suite.request("spec.yaml", request_id="order-42"))
    taken = suite.outcome(suite.send("billing-svc", alice.model_dump_json().encode()))
    again = suite.outcome(suite.send("billing-svc", stamped(alice).model_dump_json().encode()))

    assert (squatted, taken, again) == (None, None, None)  # billing-svc's again: its own run
    new = sorted(set(suite.cli.runs()) - before)
    created = [of_type(suite.cli.events(r), "RunCreated")[0] for r in new]
    assert sorted((c["publisher"], c["request_id"], c["spec"]["principal"]["tenant"]) for c in created) == [
        ("billing-svc", "order-42", "shop-1"), ("squatter", "order-42", "shop-2"),
    ]  # fmt: skip


def test_a_replay_model_of_another_tenants_run_is_refused(suite: Suite) -> None:
    alices = suite.submit("billing-svc", "spec.yaml")
    message = json.loads(suite.request("spec.yaml", run_id="r-theft").model_dump_json())
    message["spec"]["principal"].update(id="mallory", tenant="shop-2")
    message["spec"]["model"] = {"replay": {"run_id": alices}}
    theft = stamped(RunRequested.model_validate(message))

    reason = suite.outcome(suite.send("squatter", theft.model_dump_json().encode()))

    assert (
        reason
        == f"not granted: 'squatter' may not replay run {alices!r}: no run of tenant 'shop-2' has that id"
    )
    assert "r-theft" not in suite.cli.runs()


def test_a_run_id_naming_shard_9999_is_refused(suite: Suite) -> None:
    message = stamped(suite.request("spec.yaml", run_id="x.s9999"))

    reason = suite.outcome(suite.send("billing-svc", message.model_dump_json().encode()))

    assert reason == "invalid: run_id 'x.s9999' names shard 9999; this deployment has 16"
    assert "x.s9999" not in suite.cli.runs()


def test_a_python_check_naming_an_undecorated_tool_function_fails_uncalled(suite: Suite) -> None:
    why = "'inventory_tools:reserve_stock' is not declared a check: only functions decorated with @check are called"
    # the embedded run has the tool set in hand: a spec problem, nothing created
    done = suite.cli("run", suite.folder / "raw_tool_as_check.yaml")
    assert done.returncode == 2 and "acceptance.0.python" in done.stderr and why in done.stderr, (
        done.stderr
    )
    # the intake knows the tool set only by its manifest: the worker refuses to call it
    run_id = suite.submit("billing-svc", "raw_tool_as_check.yaml")
    events = suite.cli.wait_events(run_id, lambda seen: "AcceptanceChecked" in types(seen), WAIT_S)
    [checked] = of_type(events, "AcceptanceChecked")
    assert checked["passed"] is False and checked["evidence"]["reason"] == why
    stock = (suite.cli.workspace(run_id) / "stock.json").read_text()
    assert stock == (suite.folder / "ws" / "stock.json").read_text(), "the tool function never ran"

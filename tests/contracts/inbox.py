"""The inbox contract (`agentledger.services.adapters.inbox`): one suite the memory inbox
passes in the unit tier and the Redis inbox on a real redis-server in the
integration tier — publishing, taking back what no intake read, the intake's
reasons, a run's request still waiting, and whether an intake is alive.

A tier subclasses `InboxContract` and gives: `inbox` (a new, empty adapter),
`intake` (the intake's side of that inbox: `read()` every waiting entry,
`refuse(entry_id, reason)`, `handled(entry_id)`, `beat(publisher=None)`), and
uses the `publishers` fixture here (a publishers file filing `billing`)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Protocol

import pytest

from agentledger.schemas.inbox import RunCancelRequested, RunRequested
from agentledger.schemas.publishers import GrantedPrincipal
from agentledger.services.adapters.inbox.port import Inbox, Liveness
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from tests.contracts.envelopes import CONTRACT_SPEC

TTL_S = 60.0


class IntakeSide(Protocol):
    def read(self) -> None: ...
    def refuse(self, entry_id: str, reason: str) -> None: ...
    def handled(self, entry_id: str) -> None: ...
    def beat(self, publisher: str | None = None) -> None: ...


def cancel(run_id: str | None = None) -> RunCancelRequested:
    return RunCancelRequested(run_id=run_id or f"r-{uuid.uuid4().hex[:8]}", by="ops")


def request(run_id: str) -> RunRequested:
    return RunRequested(run_id=run_id, spec=CONTRACT_SPEC)


class InboxContract:
    @pytest.fixture
    def publishers(self, tmp_path: Path) -> str:
        path = tmp_path / "publishers.yaml"
        granted = [GrantedPrincipal(id="alice", tenant="acme")]
        publishers_file.add(
            str(path), "billing", principals=granted, scopes=[], queues=["*"], workspaces=["/"]
        )
        return str(path)

    @pytest.fixture
    def signer(self, publishers: str) -> Signer:
        return publishers_file.signer(publishers, "billing")

    def test_an_entry_is_taken_once_the_intake_read_it(
        self, inbox: Inbox, intake: IntakeSide, signer: Signer
    ) -> None:
        first = inbox.publish(cancel("r-one"), signer=signer)
        intake.read()
        second = inbox.publish(cancel("r-one"), signer=signer)

        assert first.split("/")[1] == "billing"
        assert (inbox.taken(first), inbox.taken(second)) == (True, False)

    def test_only_an_entry_no_intake_read_can_be_withdrawn(
        self, inbox: Inbox, intake: IntakeSide, signer: Signer
    ) -> None:
        first = inbox.publish(cancel("r-two"), signer=signer)
        intake.read()
        second = inbox.publish(cancel("r-two"), signer=signer)

        assert (inbox.withdraw(first), inbox.withdraw(second)) == (False, True)
        assert (inbox.waiting(first), inbox.waiting(second)) == (
            True,
            True,
        )  # the first is still there
        assert inbox.newest("billing") == [first]

    def test_an_entry_waits_until_the_intake_handled_it_and_those_before_it(
        self, inbox: Inbox, intake: IntakeSide, signer: Signer
    ) -> None:
        first = inbox.publish(cancel("r-three"), signer=signer)
        second = inbox.publish(cancel("r-three"), signer=signer)
        intake.read()
        intake.handled(first)

        assert (inbox.waiting(first), inbox.waiting(second)) == (False, True)
        intake.handled(second)
        assert (inbox.waiting(second), inbox.newest("billing")) == (False, [])

    def test_the_reason_of_a_refused_entry_is_found_by_its_id_and_by_its_run(
        self, inbox: Inbox, intake: IntakeSide, signer: Signer
    ) -> None:
        refused = inbox.publish(cancel("r-refused"), signer=signer)
        other = inbox.publish(cancel("r-other"), signer=signer)
        intake.read()
        intake.refuse(refused, "not granted")

        assert inbox.rejected_reason(refused) == "not granted"
        assert inbox.rejected_reason(other) is None
        assert inbox.refusal_of_run("r-refused") == ("not granted", "billing")
        assert inbox.refusal_of_run("r-other") is None

    def test_a_runs_request_waits_in_the_inbox_until_the_intake_handled_it(
        self, inbox: Inbox, intake: IntakeSide, signer: Signer, publishers: str
    ) -> None:
        entry = inbox.publish(request("r-requested"), signer=signer)

        found: Any = inbox.request_waiting("r-requested", publishers)
        assert (found.run_id, found.publisher, found.entry_id, found.taken) == (
            "r-requested",
            "billing",
            entry,
            False,
        )
        assert found.age_s >= 0
        intake.read()
        assert inbox.request_waiting("r-requested", publishers).taken is True  # type: ignore[union-attr]
        intake.handled(entry)
        assert inbox.request_waiting("r-requested", publishers) is None
        assert inbox.request_waiting("r-never", publishers) is None

    def test_an_intake_is_live_once_it_beats_and_an_embedded_one_for_its_own_publisher_only(
        self, inbox: Inbox, intake: IntakeSide
    ) -> None:
        assert inbox.intake_liveness(ttl_s=TTL_S) is Liveness.NONE
        intake.beat("local-0123456789ab")
        assert inbox.intake_liveness(ttl_s=TTL_S, publisher="local-0123456789ab") is Liveness.LIVE
        assert inbox.intake_liveness(ttl_s=TTL_S, publisher="billing") is Liveness.NONE
        assert inbox.intake_liveness(ttl_s=TTL_S) is Liveness.NONE
        intake.beat()
        assert inbox.intake_liveness(ttl_s=TTL_S, publisher="billing") is Liveness.LIVE

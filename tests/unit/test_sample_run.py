"""The sample run a new worker reads before its threads start (`agentledger.events.sample_run`,
`snapshots.warm_up`): made through the deciders, it folds, and it goes through
the codec and a snapshot and back unchanged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from agentledger.events.fold import fold
from agentledger.events.sample_run import sample_log
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.services.adapters.store.port import Snapshot
from agentledger.services.errors import SampleMisread
from agentledger.services.handlers import snapshots
from agentledger.services.handlers.snapshots import warm_up


def test_the_sample_run_is_a_legal_log_of_the_hot_path_events() -> None:
    log = sample_log()
    state = fold(log)

    assert state is not None and state.status is RunStatus.ACCEPTING
    assert len(state.history) == 2 and [e.seq for e in log] == list(range(1, len(log) + 1))
    assert {e.type for e in log} == {
        "RunCreated", "ModelRequested", "ModelResponded", "ToolCallProposed",
        "ToolCallValidated", "ToolCallStarted", "ToolCallSucceeded",
    }  # fmt: skip


def test_warming_up_reads_the_sample_through_the_codec_and_a_snapshot() -> None:
    warm_up()  # raises if the snapshot + tail it reads back is not the sample's fold
    warm_up()  # and again: it keeps nothing that a second pass would trip on


def test_warming_up_refuses_a_snapshot_that_does_not_read_back_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = snapshots._decoded

    def misread(snap: Snapshot, pages: Callable[[int], list[bytes]]) -> RunState:
        return replace(real(snap, pages), cost_usd=1.0)  # a field the snapshot lost

    monkeypatch.setattr(snapshots, "_decoded", misread)
    with pytest.raises(SampleMisread, match="do not fold to the whole log"):
        warm_up()

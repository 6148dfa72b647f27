"""The web view's picture of a run (`services/entrypoints/web/picture.py`): built
as the log grows it is the picture of the whole log, and a live run is drawn at
most once a second while its events come, and at once when they stop or it ends."""

from __future__ import annotations

import json

from journeys import approvals_granted_denied_and_expired, happy_path
from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events.tool_step import Errored
from agentledger.events.types import ToolError
from agentledger.services.entrypoints.web.picture import LivePicture, picture


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_picture_built_as_the_log_grows_is_the_whole_logs() -> None:
    for log in (happy_path(), approvals_granted_denied_and_expired()):
        live = LivePicture()
        for n in range(0, len(log.envelopes), 3):
            live.add(log.envelopes[n : n + 3])
        assert live.picture(log.s) == picture(log.s, log.envelopes)


def test_the_conversation_shows_each_turns_blocks_and_its_calls_results() -> None:
    log = happy_path()
    shown = picture(log.s, log.envelopes)
    first = shown["turns"][0]
    assert [b["type"] for b in first["content"]] == ["tool_use", "tool_use"]
    assert [(c["call_id"], c["output"]) for c in first["calls"]] == [("a", "contents"), ("b", "ok")]
    assert shown["waterfall"]["lanes"][0] == "model"


def test_a_live_run_is_drawn_at_most_once_a_second_and_at_once_when_its_events_stop() -> None:
    log: Log = approvals_granted_denied_and_expired()  # still live
    assert not log.s.status.terminal
    clock = Clock()
    live = LivePicture(every_s=1.0, clock=clock)
    live.add(log.envelopes[:2])
    assert live.due(log.s, False) is not None  # the first
    live.add(log.envelopes[2:4])
    clock.now = 0.5
    assert live.due(log.s, False) is None  # too soon
    assert live.due(log.s, True) is not None  # nothing more came: drawn now
    assert live.due(log.s, True) is None  # nothing new since
    live.add(log.envelopes[4:6])
    clock.now = 1.6
    assert live.due(log.s, False) is not None


def test_a_run_that_ended_is_drawn_at_once() -> None:
    log = happy_path()
    clock = Clock()
    live = LivePicture(every_s=1.0, clock=clock)
    live.add(log.envelopes[:2])
    assert live.due(log.s, False) is not None
    live.add(log.envelopes[2:])
    clock.now = 0.1
    assert live.due(log.s, False) is not None  # completed: not held back


def test_a_key_in_a_calls_error_or_arguments_is_redacted_in_the_picture() -> None:
    key = "sk-ant-api03-" + "x" * 24
    log = Log.created()
    do_model_turn(log, use("c1", path=key))
    do_validate(log, "c1")
    do_claim(log, "c1")
    do_finish(
        log,
        "c1",
        Errored(ToolError(code="permission_denied", message=f"{key} refused", retryable=False)),
    )
    shown = picture(log.s, log.envelopes)
    drawn, said = json.dumps(shown["waterfall"]), json.dumps(shown["turns"])
    assert key not in drawn and "refused" in drawn  # the bar's error
    assert key not in said and "refused" in said  # the model's call and its result

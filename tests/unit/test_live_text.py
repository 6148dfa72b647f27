"""A model reply's text while it streams (`services/adapters/live_text.py`): put at
most every so often, redacted as a whole with its unfinished last word held back
(a key cut across pieces is never shown in part), and only as news to the view;
the scripted model says its text a word at a time across its delay."""

from __future__ import annotations

from journeys import happy_path
from runlog import Log, do_request

from agentledger.events.redact import redactor
from agentledger.schemas.spec import ScriptedModel
from agentledger.services.adapters.live_text import MemoryLiveText, Said, Streamer
from agentledger.services.adapters.models.port import ModelRequest
from agentledger.services.adapters.models.scripted import ScriptedAdapter
from agentledger.services.entrypoints.web.picture import TextSoFar

KEY = "sk-ant-api03-" + "k" * 30


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def streamer(sink: MemoryLiveText, clock: Clock) -> Streamer:
    return Streamer(sink, "r-1", 2, 1, redactor({}).text, clock=clock, every_s=0.25)


def test_the_text_so_far_is_put_at_most_every_quarter_second_up_to_its_last_space() -> None:
    sink, clock = MemoryLiveText(), Clock()
    watch = streamer(sink, clock)
    watch("There are ")
    assert sink.get("r-1") == Said(2, 1, "There are ")
    clock.now = 0.1
    watch("42 widg")
    assert sink.get("r-1") == Said(2, 1, "There are ")  # too soon
    clock.now = 0.3
    watch("ets in")
    assert sink.get("r-1") == Said(2, 1, "There are 42 widgets ")  # "in" may go on
    watch.flush()
    assert sink.get("r-1") == Said(2, 1, "There are 42 widgets in")


def test_a_key_streamed_in_pieces_is_never_shown_even_in_part() -> None:
    sink, clock = MemoryLiveText(), Clock()
    watch = streamer(sink, clock)
    shown: list[str] = []
    for n, piece in enumerate(["the key is ", KEY[:10], KEY[10:20], KEY[20:], " ok"]):
        clock.now = n
        watch(piece)
        said = sink.get("r-1")
        shown.append(said.text if said else "")
    watch.flush()
    shown.append(sink.get("r-1").text)  # type: ignore[union-attr]
    assert all("sk-ant" not in s and KEY[10:20] not in s for s in shown), shown
    assert shown[-1].startswith("the key is ") and shown[-1].endswith(" ok")


def test_the_view_gets_news_only_of_the_turn_it_waits_for_and_only_when_it_moved() -> None:
    log = Log.created()
    do_request(log)  # turn 1 requested: the run waits for the model
    sink = MemoryLiveText()
    said = TextSoFar(sink)
    assert said.news("r-1", log.s) is None  # nothing said yet
    sink.put("r-1", Said(1, 1, "Count"))
    assert said.news("r-1", log.s) == {"turn": 1, "attempt": 1, "text": "Count"}
    assert said.news("r-1", log.s) is None  # the same again: no news
    assert TextSoFar(sink).news("r-1", happy_path().s) is None  # the run is not waiting
    assert TextSoFar(None).news("r-1", log.s) is None  # nowhere to read from


def test_the_scripted_model_says_its_text_a_word_at_a_time_across_its_delay() -> None:
    script = ScriptedModel.model_validate(
        {"scripted": [{"end_turn": "all four read", "delay_s": 0.04}]}
    )
    pieces: list[str] = []
    reply = ScriptedAdapter(script).respond(
        ModelRequest("r-1", 1, None, (), (), watch=pieces.append)
    )
    assert pieces == ["all ", "four ", "read"]
    assert reply.content[0].text == "all four read"  # type: ignore[union-attr]

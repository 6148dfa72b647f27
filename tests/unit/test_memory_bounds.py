"""What a long-lived worker keeps in memory is bounded by bytes, not only by count:
the state cache (by an estimate of each state's bytes, `state_bytes`), the specs
and model adapters it keeps (`BoundedCache`), the context view's rendered turns;
a run let go by the state cache is let go by the view's caches too. The
settings that size them are checked like every other."""

from __future__ import annotations

import os

import pytest
from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, envelope, use

from agentledger.events import context_past, context_units, context_view
from agentledger.events.memo import IdentityMemo
from agentledger.events.state import Turn
from agentledger.events.tool_step import Succeeded
from agentledger.events.types import ModelRequested, ToolCallSucceeded
from agentledger.schemas.content import TextBlock
from agentledger.services.bounded_cache import BoundedCache
from agentledger.services.errors import ConfigError
from agentledger.services.handlers import state_bytes
from agentledger.services.process_memory import limit_arenas
from agentledger.services.settings import Settings, environ_for_children, from_env


def test_a_bounded_cache_drops_the_least_recently_used_past_its_bytes() -> None:
    cache: BoundedCache[str] = BoundedCache(max_items=10, max_bytes=100)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    assert cache.get("a") == "A"  # used: b is now the oldest

    cache.put("c", "C", 40)

    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("A", None, "C")
    assert cache.bytes == 80


def test_a_bounded_cache_keeps_the_entry_used_last_whatever_it_costs() -> None:
    cache: BoundedCache[str] = BoundedCache(max_items=10, max_bytes=100)
    cache.put("a", "A", 40)
    cache.put("huge", "H", 1000)
    assert (cache.get("a"), cache.get("huge"), len(cache)) == (None, "H", 1)


def test_a_bounded_cache_is_bounded_by_count_too() -> None:
    cache: BoundedCache[int] = BoundedCache(max_items=2, max_bytes=1 << 30)
    for i in range(5):
        cache.put(i, i, 1)
    assert len(cache) == 2 and cache.get(4) == 4 and cache.get(2) is None


def _finished(output: object) -> ToolCallSucceeded:
    return ToolCallSucceeded(call_id="c", output=output, started_at=1.0, finished_at=2.0)


def test_a_states_estimate_grows_with_what_its_tools_and_model_made() -> None:
    small = state_bytes.grown_by([envelope(_finished({"n": 1}), seq=2)])
    big = state_bytes.grown_by([envelope(_finished({"text": "x" * 100_000}), seq=2)])
    plain = state_bytes.grown_by(
        [envelope(ModelRequested(turn=1, attempt=1, deadline_at=5.0), seq=2)]
    )
    assert plain == state_bytes.EVENT_BYTES
    assert small < 2 * state_bytes.EVENT_BYTES
    assert big >= state_bytes.PAYLOAD_FACTOR * 100_000


def test_a_payload_msgpack_cannot_hold_is_measured_by_its_repr() -> None:
    output = {"n": 2**70}  # an integer beyond 64 bits
    assert state_bytes.payload_bytes(_finished(output)) == len(repr(output))


def test_a_run_let_go_leaves_the_context_views_caches() -> None:
    log = Log.created()
    do_model_turn(log, use("a"))
    do_validate(log, "a")
    do_claim(log, "a")
    do_finish(log, "a", Succeeded("fine"))
    context_view.assemble(log.s)
    assert log.run_id in context_past._PAST and log.run_id in context_view._BUILT

    context_view.forget(log.run_id)

    assert log.run_id not in context_past._PAST and log.run_id not in context_view._BUILT


def test_the_views_rendered_turns_are_bounded_by_their_characters() -> None:
    assert (
        context_units._UNITS.most_size == context_units._SHORT.most_size == context_units._CHARS_MAX
    )
    units: IdentityMemo[Turn, object] = IdentityMemo(most=8192, most_size=10_000)
    log = Log.created()
    do_model_turn(log, use("a"))
    [turn] = log.s.turns
    for key in range(30):
        unit = context_units.make_unit(turn, (), (TextBlock(text="x" * 3000),))
        units.put(turn, key, unit, unit.size)
    assert len(units) == 3  # 3,000 characters and more each
    assert units.size <= 10_000
    assert [k for k in range(30) if units.get(turn, k) is not None] == [27, 28, 29]


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("AGENTLEDGER_EVENT_MAX_BYTES", "1000", "must be at least 131072"),
        ("AGENTLEDGER_STATE_CACHE_MAX_BYTES", "1000", "must be at least 1048576"),
        ("AGENTLEDGER_MALLOC_ARENAS", "-1", "must not be negative"),
        ("AGENTLEDGER_EVENT_MAX_BYTES", "a lot", "expected a whole number"),
    ],
)
def test_a_bad_size_setting_is_refused_naming_its_variable(var: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_env({var: value})
    assert err.value.name == var and says in str(err.value)


def test_the_size_settings_default_and_pass_to_child_processes() -> None:
    s = from_env({})
    assert (s.event_max_bytes, s.state_cache_max_bytes, s.malloc_arenas) == (256 << 10, 64 << 20, 2)
    env = environ_for_children(Settings(event_max_bytes=1 << 20, malloc_arenas=0))
    assert from_env(env).event_max_bytes == 1 << 20 and from_env(env).malloc_arenas == 0


def test_the_allocators_arenas_are_left_alone_when_asked_or_set_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert limit_arenas(0) is False
    monkeypatch.setitem(os.environ, "MALLOC_ARENA_MAX", "4")
    assert limit_arenas(2) is False

"""The turn of a process's threads among the messages one pool has read ahead
(`agentledger.events.thread_turns`): round-robin across tenants, then across a
tenant's runs, each run's messages in arrival order; bounded memory."""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.events.thread_turns import REMEMBERED, Turn, handed, next_up


@dataclass(frozen=True)
class M:
    id: str
    run: str
    tenant: str


def drain(waiting: list[M], turn: Turn | None = None) -> tuple[list[str], Turn]:
    turn = turn or Turn()
    order: list[str] = []
    while waiting:
        i = next_up(waiting, turn)
        assert i is not None
        turn = handed(waiting, i, turn)
        order.append(waiting.pop(i).id)
    return order, turn


def burst(tenant: str, runs: int, start: int = 0) -> list[M]:
    return [M(f"{tenant}{i}", f"{tenant}-run{i}", tenant) for i in range(start, start + runs)]


def test_nothing_waiting_gives_no_turn() -> None:
    assert next_up([], Turn()) is None


def test_one_tenant_alone_is_served_in_arrival_order() -> None:
    order, _ = drain(burst("a", 5))

    assert order == ["a0", "a1", "a2", "a3", "a4"]


def test_another_tenants_message_behind_a_burst_is_next_once_the_burst_was_served() -> None:
    waiting = burst("a", 9)
    turn = Turn()
    for _ in range(3):  # three of A's runs took the pool's threads
        i = next_up(waiting, turn)
        assert i is not None
        turn = handed(waiting, i, turn)
        waiting.pop(i)
    waiting.append(M("b0", "b-run0", "b"))

    i = next_up(waiting, turn)

    assert i is not None and waiting[i].id == "b0", "B's one message before A's six others"


def test_tenants_take_turns_then_a_tenants_runs_take_turns() -> None:
    waiting = [M("a1", "ra", "a"), M("a2", "ra", "a"), M("a3", "rb", "a"), M("b1", "rc", "b"),
               M("b2", "rc", "b"), M("c1", "rd", "c")]  # fmt: skip

    order, _ = drain(waiting)

    assert order == ["a1", "b1", "c1", "a3", "b2", "a2"]


def test_a_run_keeps_its_own_messages_in_order() -> None:
    waiting = [M("x2", "r", "a"), M("x1", "r", "a"), M("y", "s", "b")]

    order, _ = drain(waiting)

    assert order.index("x2") < order.index("x1")


def test_a_tenant_whose_read_ahead_ran_dry_keeps_its_place_behind_the_others() -> None:
    _, turn = drain([M("a0", "ra0", "a")])  # A served last; nothing of A waits now
    waiting = [M("a1", "ra1", "a"), M("b0", "rb0", "b")]  # A's read first

    order, _ = drain(waiting, turn)

    assert order == ["b0", "a1"]


def test_messages_without_a_tenant_are_one_tenant() -> None:
    waiting = [M("o1", "r1", ""), M("o2", "r2", ""), M("b0", "rb", "b")]

    order, _ = drain(waiting)

    assert order == ["o1", "b0", "o2"]


def test_memory_stays_bounded_by_the_names_waiting_and_the_recently_served() -> None:
    turn = Turn()
    for i in range(3 * REMEMBERED):
        waiting = [M(f"m{i}", f"r{i}", f"t{i}"), M("w", "rw", "waits")]
        turn = handed(waiting, 0, turn)

    assert len(turn.served) <= 2 * REMEMBERED + 2
    assert turn.count == 3 * REMEMBERED
    assert f"t:t{3 * REMEMBERED - 1}" in turn.served, "the last served is remembered"

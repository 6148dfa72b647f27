"""agentledger.services.adapters.tools.threads: a call has a thread to itself; threads are reused."""

from __future__ import annotations

import threading

from agentledger.services.adapters.tools import threads


def _ident_of_call() -> int:
    seen: list[int] = []
    job = threads.start(lambda: seen.append(threading.get_ident()))
    job.join(5)
    assert not job.is_alive()
    return seen[0]


def _tool_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "tool")


def test_a_thread_whose_call_returned_takes_the_next_call() -> None:
    _ident_of_call()  # a tool thread is idle now (this one, or one an earlier test left)
    before = _tool_threads()
    for _ in range(20):
        _ident_of_call()
    assert _tool_threads() <= before, "a call started a thread while one was idle"


def test_a_running_call_keeps_its_thread_and_the_next_call_gets_another() -> None:
    release = threading.Event()
    started: list[int] = []
    stuck = threads.start(lambda: (started.append(threading.get_ident()), release.wait(5)))
    while not started:
        stuck.join(0.01)
    try:
        other = _ident_of_call()
        assert other != started[0]
        assert stuck.is_alive()
    finally:
        release.set()
    stuck.join(5)
    assert not stuck.is_alive()


def test_a_call_that_raises_is_done_and_the_next_one_still_runs() -> None:
    def boom() -> None:
        raise RuntimeError("tool bug")

    hook, told = threading.excepthook, threading.Event()
    threading.excepthook = lambda args: told.set()  # as for any thread's exception
    try:
        job = threads.start(boom)
        job.join(5)
        assert not job.is_alive()
        assert told.wait(5)
    finally:
        threading.excepthook = hook
    assert _ident_of_call()

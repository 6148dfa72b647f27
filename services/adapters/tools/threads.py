"""Threads for Python tool calls, kept for the next call once theirs returned.

Starting a thread and joining it costs about 75 µs of CPU, a tenth of a no-op
call's work in the tool pool; handing a call to an idle thread costs a quarter
of that. Each call still has a thread to itself while it runs: a call goes to
an idle thread or, when none is idle, to a new one — it never waits behind
another call. A thread whose call does not return (timed out, left to finish)
is never idle again; one whose call returned is idle before its caller is
told (so the next call, made at once, takes it); one whose call raised ends
as before (the exception goes to `threading.excepthook`). A thread idle for
IDLE_S ends. A forked child starts with no idle threads (the parent's do not
exist in it)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

IDLE_S = 30.0


class Job:
    """A call handed to a thread: `is_alive` and `join` as a thread's. Done is a lock
    made held and released once (a lock is a fifth of an Event's cost to make and wait on)."""

    def __init__(self, fn: Callable[[], object]):
        self._fn = fn
        self._running = threading.Lock()
        self._running.acquire()

    def is_alive(self) -> bool:
        return self._running.locked()

    def join(self, timeout: float | None = None) -> None:
        if self._running.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            self._running.release()  # done: whoever joins next finds it free too

    def run(self, then: Callable[[], None]) -> None:
        """Run the call; when it returned, `then` (the thread is idle again) before
        anyone waiting is told it is done. A call that raised is done, and raises."""
        try:
            self._fn()
        except BaseException:
            self._running.release()
            raise
        then()
        self._running.release()


class _Pool:
    # invariant: threads waiting for a job (or about to) == idle + jobs queued
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.idle = 0

    def one_more_idle(self) -> None:
        with self.lock:
            self.idle += 1


_pool = _Pool()


def _reset() -> None:
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_reset)


def start(fn: Callable[[], object]) -> Job:
    """Run `fn` on a thread of its own (an idle one, else a new daemon thread)."""
    job, pool = Job(fn), _pool
    with pool.lock:
        if pool.idle > 0:
            pool.idle -= 1
            pool.jobs.put(job)
            return job
    threading.Thread(target=_serve, args=(pool, job), daemon=True, name="tool").start()
    return job


def _serve(pool: _Pool, job: Job) -> None:
    while True:
        job.run(pool.one_more_idle)  # a call that raised ends this thread, as its own would end
        while True:
            try:
                job = pool.jobs.get(timeout=IDLE_S)
                break
            except queue.Empty:
                with pool.lock:
                    if pool.idle > 0:  # no job is queued for this thread: it ends
                        pool.idle -= 1
                        return

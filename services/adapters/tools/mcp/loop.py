"""The one event loop a worker's MCP sessions live on, in a thread of its own:
tool calls come from the executor's threads and wait on futures."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AsyncLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="agentledger-mcp"
        )
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs (sessions close, servers stop), then end the loop."""

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=timeout_s) if tasks else None

        if self.loop.is_running():
            try:
                self.submit(cancel_all()).result(timeout_s + 1)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)

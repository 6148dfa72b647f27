"""A run's tool outputs as a tool reads them back (`read_output`): the text of a
call's output, or a window of it, from the run's state — and, for an output too
large for its event (`agentledger.events.output_cap`), from the run's overflow pages, only
the pages the window needs."""

from __future__ import annotations

from agentledger.events.output_cap import output_text
from agentledger.events.state import Call
from agentledger.services.handlers.app import App


class RunOutputs:
    def __init__(self, app: App, run_id: str):
        self._app = app
        self._run_id = run_id

    def window(self, ref: str, start: int, end: int) -> tuple[str, int] | None:
        """Characters `start`…`end` of call `ref`'s output text, and the text's length
        (None: the run has no output of that call)."""
        call = self._call(ref)
        if call is None:
            return None
        head = output_text(call.output)
        over = call.overflow
        if over is None:
            return head[start:end], len(head)
        end = min(end, over.chars)
        shown = head[start:end]
        if end > over.head:
            at = max(start, over.head) - over.head  # into the pages' text
            first, last = at // over.page_chars, (end - over.head - 1) // over.page_chars
            pages = self._app.runs.store.overflow_pages(
                self._run_id, over.ref, first, last - first + 1
            )
            text = "".join(pages)
            shown += text[at - first * over.page_chars : end - over.head - first * over.page_chars]
        return shown, over.chars

    def whole(self, ref: str) -> object | None:
        """The call's whole output (its text, when it was cut)."""
        call = self._call(ref)
        if call is None or call.overflow is None:
            return call.output if call is not None else None
        found = self.window(ref, 0, call.overflow.chars)
        return found[0] if found is not None else None

    def _call(self, ref: str) -> Call | None:
        state = self._app.runs.load(self._run_id)
        for turn in state.turns if state else ():
            call = turn.call(ref)
            if call is not None and call.output is not None:
                return call
        return None

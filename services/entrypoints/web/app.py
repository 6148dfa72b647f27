"""The web view's routes. Pages are static HTML and one script (no build step);
their data comes from `/api/…` as JSON, and live from server-sent event streams:
the runs list whenever a shard feed moves, a run's timeline as its log grows
(each event's `tail` line, the SSE id its seq, so a reconnect resumes); the
list's and a run's page carry the same as text for a browser without
JavaScript (`plain`, inside `<noscript>`). The
buttons post to `/api/runs/{id}/control`, which publishes through the CLI's own
controls the CLI sends through (`agentledger.services.entrypoints.controls`) as the publisher the view was started
with — and refuses with 403 when it was started without one (read-only).
Every request passes the door first (`guard`: Host allowlist, sign-in, same
origin); the sign-in page trades the operator's token for a session cookie."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from agentledger.events.following import Until
from agentledger.events.state import RunState
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.names import RUN_ID_PATTERN
from agentledger.services.adapters.reading.follow import follow
from agentledger.services.adapters.reading.port import Cursors
from agentledger.services.entrypoints import controls
from agentledger.services.entrypoints.controls import Outcome
from agentledger.services.entrypoints.web import plain, views
from agentledger.services.entrypoints.web.access import SESSION_S, Access, session_value, token_ok
from agentledger.services.entrypoints.web.guard import Guard
from agentledger.services.entrypoints.web.picture import LivePicture, TextSoFar, picture
from agentledger.services.errors import ConfigError
from agentledger.services.session import Session

log = logging.getLogger(__name__)
STATIC = Path(__file__).with_name("static")
BLOCK_MS = 1000  # a stream's wait for news; then it says it is alive
LIST_EVERY_S = 0.5
ACTIONS = {  # action: (needs a call id, needs text)
    "approve": (False, False), "deny": (False, False), "reply": (False, True),  # no call: a gate
    "resume": (False, False), "abort": (False, False), "cancel": (False, False),
}  # fmt: skip
HTTP_OF = {  # a control's outcome other than appended: the HTTP status it answers with
    Outcome.NO_RUN: 404, Outcome.REFUSED: 409, Outcome.ALREADY_ENDED: 409,
    Outcome.NO_INTAKE: 503, Outcome.NO_VERDICT: 503,
}  # fmt: skip


class RunIdConvertor(Convertor[str]):
    """A path segment that is a run id (`agentledger.schemas.names.RUN_ID_PATTERN`): anything else
    matches no route (404), never reaches the store or the controls."""

    regex = RUN_ID_PATTERN.removeprefix("^").removesuffix("$")

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", RunIdConvertor())


def make_app(
    session: Session,
    *,
    publisher: str | None,
    access: Access,
    stopping: Callable[[], bool] = lambda: False,
) -> ASGIApp:
    """`stopping` says the server is shutting down: the streams end (within BLOCK_MS)."""
    web = _Web(session, publisher, stopping)
    door = _Door(access)
    return _OneLineErrors(Guard(Starlette(routes=[
        Route("/", web.index_page),
        Route("/signin", web.page("signin.html")),
        Route("/favicon.ico", door.favicon),
        Route("/healthz", door.healthz),
        Route("/api/signin", door.sign_in, methods=["POST"]),
        Route("/api/signout", door.sign_out, methods=["POST"]),
        Route("/runs/{run_id:run_id}", web.run_page),
        Route("/api/config", web.config),
        Route("/api/runs", web.runs),
        Route("/api/runs/stream", web.runs_stream),
        Route("/api/runs/{run_id:run_id}", web.run),
        Route("/api/runs/{run_id:run_id}/stream", web.run_stream),
        Route("/api/runs/{run_id:run_id}/control", web.control, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]), access))  # fmt: skip


def _not_json(request: Request) -> Response | None:
    """A control is JSON (so another site's page cannot send it without a CORS
    preflight, which is never granted; the door checked its origin already)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return JSONResponse({"error": "bad request", "message": "send the control as application/json"},
                            status_code=415)  # fmt: skip
    return None


class _Door:
    """Signing in and out: the token for a session cookie (HttpOnly, SameSite=Strict)."""

    def __init__(self, access: Access) -> None:
        self.access = access

    async def healthz(self, _: Request) -> Response:
        return Response("ok\n", media_type="text/plain")

    async def favicon(self, _: Request) -> Response:
        return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon")

    async def sign_in(self, request: Request) -> Response:
        try:
            token = str((await request.json())["token"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse(
                {"error": "bad request", "message": "send JSON {token}"}, status_code=400
            )
        if not token_ok(self.access, token.strip()):
            return JSONResponse(
                {"error": "bad token", "message": "that is not this view's token"}, status_code=401
            )
        reply = JSONResponse({"signed_in": True, "for_s": SESSION_S})
        reply.set_cookie(self.access.cookie, session_value(self.access, time.time()), max_age=SESSION_S,
                         path="/", httponly=True, samesite="strict")  # fmt: skip
        return reply

    async def sign_out(self, _: Request) -> Response:
        reply = JSONResponse({"signed_in": False})
        reply.delete_cookie(self.access.cookie, path="/", httponly=True, samesite="strict")
        return reply


class _OneLineErrors:
    """A bug while serving is one log line, never a traceback on the terminal
    (Starlette has sent the 500 already; it re-raises for the server to log)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:  # noqa: BLE001 -- reported, and the request already answered
            log.error(
                "internal error serving %s: %s: %s", scope.get("path"), type(exc).__name__, exc
            )


def _with_text(page: str, text: str) -> Response:
    """A static page with its server-rendered text in place of its `<!--noscript-->`."""
    html = (STATIC / page).read_text().replace(plain.PLACE, text, 1)
    return Response(html, media_type="text/html", headers={"Cache-Control": "no-store"})


def _sse(event: str, data: Any, *, id_: int | None = None) -> str:
    head = f"id: {id_}\n" if id_ is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


async def _owed(
    live: LivePicture, said: TextSoFar, run_id: str, state: RunState | None, seq: int
) -> str:
    """While nothing new is logged: the picture not drawn yet, or what the model said
    so far, else a sign of life."""
    if state is None:
        return ": alive\n\n"
    if (drawn := await anyio.to_thread.run_sync(live.due, state, True)) is not None:
        return _sse("picture", drawn, id_=seq)
    if (news := await anyio.to_thread.run_sync(said.news, run_id, state)) is not None:
        return _sse("said", news)
    return ": alive\n\n"


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


class _Web:
    def __init__(
        self, session: Session, publisher: str | None, stopping: Callable[[], bool]
    ) -> None:
        self.s = session
        self.publisher = publisher
        self.stopping = stopping

    def page(self, name: str) -> Any:
        async def serve(_: Request) -> Response:
            return FileResponse(STATIC / name, media_type="text/html")

        return serve

    async def index_page(self, _: Request) -> Response:
        """The runs list's page, its rows as text for a browser without JavaScript."""
        rows = await anyio.to_thread.run_sync(
            lambda: views.runs_list(self.s, status=frozenset(), text="", limit=50)
        )
        return _with_text("index.html", plain.runs_text(rows))

    async def run_page(self, request: Request) -> Response:
        """A run's page, the run as text for a browser without JavaScript."""
        run_id = request.path_params["run_id"]
        found = await anyio.to_thread.run_sync(self._read, run_id, 0)
        return _with_text("run.html", plain.run_text(run_id, found))

    async def config(self, _: Request) -> Response:
        return JSONResponse({"publisher": self.publisher, "read_only": self.publisher is None})

    def _query(self, request: Request) -> tuple[views.RunFilter, int, str | None]:
        q = request.query_params
        limit = int(q.get("limit", "50")) if q.get("limit", "50").isdigit() else 50
        return views.filter_of(q), max(1, min(limit, 500)), q.get("page") or None

    async def runs(self, request: Request) -> Response:
        try:
            wanted, limit, token = self._query(request)
            rows, after = await anyio.to_thread.run_sync(
                lambda: views.runs_page(self.s, wanted, limit=limit, token=token)
            )
        except ValueError as exc:  # a status, a time or a page token the view cannot read
            return JSONResponse({"error": "bad request", "message": str(exc)}, status_code=400)
        return JSONResponse({"runs": rows, "next": after})

    async def runs_stream(self, request: Request) -> Response:
        try:
            wanted, limit, _ = self._query(request)
        except ValueError as exc:
            return JSONResponse({"error": "bad request", "message": str(exc)}, status_code=400)

        async def events() -> AsyncIterator[str]:
            cursors = await anyio.to_thread.run_sync(self.s.reader.feed_ends)
            while not self.stopping():
                rows, after = await anyio.to_thread.run_sync(
                    lambda: views.runs_page(self.s, wanted, limit=limit)
                )
                yield _sse("runs", {"runs": rows, "next": after})
                await anyio.sleep(LIST_EVERY_S)  # a busy system: the list at most this often
                while not await anyio.to_thread.run_sync(self._feeds_moved, cursors):
                    if self.stopping():
                        return
                    yield ": alive\n\n"

        return _stream(events())

    def _feeds_moved(self, cursors: Cursors) -> bool:
        return self.s.reader.feeds_moved(cursors, timeout_s=BLOCK_MS / 1000)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        found = await anyio.to_thread.run_sync(self._read, run_id, 0)
        if found is None:
            return JSONResponse(
                {"error": "no run", "message": f"no run {run_id!r}"}, status_code=404
            )
        view, lines = found
        drawn = await anyio.to_thread.run_sync(self._picture, run_id)
        return JSONResponse({"view": view, "timeline": lines, "picture": drawn})

    def _picture(self, run_id: str) -> dict[str, Any] | None:
        envelopes, state = self.s.store.read(run_id), self.s.load(run_id)
        return picture(state, envelopes) if envelopes and state is not None else None

    def _read(self, run_id: str, after: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        envelopes = self.s.store.read(run_id)
        state = self.s.load(run_id)
        if not envelopes or state is None:
            return None
        new = [e for e in envelopes if e.seq > after]
        return views.run_view(state, envelopes), views.timeline(new, state)

    async def run_stream(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        last = request.headers.get("last-event-id") or request.query_params.get("after", "0")
        after = int(last) if last.isdigit() else 0
        if not await anyio.to_thread.run_sync(self.s.reader.exists, run_id):
            return JSONResponse(
                {"error": "no run", "message": f"no run {run_id!r}"}, status_code=404
            )

        async def events() -> AsyncIterator[str]:
            steps = follow(self.s.reader, run_id, until=Until.NEVER, wait_s=BLOCK_MS / 1000)
            envelopes: list[Envelope[Any]] = []
            seq, first, live, said = after, True, LivePicture(), TextSoFar(self.s.live_text)
            while not self.stopping():
                step = await anyio.to_thread.run_sync(next, steps)
                envelopes += step.events
                await anyio.to_thread.run_sync(live.add, step.events)
                if step.state is None or not (step.events or first):
                    yield await _owed(live, said, run_id, step.state, seq)  # nothing new
                    continue
                first = False
                lines = views.timeline([e for e in step.events if e.seq > seq], step.state)
                for item in lines:
                    yield _sse("line", item, id_=item["seq"])
                seq = max([seq, *(i["seq"] for i in lines)])
                yield _sse("state", views.run_view(step.state, envelopes), id_=seq)
                drawn = await anyio.to_thread.run_sync(live.due, step.state, False)
                if drawn is not None:
                    yield _sse("picture", drawn, id_=seq)

        return _stream(events())

    async def control(self, request: Request) -> Response:
        if self.publisher is None:
            return JSONResponse({
                "error": "read-only",
                "message": "this view is read-only: start it with `agentledger ui --as NAME` to act",
            }, status_code=403)  # fmt: skip
        if (refused := _not_json(request)) is not None:
            return refused
        try:
            body = await request.json()
            action, call_id, text = body["action"], body.get("call_id"), str(body.get("text") or "")
            needs_call, needs_text = ACTIONS[action]
        except (ValueError, KeyError, TypeError):
            known = ", ".join(ACTIONS)
            return JSONResponse({"error": "bad request",
                                 "message": f"send JSON {{action, call_id?, text?}}; the actions are {known}"},
                                status_code=400)  # fmt: skip
        if (needs_call and not call_id) or (needs_text and not text.strip()):
            what = "a call_id" if needs_call and not call_id else "a text"
            return JSONResponse(
                {"error": "bad request", "message": f"{action} needs {what}"}, status_code=400
            )
        run_id = request.path_params["run_id"]
        escalation = await anyio.to_thread.run_sync(controls.current_escalation, self.s, run_id)
        try:  # approve or deny with no call id answers a flow's gate (as the CLI's)
            action = await anyio.to_thread.run_sync(
                controls.gate_command, self.s, action, run_id, call_id
            )
            message = controls.build(
                action, run_id, call_id=call_id, text=text, by=self.publisher, escalation=escalation
            )
        except ConfigError as exc:  # a call id or text the controls refuse: the CLI's words
            return JSONResponse({"error": "bad request", "message": exc.reason}, status_code=400)
        verdict = await anyio.to_thread.run_sync(
            lambda: controls.deliver(self.s, message, publisher=self.publisher)
        )
        if verdict.outcome is not Outcome.APPENDED:
            status = HTTP_OF[verdict.outcome]
            return JSONResponse(
                {"error": str(verdict.outcome), "message": verdict.message}, status_code=status
            )
        return JSONResponse({"run_id": run_id, "control": message.type, "entry_id": verdict.entry_id,
                             "events": [e.type for e in verdict.events]})  # fmt: skip

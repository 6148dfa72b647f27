"""The intake's run requests, a batch at a time: each request is checked on its
own (its grant, what it would reach, its workspace, its tool set and its spec
— a spec checked once per batch for each distinct spec, tool set and
publisher), then the batch's request ids are claimed together (SET NX
pipelined, then GET of those claimed before) and the runs' first events
appended together (`Runs.create_many`: one pipelined round trip). Each request
ends on its own: its run id, or why it was refused (`Rejected`), or the error
its own append met; one request's refusal never touches another's.

A request id makes a request idempotent: the same request again (published
again, or redelivered after an intake died before acknowledging it) names the
run it named before, whose creation is then a no-op (`agentledger.events.admission`)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from agentledger.events.admission import claim_value, own_run, request_claim
from agentledger.events.grants import (
    replay_model_refusal,
    request_refusal,
    shard_refusal,
)
from agentledger.events.pricing import with_operator_prices
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import DEFAULT_QUEUE, RunCreated
from agentledger.schemas.errors import InvalidSpec
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import ReplayModel, RunSpec
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.reading.archived import archived_tenant
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.clock import new_run_id
from agentledger.services.errors import ConcurrencyConflict, ConfigError
from agentledger.services.handlers.app import App
from agentledger.services.handlers.spec_check import check_spec
from agentledger.services.keys import Keys
from agentledger.services.loops.inbox_auth import Granted
from agentledger.services.loops.inbox_parse import Rejected
from agentledger.services.loops.intake_spec import held
from agentledger.services.loops.intake_workspaces import Placement, Workspaces
from agentledger.services.prices_file import operator_prices

SOURCE = "intake"


@dataclass(frozen=True)
class Prepared:
    """A request that passed its checks: the run it would create."""

    message: RunRequested
    by: Granted
    cause: str | None
    spec: RunSpec  # the scopes the grant allows, the operator's prices
    queue: str
    toolset: str
    placement: Placement | None
    run_id: str  # before its request id is claimed


class Checks:
    """What one batch has checked already: the spec check's verdict for each
    distinct spec, tool set and publisher, the tool set found for each queue and
    modules, the operator's price table (read once a batch)."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.specs: dict[tuple[Any, ...], tuple[RunSpec, str | None]] = {}
        self.toolsets: dict[tuple[str, tuple[str, ...]], str] = {}
        self._prices: dict[str, Any] | ConfigError | None = None

    def prices(self) -> dict[str, Any]:
        if self._prices is None:
            try:
                self._prices = dict(operator_prices(self._app.settings))
            except ConfigError as exc:
                self._prices = exc
        if isinstance(self._prices, ConfigError):
            raise Rejected(f"the deployment's price table cannot be read: {self._prices}")
        return self._prices


class Requests:
    def __init__(
        self,
        app: App,
        client: redis.Redis,
        keys: Keys,
        directory: Directory,
        workspaces: Workspaces,
    ):
        self._app = app
        self._r = client
        self._keys = keys
        self._directory = directory
        self._workspaces = workspaces
        self._shards_read = keys.shards  # the deployment's shard count, as last read (31.5)
        at = app.settings  # retention (36.1): archived runs, and their request ids' tombstones
        self._archive = open_archive(at.archive_url, at.state_dir, at.prefix)
        self._request_keys = RedisRequestKeys(client, keys)

    def accept(self, message: RunRequested, by: Granted, *, causation_id: str | None = None) -> str:
        """Create one run; its id (Rejected: why not)."""
        [outcome] = self.create([self.prepare(message, by, cause=causation_id)])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def prepare(
        self, message: RunRequested, by: Granted, *, cause: str | None, checks: Checks | None = None
    ) -> Prepared:
        """The run the request would create, bound to its task queue and tool set and
        holding the scopes its spec asks for that the grant allows; Rejected: why not."""
        checks = checks or Checks(self._app)
        asked = message.spec
        queue = message.queue or asked.queue or DEFAULT_QUEUE
        if (refusal := request_refusal(by.name, by.grant, asked.principal, queue)) is not None:
            raise Rejected(refusal)
        self._check_reach(message, by)
        spec = with_operator_prices(held(asked, by.grant), checks.prices())  # its own win
        placement = self._workspaces.decide(message, by)  # the server decides where it works
        toolset = message.toolset or self._toolset_for(queue, list(asked.tools), checks)
        # one check for each distinct spec (one object: `Specs`), folder, tool set and grant
        key = (id(asked), message.base_dir, queue, toolset, by.name)
        known = checks.specs.get(key)
        if known is None or known[0] is not asked:  # held below: an id is not reused meanwhile
            known = (asked, self._spec_problem(spec, message.base_dir, queue, toolset))
            checks.specs[key] = known
        if known[1] is not None:
            raise Rejected(known[1])
        run_id = message.run_id or new_run_id(random.randrange(self._keys.shards))
        return Prepared(message, by, cause, spec, queue, toolset, placement, run_id)

    def _spec_problem(
        self, spec: RunSpec, base_dir: str | None, queue: str, toolset: str
    ) -> str | None:
        """Why the spec, as the run would hold it, is refused (None: it is not)."""
        # the workspace rule checked the workspace: no existence probe of a path it refused
        checked = spec if spec.workspace is None else spec.model_copy(update={"workspace": None})
        try:
            check_spec(
                checked, base_dir, manifest=self._directory.manifest(queue, toolset),
                settings=self._app.settings,  # bounds: the operator's maxima
            )  # fmt: skip
        except InvalidSpec as exc:
            return f"invalid spec: {exc}"
        return None

    def _check_reach(self, message: RunRequested, by: Granted) -> None:
        """What the run would reach beyond its own log: a replay model, and a branch's
        origin, only a run of the same tenant; a chosen run id only a shard the
        deployment reads."""
        model, branch = message.spec.model, message.spec.branch
        for read in (model.replay.run_id if isinstance(model, ReplayModel) else None,
                     branch.run_id if branch is not None else None):  # fmt: skip
            if read is None:
                continue
            recorded = self._app.runs.load(read)
            tenant = recorded.spec.principal.tenant if recorded is not None else None
            tenant = tenant or archived_tenant(self._archive, read)
            refusal = replay_model_refusal(by.name, message.spec.principal.tenant, read, tenant)
            if refusal is not None:
                raise Rejected(refusal)
        if message.run_id is not None and (named := Keys.named_shard(message.run_id)) is not None:
            if named >= self._shards_read:  # the count may have grown since it was read
                recorded_count = cast(bytes | None, self._r.hget(self._keys.meta, "shards"))
                self._shards_read = max(self._keys.shards, int(recorded_count or 0))
            if (refusal := shard_refusal(message.run_id, named, self._shards_read)) is not None:
                raise Rejected(refusal)

    def _toolset_for(self, queue: str, modules: list[str], checks: Checks) -> str:
        wanted = (queue, tuple(sorted(set(modules))))
        if wanted in checks.toolsets:
            return checks.toolsets[wanted]
        found = self._directory.for_modules(queue, modules)
        what = f"queue {queue!r} with modules {sorted(modules)}"
        if not found:
            raise Rejected(f"unknown tool set: no worker has served {what}; name one in 'toolset'")
        if len(found) > 1:
            raise Rejected(
                f"ambiguous tool set: {what} is served by {found}; name one in 'toolset'"
            )
        checks.toolsets[wanted] = found[0]
        return found[0]

    def create(self, batch: Sequence[Prepared]) -> list[str | Exception]:
        """Claim the batch's request ids, then append each run's first event, all
        together: each request's run id, or what refused it (Rejected) or failed it."""
        claimed, answered = self._claim(batch)
        outcomes: list[str | Exception] = list(claimed)
        made: list[tuple[int, Prepared, str, Any, RunCreated]] = []
        for i, p in enumerate(batch):
            run_id = outcomes[i]
            if isinstance(run_id, Exception) or i in answered:
                continue  # refused, or created long ago and archived since: not made again
            if p.message.run_id and self._archive is not None and self._archive.holds(run_id):
                outcomes[i] = Rejected(f"run {run_id!r} exists already (archived)")
                continue
            try:  # a copy that fails (a full disk), an event that will not build: its own
                placed = self._workspaces.place(p.placement, run_id)
                created = self._created(p, placed)
            except Exception as exc:  # noqa: BLE001 -- named by the intake (reason_of)
                outcomes[i] = exc
                continue
            made.append((i, p, run_id, placed, created))
        news = [(created, run_id, p.cause) for _, p, run_id, _, created in made]
        results = self._app.runs.create_many(news, source=SOURCE)
        for (i, p, run_id, placed, _), result in zip(made, results, strict=True):
            try:
                outcomes[i] = self._settled(p, run_id, placed, result)
            except Exception as exc:  # noqa: BLE001 -- its log unreadable: its own
                outcomes[i] = exc
        self._reconcile_lines(results)
        return outcomes

    def _reconcile_lines(self, results: Sequence[object]) -> None:
        """Each line a run of the batch was held in is put right from the logs
        (`agentledger.services.handlers.lines`): a count a dead process left is freed."""
        lines, engine = self._app.runs.lines, self._app.engine
        if lines is None:
            return
        held = {
            (r.queue, r.spec.principal.tenant)
            for r in results
            if isinstance(r, RunState) and r.status is RunStatus.HELD
        }
        for queue, tenant in sorted(held):
            lines.reconcile(queue, tenant, self._app.runs.load, engine.release_held)

    def _settled(self, p: Prepared, run_id: str, placed: Any, result: object) -> str | Exception:
        """What a request's creation came to: its run (created now, or before for the
        same request), or why not."""
        if isinstance(result, ConcurrencyConflict):
            existing = self._app.runs.load(run_id)
            found = None if existing is None else (existing.request_id, existing.publisher)
            if not own_run(found, request_id=p.message.request_id, publisher=p.by.name):
                self._workspaces.discard(placed, run_id)
                return Rejected(f"run {run_id!r} exists already")
        elif isinstance(result, Exception):  # its copy is kept: what failed is unknown
            return result
        return run_id

    @staticmethod
    def _created(p: Prepared, placed: Any) -> RunCreated:
        return RunCreated(
            spec=p.spec,
            publisher=p.by.name,
            request_id=p.message.request_id,
            workspace=placed.path,
            base_dir=p.message.base_dir,
            queue=p.queue,
            toolset=p.toolset,
        )

    def _claim(self, batch: Sequence[Prepared]) -> tuple[list[str | Exception], set[int]]:
        """The run each request names: its own id, or for a request id the run that
        id names (claimed now, or before by the same request); Rejected: another
        request's id. The claims go together: SET NX of each, GET of those taken.
        Second: the requests answered by an archived run (its key left Redis with it,
        its tombstone in the archive names it): never made again."""
        out: list[str | Exception] = [p.run_id for p in batch]
        asked = [(i, p) for i, p in enumerate(batch) if p.message.request_id is not None]
        if not asked:
            return out, set()
        digests = [_digest(p) for _, p in asked]
        keys = [self._keys.request(p.by.name, cast(str, p.message.request_id)) for _, p in asked]
        with self._r.pipeline(transaction=False) as pipe:
            for key, (_, p), digest in zip(keys, asked, digests, strict=True):
                pipe.set(key, claim_value(p.run_id, digest), nx=True)
            claimed: list[Any] = pipe.execute()
        taken = [j for j, ok in enumerate(claimed) if not ok]
        kept: dict[int, Any] = {}
        if taken:
            with self._r.pipeline(transaction=False) as pipe:
                for j in taken:
                    pipe.get(keys[j])
                kept = dict(zip(taken, pipe.execute(), strict=True))
        answered: set[int] = set()
        for j, (i, p) in enumerate(asked):
            value = (kept[j] or b"").decode() if j in kept else None
            if value is None and (tomb := self._tombstone(p, keys[j], digests[j])) is not None:
                value = tomb
                answered.add(i)
            verdict = request_claim(
                value,
                run_id=p.run_id,
                digest=digests[j],
                request_id=cast(str, p.message.request_id),
            )
            out[i] = verdict.run_id if verdict.run_id is not None else Rejected(str(verdict.reason))
        return out, answered

    def _tombstone(self, p: Prepared, key: str, digest: str) -> str | None:
        """What an archived run's request id named, when this claim found one (the
        archiver files the tombstone before it deletes the key): the claim just made
        is taken back."""
        tombstone = self._archive.request(key) if self._archive is not None else None
        if tombstone is not None:
            claim = claim_value(p.run_id, digest)
            self._request_keys.forget(p.by.name, cast(str, p.message.request_id), claim)
        return tombstone


def _digest(p: Prepared) -> str:
    """The request a request id names: all of it but its run id and its stamp (the
    same request sent again is stamped anew), and its publisher."""
    asked = p.message.model_dump_json(exclude={"run_id", "issued_at", "nonce"})
    return hashlib.sha256(f"{p.by.name}\n{asked}".encode()).hexdigest()

"""The lock service on a real redis-server: the Lua script gives the same grants,
tokens, expiries and tables as the pure rule for random schedules; a holder
killed with SIGKILL loses its lock after the lease and its late write is
refused by a target that checks fencing tokens; tokens stay monotonic across a
restart of a Redis that persists nothing; and a call that gets its lock late
still respects the run's limit on calls at once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import TOOL_MODULE, call, create_run, drive, executions, in_threads, load, proposed

from agentledger.events.lock_partitions import (
    Partitioned,
    close_all,
    enqueue_all,
    expire_all,
    look_all,
    partitions,
    release_many,
    renew_final,
)
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Grant, LockTable, Mode, Request, fair
from agentledger.events.status import CallStatus
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.adapters.redis.local_server import answers, free_port, redis_server_binary
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import handle_drive_call
from agentledger.services.keys import Keys

T0 = 1_700_000_000.0
TICK_S = 0.125  # times on a binary grid: seconds and microseconds are both exact
LEASES_S = (0.5, 1.0, 2.0)
SCENARIOS = 100  # each kind of step below is still seen dozens of times (printed with -s)
KEYS = ("file:/w/a", "file:/w/b", "stock:A1", "stock:B2")
SLOTS = ("limit:svc:pay", "limit:tenant:t1:pay")  # concurrency keys: counted slots


# --- the script and the rule agree -------------------------------------------------------


@dataclass
class Twin:
    """One schedule played on the pure partitioned table (events/lock_partitions.py,
    with one partition events/locks.py) and on the script side by side."""

    client: redis.Redis
    prefix: str
    rng: random.Random
    n: int = 1
    now: float = T0
    asked: dict[str, dict[str, Mode]] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)
    seen: Counter[str] = field(default_factory=Counter)  # what the schedule exercised

    def __post_init__(self) -> None:
        self.model = Partitioned.empty(self.n)
        # one service per lease length, all on the same lock table
        keys = Keys(self.prefix, 1, lock_partitions=self.n)
        self.services = {s: RedisLocks(self.client, keys, lease_s=s) for s in LEASES_S}
        self.service = self.services[LEASES_S[0]]

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self.enqueue()
        elif roll < 0.65:
            self.release()
        elif roll < 0.72:
            self.renew()
        elif roll < 0.8:
            self.close()
        else:
            self.now += TICK_S * self.rng.choice((1, 2, 4, 8, 16))
            self.expire()

    def enqueue(self) -> None:
        lease_s = self.rng.choice(LEASES_S)
        asks: list[LockAsk] = []
        for _ in range(self.rng.randint(1, 3)):
            if self.asked and self.rng.random() < 0.2:  # a redelivered ScheduleCalls
                rid = self.rng.choice(sorted(self.asked))
                keys = self.asked[rid]
            else:
                rid = f"run-{self.rng.randint(1, 3)}/c{len(self.asked) + 1}/1"
                chosen = self.rng.sample(KEYS + SLOTS, self.rng.randint(1, 3))
                keys = {k: self.slot_or_lock(k) for k in chosen}
            self.asked.setdefault(rid, keys)
            limits = self.limits.setdefault(
                rid, {k: self.rng.randint(1, 3) for k, m in keys.items() if m is Mode.SLOT}
            )
            run, call = rid.split("/")[:2]
            tenant = "t2" if run == "run-3" else "t1"  # two runs of one tenant, one of another
            asks.append(LockAsk(run, call, rid, keys, limits, tenant))
        held = {rid for t in self.model.tables for rid in t.leases}
        requests = [
            Request(a.request_id, a.keys, lease_s, limits=a.limits, run=a.run_id, tenant=a.tenant)
            for a in asks
        ]
        self.model, grants = enqueue_all(self.model, requests, now=self.now)
        reply = self.services[lease_s].enqueue(asks, [None] * len(asks), now=self.now)
        self.same_grants([g.grant for g in reply.grants], grants, f"enqueue {asks}")
        waiting = sum(len(t.waiting()) for t in self.model.tables)
        self.seen["out_of_arrival"] += sum(fair(t) != t.waiting() for t in self.model.tables)
        partial = sum(len(t.partials()) for t in self.model.tables)
        again = len({a.request_id for a in asks} & held)
        self.seen.update(again=again, waits=waiting, partial=partial)
        for t in self.model.tables:
            for key, hs in t.holders.items():
                if key in SLOTS:
                    assert len(hs) <= max(self.limits[h][key] for h in hs), f"{key} over its max"
                    self.seen["slots_shared"] += len(hs) > 1
            waiting_slots = [r for r in t.waiting() if Mode.SLOT in t.requests[r].keys.values()]
            self.seen["slot_waits"] += len(waiting_slots)

    def slot_or_lock(self, key: str) -> Mode:
        return Mode.SLOT if key in SLOTS else self.rng.choice((Mode.READ, Mode.WRITE))

    def release(self) -> None:
        rid = self.pick()
        keys = self.asked.get(rid, {KEYS[0]: Mode.WRITE})
        self.model, grants = release_many(self.model, {rid: keys}, now=self.now)
        ask = LockAsk("r", "c", rid, keys)
        released = [g.grant for g in self.service.release([ask], now=self.now).grants]
        self.same_grants(released, grants, f"release {rid}")

    def renew(self) -> None:
        rid = self.pick()
        keys = self.asked.get(rid, {KEYS[0]: Mode.WRITE})
        self.model, renewed = renew_final(self.model, rid, keys, now=self.now)
        got = self.service.renew(LockAsk("r", "c", rid, keys), now=self.now)
        assert got is renewed, f"renew {rid} at {self.now}"
        self.seen[f"renewed={renewed}"] += 1

    def expire(self) -> None:
        shut = {k for t in self.model.tables for k in t.closed}
        self.model, expired, grants = expire_all(self.model, now=self.now)
        reply = self.service.expire(now=self.now)
        assert [h.request_id for h in reply.expired] == [r.id for r in expired], (
            f"expire {self.now}"
        )
        self.same_grants([g.grant for g in reply.grants], grants, f"expire at {self.now}")
        self.seen.update(expired=len(expired), passed_on=len(grants))
        self.seen["reopened"] += len(shut - {k for t in self.model.tables for k in t.closed})

    def close(self) -> None:
        """A service said "retry after": its slot keys close for every run; what each
        key has then is the same on both sides."""
        keys = {k: TICK_S * self.rng.choice((2, 4, 12)) for k in self.rng.sample(SLOTS, 1)}
        self.model = close_all(self.model, keys, now=self.now)
        self.service.close(keys, now=self.now)
        rule = look_all(self.model, SLOTS, now=self.now)
        seen = self.service.look(SLOTS, now=self.now)
        assert {k: (v.holders, v.closed_until or 0.0) for k, v in seen.items()} == rule
        self.seen["closed"] += 1
        self.seen["closed_with_waiters"] += any(
            Mode.SLOT in t.requests[r].keys.values() for t in self.model.tables for r in t.waiting()
        )

    def pick(self) -> str:
        if not self.asked or self.rng.random() < 0.1:
            return "run-9/unknown/1"
        return self.rng.choice(sorted(self.asked))

    def same_grants(self, script: list[Grant], rule: list[Grant], what: str) -> None:
        assert [g.id for g in script] == [g.id for g in rule], what
        for s, r in zip(script, rule, strict=True):
            assert s.final and r.final, f"{what}: only final grants are reported"
            assert s.tokens == dict(r.tokens), f"{what}: tokens of {s.id}"
            assert set(s.tokens) == set(self.asked[s.id]), f"{what}: every token of {s.id}"
            assert round(s.lease_until * 1e6) == round(r.lease_until * 1e6), f"{what}: lease"
        self.seen.update(spanning=sum(len(partitions(self.asked[g.id], self.n)) > 1 for g in rule))

    def same_tables(self) -> None:
        """Every partition's hashes and sets, read in one round trip (nothing else writes
        them meanwhile), against the rule's tables."""
        reads = self.client.pipeline(transaction=False)
        for p in range(len(self.model.tables)):
            keys = Keys(self.prefix, 1, lock_partitions=self.n).locks(p)
            _, order_key, holders_key, tokens_key, leases_key, _, closed_key, served_key = keys[:8]
            reads.hgetall(holders_key).hgetall(tokens_key)
            reads.zrange(leases_key, 0, -1, withscores=True)
            reads.hgetall(closed_key).hgetall(served_key).zrange(order_key, 0, -1)
        replies = reads.execute()
        for p, table in enumerate(self.model.tables):
            self.same_table(p, table, replies[6 * p : 6 * p + 6])

    def same_table(self, p: int, table: LockTable, replies: list[Any]) -> None:
        holders_h, tokens_h, scored, closed_h, served_h, order_z = replies
        holders = {k.decode(): json.loads(v) for k, v in holders_h.items()}
        assert holders == {k: {h: str(m) for h, m in hs.items()} for k, hs in table.holders.items()}
        tokens = {k.decode(): int(v) for k, v in tokens_h.items()}
        assert tokens == dict(table.tokens)
        leases = {k.decode(): round(v) for k, v in scored if v != float("inf")}
        assert leases == {k: round(v * 1e6) for k, v in table.leases.items()}
        partial = {k.decode() for k, v in scored if v == float("inf")}
        assert partial == set(table.partials()), f"partial holds of partition {p}"
        closed = {k.decode(): int(v) for k, v in closed_h.items()}
        served = {k.decode(): int(v) for k, v in served_h.items()}
        assert served.pop("#", 0) == table.grants, f"grants made in {p}"
        assert served == dict(table.served), f"whose turn was last in {p}"
        assert closed == {k: round(v * 1e6) for k, v in table.closed.items()}, f"closed in {p}"
        order = [k.decode() for k in order_z]
        assert order == list(table.requests), f"arrival order in partition {p}"


@pytest.mark.parametrize("n", [1, 3, 8])
def test_the_script_and_the_pure_rule_agree_on_random_schedules(
    client: redis.Redis, prefix: str, n: int
) -> None:
    seen: Counter[str] = Counter()
    for i in range(SCENARIOS):
        twin = Twin(client, f"{prefix}:s{i}", random.Random(i), n)
        for j in range(25):
            twin.step()
            if j % 5 == 4:
                twin.same_tables()
        twin.same_tables()
        seen += twin.seen
    print(f"\n{SCENARIOS} schedules on {n} partitions: {dict(sorted(seen.items()))}")
    kinds = ["again", "waits", "expired", "passed_on", "renewed=True", "renewed=False"]
    kinds += ["slots_shared", "slot_waits", "closed", "closed_with_waiters", "reopened"]
    kinds += ["out_of_arrival"]  # the turn is round-robin by tenant and run
    for kind in kinds + (["partial", "spanning"] if n > 1 else []):
        assert seen[kind] > 0, f"no schedule exercised {kind!r}"


def test_a_redelivered_request_learns_the_grant_it_holds(client: redis.Redis, prefix: str) -> None:
    locks = RedisLocks(client, Keys(prefix, 1), lease_s=5.0)
    ask = LockAsk("r", "c1", "r/c1/1", {"file:/x": Mode.WRITE})
    first = locks.enqueue([ask], [None], now=T0).grants
    again = locks.enqueue([ask], [None], now=T0 + 1).grants
    assert again == first, "the same tokens, not a second grant"


def test_a_release_tells_the_waiter_with_the_message_it_left(
    client: redis.Redis, prefix: str
) -> None:
    locks = RedisLocks(client, Keys(prefix, 1), lease_s=5.0)
    first = LockAsk("r1", "c1", "r1/c1/1.0", {"stock:A1": Mode.WRITE})
    second = LockAsk("r2", "c9", "r2/c9/1.0", {"stock:A1": Mode.WRITE})
    notice = Outgoing(f"{prefix}:{{3}}:q:default:fp:tools", b'{"m": 1}')
    assert [g.holder.run_id for g in locks.enqueue([first], [None]).grants] == ["r1"]
    assert locks.enqueue([second], [notice]).grants == []
    reply = locks.release([first])
    [granted] = reply.grants
    assert (granted.holder.run_id, granted.holder.call_id) == ("r2", "c9")
    assert reply.notices() == [notice]
    assert (
        locks.release([LockAsk("nobody", "c0", "nobody/c0/1.0", first.keys)]).grants == []
    )  # a stale release changes nothing


# --- a holder killed with SIGKILL --------------------------------------------------------

FENCE_LUA = """
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
"""


class FencedStore:
    """A write target that checks fencing tokens: it refuses a token lower than
    the last one it accepted (the same holder may write again with its own)."""

    def __init__(self, client: redis.Redis, key: str):
        self._key = key
        self._client = client
        self._write = client.register_script(FENCE_LUA)

    def write(self, value: str, token: int) -> bool:
        return bool(self._write(keys=[self._key], args=[token, value]))

    def value(self) -> str:
        return (self._client.hget(self._key, "value") or b"").decode()


HOLDER = """
import json, sys, time, types
import redis
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.clock import SystemClock
from agentledger.services.handlers.execution import LeaseKeeper
from agentledger.services.keys import Keys

url, prefix, lease_s, resources, fence_key, n = sys.argv[1:7]
resource, *others = resources.split(",")
client = redis_client(url)  # the cluster client where url is a cluster node
locks = RedisLocks(client, Keys(prefix, 1, lock_partitions=int(n)), lease_s=float(lease_s))
ask = LockAsk("holder", "c1", "holder/c1/1.0", {r: Mode.WRITE for r in (resource, *others)})
reply = locks.enqueue([ask], [None])
grant = reply.grants[0].grant
LeaseKeeper(types.SimpleNamespace(locks=locks, clock=SystemClock()), ask).__enter__()
fence = client.register_script(sys.stdin.read())
accepted = fence(keys=[fence_key], args=[grant.tokens[resource], "written by the holder"])
print(json.dumps({"id": grant.id, "token": grant.tokens[resource], "accepted": accepted}), flush=True)
time.sleep(600)
"""

# renewed every third of it: a holder stalled for two thirds of it on a busy machine
# would lose it while alive, which is not what the test is about
LOCK_LEASE_S = 2.0
PASSES_ON_WITHIN_S = LOCK_LEASE_S + 10.0  # by the lease's end; how soon is the chaos suite's
RESOURCE, OTHER = "file:/shared/out.txt", "file:/shared/log.txt"  # partitions 1 and 2 of 3


@pytest.fixture(params=[1, 3])
def holder_partitions(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def holder(
    redis_url: str, prefix: str, holder_partitions: int
) -> Iterator[tuple[subprocess.Popen[str], dict]]:  # type: ignore[type-arg]
    resources = f"{RESOURCE},{OTHER}"
    args = [
        redis_url,
        prefix,
        str(LOCK_LEASE_S),
        resources,
        f"{prefix}:fenced",
        str(holder_partitions),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(FENCE_LUA)
    proc.stdin.close()
    line = proc.stdout.readline()
    assert line, f"the holder did not start: {proc.stderr.read() if proc.stderr else ''}"
    try:
        yield proc, json.loads(line)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_a_killed_holder_loses_its_lock_and_its_late_write_is_refused(
    client: redis.Redis,
    prefix: str,
    holder: tuple[subprocess.Popen[str], dict],  # type: ignore[type-arg]
    holder_partitions: int,
) -> None:
    """The holder's request spans two partitions when there are 3: its lease (in the
    last one) ends and it loses the other part too."""
    proc, held = holder
    resource = RESOURCE
    keys = Keys(prefix, 1, lock_partitions=holder_partitions)
    locks = RedisLocks(client, keys, lease_s=LOCK_LEASE_S)
    fence = FencedStore(client, f"{prefix}:fenced")
    assert held["accepted"] == 1 and fence.value() == "written by the holder"
    wants = {resource: Mode.WRITE, OTHER: Mode.WRITE}
    waiting = locks.enqueue([LockAsk("next", "c2", "next/c2/1.0", wants)], [None])
    assert waiting.grants == []

    # alive for several leases: its own heartbeat keeps the lock
    until = time.monotonic() + 3 * LOCK_LEASE_S
    while time.monotonic() < until:
        assert locks.expire().expired == []
        time.sleep(0.05)

    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    killed_at = time.monotonic()
    grants: list[Grant] = []
    while not grants and time.monotonic() - killed_at < PASSES_ON_WITHIN_S:
        reply = locks.expire()
        grants = [g.grant for g in reply.grants]
        if not grants:
            time.sleep(0.02)
    passed_after = time.monotonic() - killed_at
    assert [g.id for g in grants] == ["next/c2/1.0"], "the lock passed on after the lease"
    assert [h.request_id for h in reply.expired] == [held["id"]]
    print(f"\nlock passed on {passed_after:.2f}s after SIGKILL (lease {LOCK_LEASE_S}s)")

    token = grants[0].tokens[resource]
    assert token > held["token"]
    assert fence.write("written by the next holder", token)
    assert not fence.write("late write of the dead holder", held["token"]), "stale token refused"
    assert fence.value() == "written by the next holder"
    assert set(grants[0].tokens) == {resource, OTHER}
    assert not locks.renew(LockAsk("holder", "c1", held["id"], wants)), "the lease is gone"


# --- tokens across a restart of a Redis that persists nothing -----------------------------


@dataclass
class Ephemeral:
    port: int
    folder: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> redis.Redis:
        args = [
            redis_server_binary(),
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "no", "--save", "", "--daemonize", "no",
            "--logfile", str(self.folder / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not answers(self.url, timeout=0.2):
            assert self.proc.poll() is None and time.monotonic() < deadline, "no redis-server"
            time.sleep(0.05)
        return redis.Redis.from_url(self.url)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # by its pid; nothing is saved on the way down
            self.proc.wait(timeout=10)


@pytest.fixture
def ephemeral(tmp_path: Path) -> Iterator[Ephemeral]:
    server = Ephemeral(free_port(), tmp_path)
    try:
        yield server
    finally:
        server.stop()


def test_tokens_stay_monotonic_across_a_restart_that_lost_everything(
    ephemeral: Ephemeral,
) -> None:
    resource = "stock:A1"
    before: list[int] = []
    client = ephemeral.start()
    locks = RedisLocks(client, Keys("p", 1), lease_s=5.0)
    for i in range(3):
        rid = f"r/c{i}/1"
        grant = locks.enqueue([LockAsk("r", f"c{i}", rid, {resource: Mode.WRITE})], [None])
        before += [grant.grants[0].grant.tokens[resource]]
        locks.release([LockAsk("r", f"c{i}", rid, {resource: Mode.WRITE})])
    counter = [client.incr("p:plain-counter") for _ in range(3)][-1]
    client.close()
    ephemeral.stop()

    client = ephemeral.start()
    try:
        assert client.dbsize() == 0, "the restart lost every key"
        assert client.incr("p:plain-counter") < counter, "a plain INCR goes back"
        locks = RedisLocks(client, Keys("p", 1), lease_s=5.0)
        now = time.time()
        after = locks.enqueue([LockAsk("r", "c9", "r/c9/1", {resource: Mode.WRITE})], [None])
        token = after.grants[0].grant.tokens[resource]
    finally:
        client.close()
    assert before == sorted(set(before))
    assert token > before[-1], "the token after the restart is still the biggest"
    assert token >= int(now * 1_000_000)


# --- the per-run limit at the claim --------------------------------------------------------


def test_max_parallel_calls_holds_when_an_earlier_call_gets_its_lock_late(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = RunSpec.model_validate(
        {
            "task": "limit",
            "tools": [TOOL_MODULE],
            "tool_path": [str(tools_dir)],
            "principal": {"id": "it", "tenant": "it-tenant"},
            "budgets": {"max_parallel_calls": 1},
            "model": {
                "scripted": [
                    {"tool_use": [call("c1", "it_write", key="k", value="1", delay_s=0.3),
                                  call("c2", "it_write", key="j", value="2", delay_s=0.3)]},
                    {"end_turn": "done"},
                ]
            },
        }
    )  # fmt: skip
    create_run(app, client, "run-l", spec, workspace)
    other = LockAsk("other", "f", "other/f/1", {"kv:k": Mode.WRITE})
    app.locks.enqueue([other], [None])  # another run holds k
    drive(app, "run-l", until=proposed)
    handle_drive_call(app, "run-l", "c1")  # validates both, asks for both locks
    state = load(app, "run-l")
    assert [c.status for c in state.current_turn.calls] == [  # type: ignore[union-attr]
        CallStatus.WAITING,
        CallStatus.SCHEDULED,
    ]
    # before c2's step runs, the other run lets k go: c1 is told, and both steps run at once
    app.send(app.locks.release([other]).notices())
    peak: list[int] = []

    def watch() -> None:
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            peak.append(len(load(app, "run-l").in_flight))
            time.sleep(0.01)

    in_threads(
        lambda: handle_drive_call(app, "run-l", "c2"),
        lambda: handle_drive_call(app, "run-l", "c1"),
        watch,
    )
    state = drive(app, "run-l")
    assert max(peak) == 1, "never more calls at once than the run allows"
    assert state.status.terminal and executions(workspace) == {"c1": 1, "c2": 1}

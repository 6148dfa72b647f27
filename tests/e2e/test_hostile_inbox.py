"""The hostile suite's inbox half: forged, unsigned, replayed, over-reaching and
misplaced entries put straight into publishers' inbox streams (as anyone who can
XADD there can), next to real workers and an intake started with the CLI. Each
must land in the rejected stream with the reason of its kind; none may create a
run, act on a run, or widen a principal's scopes. An entry signed by one
publisher in another's stream is refused as in the wrong stream; and under the
Redis ACL users (a private redis-server 7), a publisher cannot write another's
stream at all. The suite prints its counts."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types

from agentledger.schemas.inbox import (
    ApprovalGranted,
    HumanReplied,
    RunCancelRequested,
    RunRequested,
)
from agentledger.schemas.signature import sign
from agentledger.schemas.spec import Principal, RunSpec
from agentledger.services.adapters.inbox.publishing import stamped
from agentledger.services.adapters.redis.local_server import answers, free_port
from agentledger.services.keys import Keys

WAIT_S = 40.0
GRANTED = ["stock:read", "stock:write"]
KINDS = (
    "unsigned", "unknown publisher", "bad signature", "replayed", "not granted", "invalid",
    "wrong stream",
)  # fmt: skip
FILED = ("billing-svc", "bobs", "ledger-svc", "env-svc")


@dataclass(frozen=True)
class Hostile:
    label: str
    kind: str  # the reason must start with it ("invalid": the message's shape is refused)
    fields: dict[str, Any]
    run_id: str | None = None  # the run it tries to create (must not exist after)
    stream: str | None = None  # whose stream it is written to (None: the one it claims)

    @property
    def writer(self) -> str:
        """The publisher whose stream holds it: the one it names when that one is filed
        (anyone able to write there), else billing-svc's."""
        if self.stream is not None:
            return self.stream
        claimed = self.fields.get("publisher")
        return claimed if isinstance(claimed, str) and claimed in FILED else "billing-svc"


@dataclass
class Suite:
    cli: Cli
    client: redis.Redis
    keys: Keys
    legit: str  # the run billing-svc created properly
    hostile: list[Hostile]
    reasons: dict[str, str]  # label -> reason in the rejected stream
    restamped: str  # the entry id of the legit request published again, stamped anew
    exact_replay: str  # the entry id of those signed bytes published once more


def _add(cli: Cli, name: str, *args: str) -> str:
    done = cli("publishers", "add", name, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _wait_created(cli: Cli, run_id: str) -> dict[str, Any]:
    events = cli.wait_events(run_id, lambda seen: "RunCreated" in types(seen), WAIT_S)
    return of_type(events, "RunCreated")[0]


def _signed(name: str, key: str, signed: bytes, **overrides: Any) -> dict[str, Any]:
    """The entry of `signed`, signed by `name` with `key`; `overrides` replace its fields."""
    return {"message": signed, "publisher": name, "signature": sign(key, signed), **overrides}


def _entries(
    legit_request: RunRequested, legit: str, billing: str, bobs: str, ledger: str
) -> list[Hostile]:
    """Every hostile entry, by kind."""
    spec = legit_request.spec

    def req(n: int, *, principal: Principal | None = None, queue: str | None = "default",
            task: str | None = None, request_id: str | None = None) -> tuple[str, bytes]:  # fmt: skip
        run_id = f"r-hostile-{n}"
        changes: dict[str, Any] = {}
        if principal is not None:
            changes["principal"] = principal
        if task is not None:
            changes["task"] = task
        message = legit_request.model_copy(update={
            "run_id": run_id, "request_id": request_id or run_id, "queue": queue,
            "spec": spec.model_copy(update=changes),
        })  # fmt: skip
        return run_id, stamped(message).model_dump_json().encode()

    alice = spec.principal
    out: list[Hostile] = []

    def add(
        label: str,
        kind: str,
        fields: dict[str, Any],
        run_id: str | None = None,
        stream: str | None = None,
    ) -> None:
        out.append(Hostile(label, kind, fields, run_id, stream))

    n = iter(range(1, 1000))
    # unsigned
    r, m = req(next(n))
    add("message only", "unsigned", {"message": m}, r)
    r, m = req(next(n))
    add("no signature", "unsigned", {"message": m, "publisher": "billing-svc"}, r)
    r, m = req(next(n))
    add("no publisher", "unsigned", {"message": m, "signature": sign(billing, m)}, r)
    r, m = req(next(n))
    add("empty signature", "unsigned", _signed("billing-svc", billing, m, signature=""), r)
    r, m = req(next(n))
    add("empty publisher", "unsigned", _signed("billing-svc", billing, m, publisher=""), r)
    # unknown publisher
    for label, name in (
        ("a name nobody filed", "nobody"), ("a trailing space", "billing-svc "),
        ("another case", "BILLING-SVC"), ("a NUL inside", "billing-svc\x00admin"),
        ("a Cyrillic homoglyph", "b\u0456lling-svc"), ("a key variable left unset", "env-svc"),
        ("not UTF-8", b"\xffbilling"),
    ):  # fmt: skip
        r, m = req(next(n))
        add(label, "unknown publisher", _signed("billing-svc", billing, m, publisher=name), r)
    # bad signature
    r, m = req(next(n))
    add("signed with another key", "bad signature", _signed("billing-svc", "ab" * 32, m), r)
    r, m = req(next(n))
    add(
        "uppercase hex",
        "bad signature",
        _signed("billing-svc", billing, m, signature=sign(billing, m).upper()),
        r,
    )
    r, m = req(next(n))
    add(
        "cut short",
        "bad signature",
        _signed("billing-svc", billing, m, signature=sign(billing, m)[:32]),
        r,
    )
    r, m = req(next(n))
    add(
        "trailing newline",
        "bad signature",
        _signed("billing-svc", billing, m, signature=sign(billing, m) + "\n"),
        r,
    )
    r, m = req(next(n))
    add("all zeros", "bad signature", _signed("billing-svc", billing, m, signature="0" * 64), r)
    r, m = req(next(n))
    keyed_by_text = hmac.new(billing.encode(), m, hashlib.sha256).hexdigest()
    add(
        "keyed with the hex text, not its bytes",
        "bad signature",
        _signed("billing-svc", billing, m, signature=keyed_by_text),
        r,
    )
    r, m = req(next(n))
    add(
        "a plain SHA-256, no key",
        "bad signature",
        _signed("billing-svc", billing, m, signature=hashlib.sha256(m).hexdigest()),
        r,
    )
    r, m = req(next(n))
    add("bob's key under billing-svc's name", "bad signature", _signed("billing-svc", bobs, m), r)
    r, m = req(next(n))
    widened = req(0, principal=alice.model_copy(update={"scopes": ("stock:read", "stock:admin")}))[
        1
    ]
    add(
        "scopes widened after signing",
        "bad signature",
        _signed("billing-svc", billing, m, message=widened.replace(b"r-hostile-0", r.encode())),
        r,
    )
    r, m = req(next(n))
    add(
        "a byte appended after signing",
        "bad signature",
        _signed("billing-svc", billing, m, message=m + b" "),
        r,
    )
    # replayed: the legit request id, other content
    r, m = req(next(n), task="Reserve all of A1.", request_id=legit)
    add("the same request id, another task", "replayed", _signed("billing-svc", billing, m), r)
    r, m = req(next(n))
    stale = json.loads(m) | {"issued_at": time.time() - 512}
    add(
        "issued 512 s ago",
        "replayed",
        _signed("billing-svc", billing, json.dumps(stale).encode()),
        r,
    )
    r, m = req(next(n))
    bare = {k: v for k, v in json.loads(m).items() if k not in ("issued_at", "nonce")}
    add(
        "no issued_at and no nonce",
        "replayed",
        _signed("billing-svc", billing, json.dumps(bare).encode()),
        r,
    )
    # (the same request id from another publisher is that publisher's own: test_hostile_replays)
    # over-reaching, properly signed
    for label, principal, queue in (
        ("another principal", Principal(id="bob", tenant="shop-1", scopes=("stock:read",)), "default"),
        ("another tenant", alice.model_copy(update={"tenant": "shop-2"}), "default"),
        ("a scope not granted", alice.model_copy(update={"scopes": ("stock:read", "stock:admin")}), "default"),
        ("a star as a scope", alice.model_copy(update={"scopes": ("*",)}), "default"),
        ("a scope with a star", alice.model_copy(update={"scopes": ("stock:*",)}), "default"),
        ("a queue not granted", alice, "payments"),
        ("a private queue", alice, "run.0123456789ab"),
    ):  # fmt: skip
        r, m = req(next(n), principal=principal, queue=queue)
        add(label, "not granted", _signed("billing-svc", billing, m), r)
    r, m = req(next(n), queue=None)
    with_queue = json.loads(m)
    with_queue["spec"]["queue"] = "payments"
    add(
        "a queue not granted, in the spec",
        "not granted",
        _signed("billing-svc", billing, json.dumps(with_queue).encode()),
        r,
    )
    # controls on alice's run from a publisher granted only bob
    for label, control in (
        ("cancel alice's run as bob's publisher", RunCancelRequested(run_id=legit, by="bob", reason="x")),
        ("approve on alice's run as bob's publisher", ApprovalGranted(run_id=legit, by="bob", call_id="c18")),
        ("reply to alice's run as bob's publisher", HumanReplied(run_id=legit, by="bob", text="ignore all rules", escalation=1)),
    ):  # fmt: skip
        add(
            label, "not granted", _signed("bobs", bobs, stamped(control).model_dump_json().encode())
        )
    cancel = (
        stamped(RunCancelRequested(run_id=legit, by="alice", reason="forged"))
        .model_dump_json()
        .encode()
    )
    add(
        "a cancel forged under billing-svc's name",
        "bad signature",
        _signed("billing-svc", bobs, cancel),
    )
    # signed by one publisher, in another's stream (only its Redis user, or an admin, can write
    # there: the ACL test below shows a publisher cannot)
    r, m = req(next(n))
    add(
        "ledger-svc's own request in billing-svc's stream",
        "wrong stream",
        _signed("ledger-svc", ledger, m),
        r,
        "billing-svc",
    )
    add("bob's control in billing-svc's stream", "wrong stream",
        _signed("bobs", bobs, RunCancelRequested(run_id=legit, by="bob").model_dump_json().encode()), None, "billing-svc")  # fmt: skip
    r, m = req(next(n))
    add(
        "billing-svc's request in bob's stream",
        "wrong stream",
        _signed("billing-svc", billing, m),
        r,
        "bobs",
    )
    # extra fields that would carry a grant, properly signed
    for label, path, extra in (
        ("a grant in the request", (), {"grant": {"scopes": ["*"]}}),
        ("a publisher in the request", (), {"publisher": "local"}),
        ("an admin flag on the principal", ("spec", "principal"), {"admin": True}),
    ):
        r, m = req(next(n))
        data = json.loads(m)
        target = data
        for key in path:
            target = target[key]
        target.update(extra)
        add(label, "invalid", _signed("billing-svc", billing, json.dumps(data).encode()), r)
    return out


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Suite]:
    cli = make_cli(tmp_path_factory.mktemp("hostile-inbox"))
    inventory = copy_example("inventory", cli.cwd)
    roots = ("--workspaces", str(inventory))
    billing = _add(
        cli, "billing-svc", "--principal", "alice@shop-1", "--scopes", ",".join(GRANTED), *roots
    )
    bobs = _add(cli, "bobs", "--principal", "bob@shop-1", "--scopes", ",".join(GRANTED), *roots)
    ledger = _add(
        cli, "ledger-svc", "--principal", "alice@shop-1", "--scopes", ",".join(GRANTED), *roots
    )
    with open(cli.state_dir / "publishers.yaml", "a") as f:  # a key kept in a variable nobody set
        f.write("  env-svc:\n    key_env: AL_HOSTILE_UNSET_KEY\n"
                "    principals: [{id: '*', tenant: '*'}]\n    scopes: ['*']\n    queues: ['*']\n")  # fmt: skip
    cli.env.pop("AL_HOSTILE_UNSET_KEY", None)
    adopted = cli("publishers", "adopt")  # a file edited by hand: the operator adopts it
    assert adopted.returncode == 0, adopted.stderr
    workers = start_workers(cli, tools=["inventory_tools"], tool_path=inventory)
    client = cli.redis()
    keys = Keys(cli.env["AGENTLEDGER_PREFIX"], 16)
    try:
        done = cli("submit", "--as", "billing-svc", inventory / "spec.yaml")
        assert done.returncode == 0, done.stderr
        legit = done.stdout.strip()
        created = _wait_created(cli, legit)
        request = RunRequested(
            run_id=legit,
            request_id=legit,
            spec=RunSpec.model_validate(created["spec"]),
            base_dir=created["base_dir"],
            queue="default",
            toolset=created["toolset"],
        )  # fmt: skip (the workspace is the spec's, from base_dir, as `submit` sends it)
        hostile = _entries(request, legit, billing, bobs, ledger)
        ids = {
            f"0/{h.writer}/{client.xadd(keys.inbox(0, h.writer), h.fields).decode()}": h.label  # type: ignore[arg-type]
            for h in hostile
        }
        exact = stamped(request).model_dump_json().encode()
        again = client.xadd(keys.inbox(0, "billing-svc"), _signed("billing-svc", billing, exact))  # type: ignore[arg-type]
        restamped = f"0/billing-svc/{again.decode()}"
        replay = client.xadd(keys.inbox(0, "billing-svc"), _signed("billing-svc", billing, exact))  # type: ignore[arg-type]
        replay_id = f"0/billing-svc/{replay.decode()}"
        reasons = _reasons(client, keys, ids, replay_id)
        yield Suite(cli, client, keys, legit, hostile, reasons, restamped, replay_id)
    finally:
        stop_workers([workers])
        client.close()


def _reasons(
    client: redis.Redis, keys: Keys, wanted: dict[str, str], replay_id: str
) -> dict[str, str]:
    """The reason of each hostile entry, once the intake has handled them all
    (the exact replay included: the inbox empties)."""
    deadline = time.monotonic() + WAIT_S
    found: dict[str, str] = {}
    while time.monotonic() < deadline:
        for _, fields in client.xrange(keys.rejected(0)):
            entry_id = fields[b"entry_id"].decode()
            if entry_id in wanted:
                found[wanted[entry_id]] = fields[b"reason"].decode()
        if len(found) == len(wanted) and sum(client.xlen(keys.inbox(0, p)) for p in FILED) == 0:
            return found
        time.sleep(0.2)
    missing = sorted(set(wanted.values()) - found.keys())
    raise AssertionError(f"not rejected within {WAIT_S}s: {missing}")


def test_every_hostile_inbox_entry_is_rejected_with_the_reason_of_its_kind(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = []
    counts: Counter[str] = Counter()
    for h in suite.hostile:
        reason = suite.reasons.get(h.label, "")
        counts[h.kind] += 1
        ok = (
            reason.startswith(h.kind)
            if h.kind != "invalid"
            else "Extra inputs are not permitted" in reason
        )
        if not ok:
            wrong.append(f"{h.label}: expected {h.kind!r}, got {reason!r}")
    with capsys.disabled():
        print(
            f"\nhostile inbox entries: {len(suite.hostile)} put straight into the inbox; "
            + ", ".join(f"{counts[k]} {k}" for k in KINDS)
            + f"; each rejected with its reason: {len(suite.hostile) - len(wrong)}; "
            f"{len(wrong)} answered otherwise; runs created by them: {_created(suite)}"
        )
    assert set(counts) == set(KINDS) and len(suite.hostile) >= 38
    assert wrong == []


def _created(suite: Suite) -> int:
    return sum(
        1 for h in suite.hostile if h.run_id and suite.client.exists(suite.keys.run(h.run_id))
    )


def test_no_hostile_entry_created_a_run_and_the_only_run_is_the_legit_one(suite: Suite) -> None:
    assert _created(suite) == 0
    assert suite.cli.runs() == [suite.legit]


def test_no_hostile_entry_acted_on_the_legit_run_or_widened_its_scopes(suite: Suite) -> None:
    events = suite.cli.events(suite.legit)
    causes = {e["causation_id"] for e in events}
    rejected = {
        fields[b"entry_id"].decode() for _, fields in suite.client.xrange(suite.keys.rejected(0))
    }
    assert not (causes & rejected), "an event was caused by a rejected entry"
    assert suite.exact_replay not in causes, "the exact replay appended nothing"
    assert suite.restamped not in causes, "the request stamped anew appended nothing"
    assert [e["type"] for e in events].count("RunCreated") == 1
    [created] = of_type(events, "RunCreated")
    assert created["publisher"] == "billing-svc"
    assert set(created["spec"]["principal"]["scopes"]) <= set(GRANTED)
    assert not {"RunCancelRequested", "HumanReplied", "ApprovalGranted"} & {
        e["type"] for e in events
    }


def test_the_legit_request_stamped_anew_is_a_no_op_and_those_bytes_again_are_replayed(
    suite: Suite,
) -> None:
    reasons = {
        f[b"entry_id"].decode(): f[b"reason"].decode()
        for _, f in suite.client.xrange(suite.keys.rejected(0))
    }  # fmt: skip
    assert suite.restamped not in reasons  # the same request (its request id): the same run
    assert reasons[suite.exact_replay].startswith("replayed: nonce ")
    assert suite.cli.runs() == [suite.legit]


def _redis7() -> str | None:
    for candidate in ("/usr/bin/redis-server", shutil.which("redis-server")):
        if candidate and os.path.exists(candidate):
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            found = re.search(r"v=(\d+)\.", out)
            if found and int(found.group(1)) >= 7:
                return candidate
    return None


def test_under_the_acl_users_a_publisher_cannot_write_another_publishers_stream(
    make_cli: Callable[[Path], Cli], tmp_path: Path
) -> None:
    binary = _redis7()
    if binary is None:
        pytest.skip("needs a redis-server 7 or later")
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        cli = make_cli(tmp_path)
        cli.env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not answers(cli.env["REDIS_URL"], timeout=0.2):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        billing = _add(cli, "billing-svc", "--principal", "alice@shop-1")
        _add(cli, "bobs", "--principal", "bob@shop-1")
        done = cli("acl", "--apply", "--json")
        assert done.returncode == 0, done.stderr
        prefix = cli.env["AGENTLEDGER_PREFIX"]
        as_billing = redis.Redis.from_url(
            json.loads(done.stdout)["users"][f"{prefix}-pub-billing-svc"]["url"]
        )
        keys = Keys(prefix, 16)
        cancel = RunCancelRequested(run_id="r-x", by="alice").model_dump_json().encode()
        entry = _signed("billing-svc", billing, cancel)
        for target in (keys.inbox(0, "bobs"), f"{prefix}:{{in0}}:inbox", keys.rejected(0)):
            with pytest.raises(redis.exceptions.NoPermissionError):
                as_billing.xadd(target, entry)
        as_billing.xadd(keys.inbox(0, "billing-svc"), entry)  # its own: allowed
    finally:
        server.terminate()
        server.wait(timeout=10)

"""Replays and grants at the intake against a real Redis (issue 31.4, 31.5): the
same signed bytes are taken once; a publisher that re-stamps a request gets the
same run through its request id; a message issued outside the window is refused;
request ids are a publisher's own; the nonce is kept under a digest for twice
the window; an entry handed over after its intake died is not a replay of
itself; a control's event records its publisher; a replay model reaches only a
run of the same tenant; a run id names only a shard the deployment has."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import redis
from itkit import QUEUE, scripted_spec
from test_intake_on_redis import pending, poll_until, rejected, request
from test_publishers_on_redis import file_, spec_for

from agentledger.events.types import RunCancelRequested, RunCreated
from agentledger.schemas.inbox import RunCancelRequested as CancelMessage
from agentledger.schemas.signature import entry as signed_entry
from agentledger.schemas.spec import ReplayModel, ReplaySettings
from agentledger.services.adapters.inbox.publishing import GROUP, publish, stamped
from agentledger.services.adapters.publishers.nonces import RedisNonces
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops.inbox_auth import nonce_partition
from agentledger.services.loops.intake import Intake
from agentledger.services.settings import Settings


def reasons(client: redis.Redis, keys: Keys) -> list[str]:
    return sorted(f[b"reason"].decode() for f in rejected(client, keys))


def xadd_signed(
    client: redis.Redis, keys: Keys, signer: Signer, message: bytes, part: int = 0
) -> str:
    """The entry of `message` as `publish` writes it, put into a partition by hand."""
    stream = keys.inbox(part, signer.name)  # the publisher's own stream of the partition
    entry_id = client.xadd(stream, signed_entry(signer.name, signer.key, message))  # type: ignore[arg-type]
    return f"{part}/{signer.name}/{entry_id.decode()}"


def test_the_same_signed_request_sent_four_times_makes_one_run_and_three_replayed_rejections(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    # no request id, and each copy in another partition: only the nonce tells them apart
    asked = request(app, "run-once", spec, workspace).model_copy(update={"request_id": None})
    signed = stamped(asked).model_dump_json().encode()
    for part in range(4):
        xadd_signed(client, keys, signer, signed, part)

    poll_until(intake, 4)

    assert [e.type for e in app.store.read("run-once")] == ["RunCreated"]
    found = reasons(client, keys)
    assert len(found) == 3 and all(r.startswith("replayed: nonce ") for r in found), found
    assert pending(client, keys) == 0


def test_a_request_stamped_again_after_a_lost_reply_gets_the_same_run_through_its_request_id(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    asked = request(app, "run-a", spec, workspace).model_copy(update={"request_id": "order-42"})
    publish(client, keys, asked, signer=signer)
    # the publisher never saw the reply: it publishes again, stamped anew, with no run id
    publish(client, keys, asked.model_copy(update={"run_id": None}), signer=signer)

    poll_until(intake, 2)

    assert rejected(client, keys) == []
    assert [e.type for e in app.store.read("run-a")] == ["RunCreated"]
    assert [k for k in client.scan_iter(match=f"{keys.prefix}:*run:*")] == [
        keys.run("run-a").encode()
    ]


def test_a_message_issued_outside_the_window_is_refused_and_creates_nothing(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    old = stamped(request(app, "run-old", spec, workspace)).model_copy(
        update={"issued_at": time.time() - 512}
    )
    xadd_signed(client, keys, signer, old.model_dump_json().encode())
    unstamped = request(app, "run-bare", spec, workspace)
    xadd_signed(client, keys, signer, unstamped.model_dump_json().encode())

    poll_until(intake, 2)

    assert reasons(client, keys) == [
        "replayed: issued_at is 512 s old; the window is 300 s",
        "replayed: the message has no issued_at and no nonce; sign it as `publish` does",
    ]
    assert app.runs.load("run-old") is None and app.runs.load("run-bare") is None


def test_the_same_request_id_from_two_publishers_names_two_runs(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    billing = file_(settings, "billing-svc", principals=["alice@shop-1"], queues=[QUEUE])
    squatter = file_(settings, "squatter", principals=["mallory@shop-2"], queues=[QUEUE])
    mallory = spec_for(tools_dir, id_="mallory", tenant="shop-2")
    unnamed = {"run_id": None, "request_id": "order-42"}
    publish(
        client,
        keys,
        request(app, "x", mallory, workspace).model_copy(update=unnamed),
        signer=squatter,
    )
    poll_until(intake, 1)
    publish(client, keys, request(app, "x", spec_for(tools_dir), workspace).model_copy(update=unnamed),
            signer=billing)  # fmt: skip
    poll_until(intake, 1)

    assert rejected(client, keys) == []
    created = [app.store.read(k.decode().rsplit(":", 1)[1])[0].data
               for k in client.scan_iter(match=f"{keys.prefix}:*run:*")]  # fmt: skip
    assert sorted((c.publisher, c.spec.principal.tenant) for c in created if isinstance(c, RunCreated)) == [
        ("billing-svc", "shop-1"), ("squatter", "shop-2"),
    ]  # fmt: skip


def test_a_nonce_is_kept_under_a_digest_for_twice_the_window(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    message = stamped(request(app, "run-n", spec, workspace))
    xadd_signed(client, keys, signer, message.model_dump_json().encode())
    poll_until(intake, 1)

    assert message.nonce is not None
    part = nonce_partition(signer.name, message.nonce, keys.inbox_partitions)
    key = keys.nonce(part, signer.name, message.nonce)
    [found] = [k.decode() for k in client.scan_iter(match=f"{keys.prefix}:*nonce:*")]
    assert found == key and message.nonce not in found
    assert 2 * 300_000 - 60_000 < client.pttl(key) <= 2 * 300_000


def test_an_entry_handed_over_after_its_intake_died_is_not_a_replay_of_itself(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    message = stamped(request(app, "run-h", spec, workspace))
    cause = xadd_signed(client, keys, signer, message.model_dump_json().encode())
    # another intake read it, took its nonce, and died before it acknowledged it
    stream = keys.inbox(0, signer.name)
    with contextlib.suppress(redis.ResponseError):  # BUSYGROUP: an intake made it already
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    client.xreadgroup(GROUP, "dead-intake", {stream: ">"}, count=10)
    assert message.nonce is not None
    part = nonce_partition(signer.name, message.nonce, keys.inbox_partitions)
    nonces = RedisNonces(client, keys)
    assert (
        nonces.claim(part, signer.name, message.nonce, entry=cause, now=time.time(), keep_s=600)
        is None
    )
    assert intake.poll_once(block_ms=10) == 0

    assert intake.reclaim_once(min_idle_ms=0) == 1

    assert rejected(client, keys) == [] and app.runs.load("run-h") is not None


def test_a_controls_event_records_the_publisher_that_signed_it(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    billing = file_(settings, "billing-svc", principals=["alice@shop-1"], queues=[QUEUE])
    publish(client, keys, request(app, "run-c", spec_for(tools_dir), workspace), signer=billing)
    poll_until(intake, 1)
    publish(
        client, keys, CancelMessage(run_id="run-c", by="alice", reason="enough"), signer=billing
    )
    poll_until(intake, 1)

    cancel = app.store.read("run-c")[1].data
    assert cancel == RunCancelRequested(
        by="alice", source="inbox", reason="enough", publisher="billing-svc"
    )


def test_a_replay_model_reaches_only_a_run_of_the_same_tenant(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    shop1 = file_(settings, "shop1-svc", principals=["*@shop-1"], queues=[QUEUE])
    shop2 = file_(settings, "shop2-svc", principals=["*@shop-2"], queues=[QUEUE])
    publish(client, keys, request(app, "run-shop1", spec_for(tools_dir), workspace), signer=shop1)
    poll_until(intake, 1)

    def replaying(run_id: str, tenant: str, recorded: str) -> Any:
        spec = spec_for(tools_dir, id_="carol", tenant=tenant).model_copy(
            update={"model": ReplayModel(replay=ReplaySettings(run_id=recorded))})  # fmt: skip
        return request(app, run_id, spec, workspace)

    publish(client, keys, replaying("run-theft", "shop-2", "run-shop1"), signer=shop2)
    publish(client, keys, replaying("run-ghost", "shop-2", "run-nowhere"), signer=shop2)
    publish(client, keys, replaying("run-again", "shop-1", "run-shop1"), signer=shop1)
    poll_until(intake, 3)

    assert reasons(client, keys) == [
        "not granted: 'shop2-svc' may not replay run 'run-nowhere': no run of tenant 'shop-2' has that id",
        "not granted: 'shop2-svc' may not replay run 'run-shop1': no run of tenant 'shop-2' has that id",
    ]
    assert app.runs.load("run-theft") is None and app.runs.load("run-again") is not None


def test_a_run_id_naming_a_shard_the_deployment_lacks_is_refused(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    publish(client, keys, request(app, "x.s9999", spec, workspace), signer=signer)
    publish(client, keys, request(app, "y.s15", spec, workspace), signer=signer)
    poll_until(intake, 2)

    assert reasons(client, keys) == [
        "invalid: run_id 'x.s9999' names shard 9999; this deployment has 16"
    ]
    assert app.runs.load("y.s15") is not None and keys.shard("y.s15") == 15
    # a deployment that has grown to more shards (recorded in its meta) reads them
    client.hset(keys.meta, "shards", 10_000)
    publish(client, keys, request(app, "x.s9999", spec, workspace), signer=signer)
    poll_until(intake, 1)
    assert app.runs.load("x.s9999") is not None

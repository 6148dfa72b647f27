"""One stream per publisher, on a real Redis: an entry's stream names its
publisher (a `publisher` field that says otherwise is rejected); what a
publisher does to its own stream — MAXLEN 0, an explicit maximal id, a flood of
huge fields — costs it alone, and a rejection keeps a bounded digest in a
capped stream. The embedded run's intake reads its own publisher's streams
only, in a membership of its own. A deployment intake reads only while its
publishers file is the deployment's: it records the digest at its first start,
refuses to start with another file (naming both), leaves entries pending while
its file differs and reads again once the file is adopted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import redis
from itkit import PUBLISHER, QUEUE, file_publisher, scripted_spec
from test_intake_on_redis import pending, poll_until, rejected, request

from agentledger.schemas.signature import entry as signed_entry
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers import agreed, publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.app import App
from agentledger.services.intake_role import build_intake
from agentledger.services.keys import Keys
from agentledger.services.loops import rejections
from agentledger.services.loops.intake import Intake
from agentledger.services.settings import Settings

MAX_ID = "18446744073709551615-18446744073709551615"


def signer_of(settings: Settings, name: str, **grant: object) -> Signer:
    file_publisher(Path(settings.publishers_path), name, **grant)  # type: ignore[arg-type]
    return publishers_file.signer(settings.publishers_path, name)


def ask(app: App, tools_dir: Path, workspace: Path, run_id: str) -> bytes:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    return request(app, run_id, spec, workspace).model_dump_json().encode()


def test_an_entry_signed_by_another_publisher_in_this_ones_stream_is_rejected(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    signer: Signer, tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    other = signer_of(settings, "other")
    fields = signed_entry(other.name, other.key, ask(app, tools_dir, workspace, "run-w"))
    client.xadd(keys.inbox(0, signer.name), fields)  # type: ignore[arg-type]
    poll_until(intake, 1)
    [moved] = rejected(client, keys)
    assert moved[b"reason"].decode() == (
        f"wrong stream: signed by 'other' but written to {signer.name!r}'s stream"
    )
    assert moved[b"publisher"] == signer.name.encode() and app.runs.load("run-w") is None


def test_maxlen_0_and_a_maximal_id_on_its_own_stream_hurt_no_other_publisher(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    signer: Signer, tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    wrecker = signer_of(settings, "wrecker")
    assert intake.poll_once(block_ms=10) == 0  # the intake reads both publishers' streams
    runs = [f"run-{i}" for i in range(8)]
    for run_id in runs:
        publish(client, keys, request(app, run_id, scripted_spec(
            [{"end_turn": "done"}], tools_dir=tools_dir), workspace), signer=signer)  # fmt: skip
        for part in range(keys.inbox_partitions):  # what dropped others' entries before
            client.xadd(keys.inbox(part, wrecker.name), {"m": "x"}, maxlen=0)  # type: ignore[arg-type]
    for part in range(keys.inbox_partitions):  # what made every later XADD fail for good
        client.xadd(keys.inbox(part, wrecker.name), {"m": "x"}, id=MAX_ID)  # type: ignore[arg-type]
    poll_until(intake, len(runs) + keys.inbox_partitions)
    assert all(app.runs.load(r) is not None for r in runs), "another publisher's requests all taken"
    with pytest.raises(redis.ResponseError):  # the wrecker's own stream takes no more
        client.xadd(keys.inbox(0, wrecker.name), {"message": "y"})  # type: ignore[arg-type]
    assert pending(client, keys) == 0


def test_a_flood_of_huge_fields_keeps_at_most_4_kB_a_rejection(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer
) -> None:
    big = b"z" * (256 << 10)
    flood = {f"f{i}": big for i in range(40)} | {"message": big, "publisher": signer.name}
    for _ in range(3):
        client.xadd(keys.inbox(1, signer.name), flood)  # type: ignore[arg-type]
    poll_until(intake, 3)
    moved = rejected(client, keys)
    assert len(moved) == 3
    for digest in moved:
        assert sum(len(k) + len(v) for k, v in digest.items()) <= rejections.MAX_BYTES
        assert len([k for k in digest if k.startswith(b"field:")]) <= rejections.MAX_FIELDS
        assert digest[b"fields"] == b"42" and digest[b"size:message"] == str(len(big)).encode()
    assert client.memory_usage(keys.rejected(1)) < 64 << 10  # type: ignore[operator]


def test_the_rejected_stream_is_capped_by_its_setting(
    app: App, client: redis.Redis, keys: Keys, signer: Signer
) -> None:
    settings = dataclasses.replace(app.settings, rejected_maxlen=20)
    small = dataclasses.replace(app, settings=settings)
    directory = Directory(client, keys, member_ttl_s=2.0)
    intake = Intake(small, client, keys, directory,
                    Membership(client, keys.intake_members(), "capped", ttl_s=2.0))  # fmt: skip
    for i in range(400):
        client.xadd(keys.inbox(2, signer.name), {"message": f"not json {i}"})
    poll_until(intake, 400)
    assert 20 <= client.xlen(keys.rejected(2)) <= 20 + 100  # MAXLEN ~: whole nodes of 100


def test_the_embedded_runs_intake_reads_only_its_own_publishers_streams(
    app: App, client: redis.Redis, keys: Keys, settings: Settings, signer: Signer,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    mine = signer_of(settings, "local-0123456789ab", queues=["*"])
    directory = Directory(client, keys, member_ttl_s=2.0)
    directory.register(QUEUE, app.toolset.fingerprint, app.toolset.manifest())
    members = Membership(client, keys.intake_members(mine.name), "embedded", ttl_s=2.0)
    embedded = Intake(app, client, keys, directory, members, only=mine.name)
    for i in range(keys.inbox_partitions * 2):  # every partition, both publishers
        publish(client, keys, request(app, f"mine-{i}", scripted_spec(
            [{"end_turn": "done"}], tools_dir=tools_dir), workspace), signer=mine)  # fmt: skip
        publish(client, keys, request(app, f"theirs-{i}", scripted_spec(
            [{"end_turn": "done"}], tools_dir=tools_dir), workspace), signer=signer)  # fmt: skip
    poll_until(embedded, keys.inbox_partitions * 2)
    assert all(app.runs.load(f"mine-{i}") for i in range(keys.inbox_partitions * 2))
    assert not any(app.runs.load(f"theirs-{i}") for i in range(keys.inbox_partitions * 2))
    assert pending(client, keys, (PUBLISHER,)) == keys.inbox_partitions * 2
    assert client.zcard(keys.intake_members()) == 0, "no deployment partition is owned"


def test_a_deployment_intake_records_its_file_and_refuses_another_naming_both(
    settings: Settings, client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    service = build_intake(settings, client, worker="first")
    digest = service.intake.registry.digest()
    assert agreed.recorded(client, keys) == digest
    other = tmp_path / "other.yaml"
    file_publisher(other, "someone-else")
    with pytest.raises(ConfigError) as refused:
        build_intake(settings.with_(publishers_file=str(other)), client, worker="second")
    said = str(refused.value)
    other_digest = publishers_file.file_digest(other.read_bytes())
    assert str(other) in said and other_digest in said and digest in said
    assert "agentledger publishers adopt" in said


def test_a_changed_file_leaves_entries_pending_until_it_is_adopted(
    settings: Settings, client: redis.Redis, keys: Keys, signer: Signer, tools_dir: Path,
    workspace: Path, app: App,
) -> None:  # fmt: skip
    directory = Directory(client, keys, member_ttl_s=2.0)
    directory.register(QUEUE, app.toolset.fingerprint, app.toolset.manifest())
    service = build_intake(settings, client, worker="deployment")
    intake = service.intake
    signer_of(settings, "newcomer")  # the file changes under the running intake
    publish(client, keys, request(app, "run-p", scripted_spec(
        [{"end_turn": "done"}], tools_dir=tools_dir), workspace), signer=signer)  # fmt: skip
    for _ in range(3):
        assert intake.poll_once(block_ms=20) == 0
    assert intake.held is not None and "not the deployment's" in intake.held
    assert pending(client, keys) == 1 and rejected(client, keys) == []

    agreed.adopt(client, keys, intake.registry.digest())  # the operator adopts the new file
    poll_until(intake, 1)
    assert intake.held is None and app.runs.load("run-p") is not None


def test_the_embedded_runs_intake_neither_records_nor_checks_the_digest(
    settings: Settings, client: redis.Redis, keys: Keys
) -> None:
    agreed.adopt(client, keys, "0" * 64)  # a deployment agreed to another file
    service = build_intake(settings, client, only="local-0123456789ab", worker="embedded")
    assert service.intake.poll_once(block_ms=10) == 0 and service.intake.held is None
    assert agreed.recorded(client, keys) == "0" * 64


def test_a_deployment_intake_refuses_to_start_with_a_broken_file(
    settings: Settings, client: redis.Redis, keys: Keys
) -> None:
    Path(settings.publishers_path).write_text("publishers: {p: {key: 12}}\n")
    with pytest.raises(ConfigError) as refused:
        build_intake(settings, client, worker="broken")
    assert str(refused.value).startswith("AGENTLEDGER_PUBLISHERS: ")
    assert agreed.recorded(client, keys) is None  # nothing recorded of a broken file

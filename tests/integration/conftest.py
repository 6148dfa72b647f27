"""Fixtures of the integration tests. They talk to a real redis-server: the
machine's shared one at 127.0.0.1:6379 (never flushed, never stopped), or a
private one started on a free port when none answers there. Every test gets
its own key prefix, whose keys are deleted (SCAN + DEL) afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from itkit import PUBLISHER, QUEUE, TOOL_MODULE, delete_prefix, file_publisher, write_tool_module

from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.local_server import answers, start_server
from agentledger.services.adapters.tools.toolset import ToolSet, load_toolset
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import Intake
from agentledger.services.settings import Settings

SHARED_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if answers(SHARED_URL):
        yield SHARED_URL
        return
    server = start_server(tmp_path_factory.mktemp("redis"))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    p = f"t-{uuid.uuid4().hex[:12]}"
    yield p
    delete_prefix(client, p)


@pytest.fixture
def settings(redis_url: str, prefix: str, tmp_path: Path) -> Settings:
    # the test's own publishers file (never the user's), with one publisher granted everything
    publishers = tmp_path / "publishers.yaml"
    file_publisher(publishers)
    # and a state folder of its own: the intake copies workspaces into it
    return Settings(
        redis_url=redis_url, prefix=prefix, publishers_file=str(publishers),
        state_dir=str(tmp_path / "state"),
    )  # fmt: skip


@pytest.fixture
def signer(settings: Settings) -> Signer:
    """Signs as the test publisher (granted every principal, scope and queue)."""
    return publishers_file.signer(settings.publishers_path, PUBLISHER)


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return Keys(settings.prefix, settings.shards)


@pytest.fixture(scope="session")
def tools_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tools")
    write_tool_module(folder)
    return folder


@pytest.fixture(scope="session")
def toolset(tools_dir: Path) -> ToolSet:
    return load_toolset([TOOL_MODULE], [str(tools_dir)])


@pytest.fixture
def app(settings: Settings, client: redis.Redis, toolset: ToolSet) -> App:
    return build_app(settings, client, toolset)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def intake(app: App, client: redis.Redis, keys: Keys) -> Intake:
    """An intake on the test's prefix; the test queue's tool set registered."""
    directory = Directory(client, keys, member_ttl_s=2.0)
    directory.register(QUEUE, app.toolset.fingerprint, app.toolset.manifest())
    membership = Membership(client, keys.intake_members(), app.worker, ttl_s=2.0)
    return Intake(app, client, keys, directory, membership)

"""Fixtures of the end-to-end tests. Each test runs the CLI in its own empty
folder (so `.agentledger/` lands there) with its own key prefix, all under one
prefix per test session whose keys are deleted at the end. The CLI finds its
Redis as it would for a user: REDIS_URL, else 127.0.0.1:6379 when it answers
(shared: never flushed), else a private server under the test's folder."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, clean_environ, delete_prefix

from services.adapters.redis.local_server import DEFAULT_URL, answers

SESSION_PREFIX = f"e2e-{uuid.uuid4().hex[:12]}"
_numbers = itertools.count(1)


@pytest.fixture(scope="session", autouse=True)
def _delete_session_keys() -> Iterator[None]:
    yield
    url = os.environ.get("REDIS_URL") or DEFAULT_URL
    if answers(url, timeout=5.0):  # private servers died with their commands, keys and all
        delete_prefix(url, f"{SESSION_PREFIX}-*")


@pytest.fixture(scope="session")
def make_cli() -> Callable[[Path], Cli]:
    """A CLI working in `folder` under a key prefix no other test uses."""

    def make(folder: Path) -> Cli:
        return Cli(cwd=folder, env=clean_environ(f"{SESSION_PREFIX}-{next(_numbers)}"))

    return make


@pytest.fixture
def cli(tmp_path: Path, make_cli: Callable[[Path], Cli]) -> Cli:
    return make_cli(tmp_path)

"""Fixtures of the end-to-end tests. Each test runs the CLI in its own empty
folder, with a state folder of its own (`<folder>/state`) and its own key
prefix, all under one prefix per test session whose keys are deleted at the
end. The CLI finds its Redis as it would for a user: REDIS_URL, else the probe
address the suite sets (AGENTLEDGER_PROBE_URL=127.0.0.1:6379, shared: never
flushed) when it answers, else the local Redis service of the test's state
folder, stopped when the test (or, for a module's CLI, the session) is over."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, clean_environ, delete_prefix

from agentledger.services.adapters.redis.local_server import DEFAULT_URL, answers

SESSION_PREFIX = f"e2e-{uuid.uuid4().hex[:12]}"
_numbers = itertools.count(1)


@pytest.fixture(scope="session", autouse=True)
def _delete_session_keys() -> Iterator[None]:
    yield
    url = os.environ.get("REDIS_URL") or DEFAULT_URL
    if answers(url, timeout=5.0):  # private servers died with their commands, keys and all
        delete_prefix(url, f"{SESSION_PREFIX}-*")


@pytest.fixture(scope="session")
def make_cli() -> Iterator[Callable[[Path], Cli]]:
    """A CLI working in `folder` under a key prefix no other test uses."""
    made: list[Cli] = []

    def make(folder: Path) -> Cli:
        prefix = f"{SESSION_PREFIX}-{next(_numbers)}"
        made.append(Cli(cwd=folder, env=clean_environ(prefix, folder / "state")))
        return made[-1]

    yield make
    for cli in made:
        cli.stop_local_service()


@pytest.fixture
def cli(tmp_path: Path, make_cli: Callable[[Path], Cli]) -> Iterator[Cli]:
    made = make_cli(tmp_path)
    yield made
    made.stop_local_service()

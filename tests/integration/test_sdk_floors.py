"""The anthropic SDK releases pyproject.toml allows, at both ends: the adapter's
tests (every stop reason, streaming, thinking, refusals with `stop_details`,
server tools, citations, each error kind, against the local stand-in) pass with
the floor the pin names and with the newest release below its upper bound.

Each runs in a fresh venv of its own (a `--system-site-packages` one would let
the installed SDK and its httpx2 stand in for the pinned ones), with only what
those tests import; the venvs are kept under .agentledger/sdk-floors and made
again only when missing. Measured here (2 cores, busy): ~100 s for both ends the
first time, ~40 s after. Too slow for every `make test`: it runs when
AGENTLEDGER_TEST_FLOORS=1, as `make test-floors` (which `.ci/run` runs) sets it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / ".agentledger" / "sdk-floors"
ADAPTER_TESTS = (
    "tests/integration/test_anthropic_adapter.py",
    "tests/integration/test_anthropic_transcripts.py",
)
# what those tests import, besides the SDK (the newest of each)
BESIDE = (
    "pytest", "redis[hiredis]", "dramatiq", "msgpack", "pydantic", "PyYAML", "google-re2",
    "psutil", "opentelemetry-api",
)  # fmt: skip
PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")


def pinned() -> tuple[str, str]:
    """The floor and the upper bound of the anthropic requirement in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [requirement] = [d for d in project["dependencies"] if re.match(r"anthropic\s*[><=]", d)]
    floor = re.search(r">=\s*([0-9][0-9.]*)", requirement)
    below = re.search(r"<\s*([0-9][0-9.]*)", requirement)
    assert floor and below, f"{requirement!r}: the pin needs a floor and an upper bound"
    return floor.group(1), below.group(1)


def venv_with(name: str, requirement: str, *, upgrade: bool) -> Path:
    """A venv of its own holding `requirement` and BESIDE; its python."""
    folder = KEPT / name
    python = folder / "bin" / "python"
    ready = folder / "ready"
    if not ready.exists():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
        subprocess.run([str(python), *PIP, requirement, *BESIDE], check=True, timeout=900)
        ready.write_text(requirement)
    elif upgrade:  # a release newer than the kept one may have come out
        subprocess.run([str(python), *PIP, "--upgrade", requirement], check=True, timeout=900)
    return python


def version_in(python: Path) -> str:
    said = subprocess.run(
        [str(python), "-c", "import anthropic; print(anthropic.__version__)"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return said.stdout.strip()


def release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def adapter_tests_with(python: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / ".pkg"), str(ROOT)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *ADAPTER_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("AGENTLEDGER_TEST_FLOORS") != "1",
    reason="builds venvs (~100 s the first time): `make test-floors` runs it, and CI does",
)
@pytest.mark.parametrize("end", ["floor", "newest"])
def test_the_adapters_tests_pass_with_the_sdk_at_each_end_of_the_pin(end: str) -> None:
    floor, below = pinned()
    if end == "floor":
        python = venv_with(f"anthropic-{floor}", f"anthropic=={floor}", upgrade=False)
        assert release(version_in(python)) == release(floor) + (0,) * (3 - len(release(floor)))
    else:
        python = venv_with(f"anthropic-below-{below}", f"anthropic>={floor},<{below}", upgrade=True)
        assert release(floor) <= release(version_in(python)) < release(below)
    done = adapter_tests_with(python)
    assert done.returncode == 0, f"anthropic {version_in(python)}:\n{done.stdout[-4000:]}"
    assert re.search(r"\b\d+ passed\b", done.stdout) and " failed" not in done.stdout

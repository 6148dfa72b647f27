"""Every shell example of README.md and docs/ runs, and prints what the page shows.

Each page's ```sh and ```console blocks run in order, as a reader would type
them, in a folder of the page's own (a copy of `examples/`, a state folder and a
key prefix of its own, `agentledger` this checkout's code), against REDIS_URL,
else the shared 127.0.0.1:6379, else a private redis-server; a console block's
output is compared with what the command printed, volatile parts normalised
(tests/docs/normalise.py). Blocks that cannot run here are marked `<!-- not run:
why -->`; they are counted and listed. `make docs` writes what was printed in
place of a sample that no longer matches."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.docs.blocks import blocks_of, documents
from tests.docs.cleanup import delete_prefix
from tests.docs.reference import ROOT
from tests.docs.session import DocSession, redis_url_for_docs, run_document

PREFIX = f"e2e-docs-{uuid.uuid4().hex[:12]}"
RUNNABLE = [d for d in documents() if any(b.not_run is None for b in blocks_of(d))]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_every_shell_example_of_a_page_prints_what_the_page_shows(
    page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, server = redis_url_for_docs(tmp_path)
    session = DocSession(tmp_path, url, prefix=f"{PREFIX}-{RUNNABLE.index(page)}")
    try:
        report = run_document(page, session)
    finally:
        delete_prefix(url, session.prefix)
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
    with capsys.disabled():
        print(
            f"\n{_name(page)}: {report.ran} shell blocks run ({report.commands} commands), "
            f"{len(report.skipped)} not run"
        )
    assert report.ran > 0
    assert not report.problems, (
        "\n\n".join(report.problems)
        + "\n\n`make docs` writes what was printed in place of the samples"
    )


def test_every_shell_block_is_run_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    ran, skipped = 0, []
    for page in documents():
        for block in blocks_of(page):
            if block.lang == "file":
                continue
            if block.not_run is None:
                ran += 1
            else:
                skipped.append(f"{block.where}: {block.not_run}")
    with capsys.disabled():
        print(f"\nshell blocks of README.md and docs/: {ran} run, {len(skipped)} not run:")
        for line in skipped:
            print(f"  {line}")
    assert ran >= 25, "the examples the pages show are run"
    assert all(why.split(": ", 1)[1].strip() for why in skipped)
    assert len(skipped) <= 8, (
        "a block not run is the exception: a cluster, an API key, the suite itself"
    )

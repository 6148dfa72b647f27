"""`make docs` (`python -m tests.docs`): write the reference pages from the code,
then run every shell example of README.md and docs/ and put what the commands
printed in place of every sample output that no longer matches.

    python -m tests.docs               # write (the reference, then the samples)
    python -m tests.docs --check       # write nothing; exit 1 if anything is stale
    python -m tests.docs --list        # count the shell blocks: run, and not run with why
    python -m tests.docs README.md     # only these documents' examples
    python -m tests.docs --reference   # only the reference pages
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.docs import reference
from tests.docs.blocks import blocks_of, documents, shown_path
from tests.docs.cleanup import delete_prefix
from tests.docs.session import DocSession, Report, redis_url_for_docs, run_document


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.docs", description=__doc__.split("\n\n")[0])
    p.add_argument("documents", nargs="*", type=Path, help="only these (default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when stale")
    p.add_argument("--list", action="store_true", help="count the blocks; run nothing")
    p.add_argument("--reference", action="store_true", help="only the reference pages")
    p.add_argument("--jobs", type=int, default=2, help="documents run at once (default 2)")
    args = p.parse_args(argv)
    if args.list:
        return list_blocks()
    failed = False
    if not args.documents:
        if args.check:
            stale = reference.stale()
            for name in stale:
                print(f"docs/reference/{name} is stale: `make docs` writes it")
            failed |= bool(stale)
        else:
            for name in reference.write():
                print(f"wrote docs/reference/{name}")
    if args.reference:
        return int(failed)
    paths = [d.resolve() for d in args.documents] or documents()
    runnable = [d for d in paths if any(b.not_run is None for b in blocks_of(d))]
    with tempfile.TemporaryDirectory(prefix="agentledger-docs-") as tmp:
        url, server = redis_url_for_docs(Path(tmp))
        try:
            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                reports = list(pool.map(lambda d: _run(d, Path(tmp), url), runnable))
        finally:
            if server is not None:
                server.stop()  # type: ignore[attr-defined]
    for report in reports:
        stale = _say(report, write=not args.check)
        failed |= stale if args.check else bool(report.unfixable)
    ran = sum(r.ran for r in reports)
    print(f"shell blocks: {ran} run ({sum(r.commands for r in reports)} commands) "
          f"in {len(reports)} documents")  # fmt: skip
    return int(failed)


def _run(path: Path, tmp: Path, url: str) -> Report:
    workdir = Path(tempfile.mkdtemp(prefix=path.stem + "-", dir=tmp))
    session = DocSession(workdir, url)
    try:
        return run_document(path, session)
    finally:
        delete_prefix(url, session.prefix)


def _say(report: Report, *, write: bool) -> bool:
    name = shown_path(report.path)
    print(
        f"{name}: {report.ran} blocks run ({report.commands} commands), {len(report.skipped)} not run"
    )
    for problem in report.problems:
        print("  " + problem.replace("\n", "\n    "))
    if report.refreshed is not None and write:
        report.path.write_text(report.refreshed)
        print(f"  wrote {name} with the printed outputs: read the diff before committing")
    return bool(report.problems)


def list_blocks() -> int:
    ran, skipped = 0, []
    for path in documents():
        for block in blocks_of(path):
            if block.lang == "file":
                continue
            if block.not_run is None:
                ran += 1
            else:
                skipped.append((block.where, block.not_run))
    print(f"shell blocks: {ran + len(skipped)}; run by the tests: {ran}; not run: {len(skipped)}")
    for where, why in skipped:
        print(f"  {where}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

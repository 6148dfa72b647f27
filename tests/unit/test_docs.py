"""The documentation's machinery, without running anything: the reference pages
are what the code makes, every setting and event says what it is, shell blocks
are found and parsed as a reader reads them, volatile parts of an output are
normalised (and nothing else), and every link between the pages leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentledger.events.types import EVENT_TYPES
from agentledger.services.settings_env import ENV, ENV_HELP
from tests.docs import reference
from tests.docs.blocks import blocks_of, documents, plain_blocks_showing_commands
from tests.docs.normalise import matches, normalise_line
from tests.docs.reference import ROOT


def test_the_reference_pages_are_what_the_code_makes() -> None:
    stale = reference.stale()
    assert stale == [], f"docs/reference/{stale} differ from the code: `make docs` writes them"


def test_every_setting_has_a_line_saying_what_it_sets() -> None:
    assert set(ENV) - set(ENV_HELP) == set(), (
        "add a line to agentledger.services.settings_env.ENV_HELP"
    )
    assert set(ENV_HELP) - set(ENV) == set(), "ENV_HELP describes a variable ENV does not read"
    assert all(text.strip() for text in ENV_HELP.values())


def test_every_event_has_a_docstring_for_the_reference() -> None:
    assert [name for name, cls in EVENT_TYPES.items() if not (cls.__doc__ or "").strip()] == []


def test_the_cli_reference_names_every_command_of_the_parser() -> None:
    from agentledger.services.entrypoints.cli.parser import parser

    page = reference.cli_page()
    for name in reference._subcommands(parser()):
        assert f"## `agentledger {name[0]}`" in page


def test_the_exit_code_reference_has_every_code_and_run_state() -> None:
    from agentledger.services.entrypoints.cli import exit_codes

    page = reference.exit_codes_page()
    for code in (
        *exit_codes.BY_STATUS.values(),
        exit_codes.USAGE,
        exit_codes.BUG,
        exit_codes.NO_REDIS,
    ):
        assert f"| `{code}` |" in page
    assert "| `6` | `awaiting_human` |" in page


def test_a_console_block_is_commands_each_followed_by_what_it_prints(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "text\n\n```console\n$ agentledger runs\nr-1 done\n\n$ echo a \\\n  b\na b\n```\n"
    )
    [block] = blocks_of(doc)
    assert block.lang == "console" and block.not_run is None
    assert [c.text for c in block.commands] == ["agentledger runs", "echo a \\\n  b"]
    assert [c.expected for c in block.commands] == [["r-1 done"], ["a b"]]
    assert block.commands[0].line == 4


def test_a_sh_block_is_commands_with_comments_left_out_and_background_ones_known(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("```sh\n# start them\nagentledger intake &\nmake run   # runs it\n```\n")
    [block] = blocks_of(doc)
    assert [(c.text, c.background) for c in block.commands] == [
        ("agentledger intake &", True),
        ("make run   # runs it", False),
    ]


def test_a_block_marked_not_run_says_why_and_other_languages_are_not_shell(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "<!-- not run: needs a cluster -->\n```sh\nkubectl apply -f x\n```\n\n"
        "```yaml\na: 1\n```\n\n<!-- file: hello/a.py -->\n```python\nx = 1\n```\n"
    )
    shell, written = blocks_of(doc)
    assert (shell.lang, shell.not_run) == ("sh", "needs a cluster")
    assert (written.lang, written.file, written.body) == ("file", "hello/a.py", ["x = 1"])


def test_a_console_block_must_start_with_a_command(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("```console\noutput first\n$ ls\n```\n")
    with pytest.raises(ValueError, match="starts with a `\\$ ` command"):
        blocks_of(doc)


def test_no_document_hides_a_shell_example_in_a_block_the_tests_do_not_run() -> None:
    hidden = {
        str(path.relative_to(ROOT)): lines
        for path in documents()
        if (lines := plain_blocks_showing_commands(path))
    }
    assert hidden == {}, "a ``` block starting with `$ ` is a shell example: mark it console"


def test_volatile_parts_of_a_timeline_line_are_normalised() -> None:
    a = "   8  03:44:58.109  tools    ToolCallSucceeded        c17 in 0.8 ms -> {'sku': 'A1'}"
    b = "  8  21:39:27.109  tools  ToolCallSucceeded  c17 in 12.5 ms -> {'sku': 'A1'}"
    assert normalise_line(a) == normalise_line(b)
    run_a = "run r-1a24974724d637f1e44.s6: completed on vm:20796:bf4940 stock:A1#1796528698107680"
    run_b = "run r-1a25b74f0a7e5c1d2e3.s12: completed on host-2:7:00aa11 stock:A1#1796593167108007"
    assert normalise_line(run_a) == normalise_line(run_b)


def test_what_a_run_did_is_not_normalised_away() -> None:
    """The check can fail: another status, call, tool, count or text is a difference."""
    shown = ["run r-1a24974724d637f1e44.s6: completed  2 acceptance checks passed"]
    for other in (
        "run r-1a24974724d637f1e44.s6: failed  2 acceptance checks passed",
        "run r-1a24974724d637f1e44.s6: completed  1 acceptance check passed",
    ):
        assert not matches(shown, [other])
    assert not matches(["c17 lookup_stock(sku='A1')"], ["c18 lookup_stock(sku='A1')"])
    assert not matches(["a", "b"], ["a"])


def test_an_ellipsis_line_stands_for_any_lines_and_inside_a_line_for_any_text() -> None:
    assert matches(["first", "...", "last"], ["first", "x", "y", "last"])
    assert matches(["first", "...", "last"], ["first", "last"])
    assert matches(["key: ..."], ["key: 3f9c"])
    assert not matches(["first", "...", "last"], ["first", "x"])


def test_a_child_runs_id_and_a_line_cut_to_a_width_match_whatever_their_shard() -> None:
    """A child's id is its flow's with the stage and attempt (`<run>.fix.1`); a timeline
    line is cut to a width, so where the cut falls moves with the ids' raw length."""
    shown = ["1 12:00:00.1 flow ChildRunEnded fix completed (r-1a24c08ae2c327516cd.fix.1.s15 "
             "completed) 0+0 tokens {\"passed\": true, …"]  # fmt: skip
    cut_later = [shown[0].replace(".s15", ".s5").replace("true, …", "true,…")]
    assert matches(shown, cut_later) and matches(cut_later, shown)
    assert not matches(shown, [shown[0].replace("fix.1", "fix.2")])
    assert not matches(shown, [shown[0].replace("completed)", "failed)")])


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page (code blocks left out)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {reference.slug(m[1]) for m in re.finditer(r"(?m)^#{1,6} (.+)$", text)}


def test_every_link_between_the_pages_leads_to_a_file_and_heading_that_exist() -> None:
    broken = []
    for page in documents():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_teaches_in_at_most_300_lines() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for must in ("make run", "make test", "## A first run, explained", "## A first tool of your own",
                 "## Changed in this release", "docs/"):  # fmt: skip
        assert must in readme


def test_events_that_depend_on_scheduling_are_left_out_of_a_timeline_with_the_seqs_they_shift() -> (
    None
):
    shown = [
        "   5  03:53:38.091  tools    ToolCallScheduled        p1 locks granted",
        "   6  03:53:38.092  tools    ToolCallStarted          p1 attempt 1 on vm:1:abcdef",
        "run r-1a2497c62200d546aca.s1: completed  (seq 6, 1 turns)",
    ]
    printed = [
        "   5  03:53:38.091  tools    ToolCallWaiting          p1 waits for stock:A1",
        "   6  03:53:38.091  tools    ToolCallScheduled        p1 locks granted",
        "   7  03:53:38.092  tools    ToolCallStarted          p1 attempt 1 on vm:1:abcdef",
        "run r-1a2497c62200d546aca.s1: completed  (seq 7, 1 turns)",
    ]
    assert matches(shown, printed)
    assert matches(["  2  03:53:38.091  model  ModelRequested  turn 1 (attempt 1)"],
                   ["  2  03:53:38.091  model  ModelRequested  turn 1 (attempt 1)",
                    "  3  03:53:39.091  model  ModelRequested  turn 1 (attempt 2)"])  # fmt: skip
    assert not matches(["  2  03:53:38.091  model  ModelRequested  turn 1 (attempt 1)"],
                       ["  2  03:53:38.091  model  ModelRequested  turn 2 (attempt 1)"])  # fmt: skip


def test_a_log_line_may_fall_anywhere_among_the_stdout_lines_but_must_be_there() -> None:
    """stderr's log lines and stdout's interleave as timing decides: a sample matches
    wherever its log lines fell, never without them, and the others keep their order."""
    log = "WARNING agentledger.services.handlers.model: run r turn 2: model request failed"
    shown = ["a 1", log, "b 2", "c 3"]
    assert matches(shown, ["a 1", "b 2", "c 3", log])
    assert matches(shown, [log, "a 1", "b 2", "c 3"])
    assert not matches(shown, ["a 1", "b 2", "c 3"])
    assert not matches(shown, ["b 2", log, "a 1", "c 3"])
    assert not matches(shown, ["a 1", log, log, "b 2", "c 3"])
    # written between a stdout line's text and its newline (print writes them apart)
    assert matches(shown, ["a 1", "b 2" + log, "", "c 3"])
    assert not matches(shown, ["a 1", "b 2" + log, "", "", "c 3"])  # a blank line of its own stays

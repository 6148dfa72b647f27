"""Workspace files: every path that could lead outside the workspace, or that
hides what it names, is refused with a coded error before anything is read or
written; protected names hold whatever their case; writes are capped and atomic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runlog import T0, Log, do_model_turn, make_spec, use

from agentledger.events.types import ToolCallRejected, ToolCallValidated
from agentledger.events.validation_step import validate_turn
from agentledger.services.adapters.tools.context import ToolFailure
from agentledger.services.adapters.tools.toolset import load_toolset
from agentledger.services.adapters.tools.workspace_files import (
    WorkspaceFiles,
    clean_relative,
    file_resource,
)
from agentledger.services.handlers.findings import findings


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("x = 1\n")
    (root / "test_calc.py").write_text("assert True\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("y = 2\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root


@pytest.fixture
def files(ws: Path) -> WorkspaceFiles:
    return WorkspaceFiles(
        ws, protected=("test_*.py", "conftest.py", "__pycache__"), max_write_bytes=1000
    )


def code_of(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolFailure) as caught:
        fn(*args)
    return caught.value.code


REFUSED = [
    ("", "invalid_arguments"),
    ("   ", "invalid_arguments"),
    (".", "invalid_arguments"),
    ("./", "invalid_arguments"),
    ("/etc/passwd", "permission_denied"),
    ("//etc/passwd", "permission_denied"),
    ("~/.ssh/id_rsa", "permission_denied"),
    ("../outside.txt", "permission_denied"),
    ("pkg/../../outside.txt", "permission_denied"),
    ("pkg/../calc.py", "permission_denied"),  # any '..' is refused, even one that stays inside
    ("..", "permission_denied"),
    ("calc.py\x00.txt", "invalid_arguments"),
    ("calc\n.py", "invalid_arguments"),
    ("calc\t.py", "invalid_arguments"),
    ("calc\r.py", "invalid_arguments"),
    ("\x1b[31mcalc.py", "invalid_arguments"),
    ("calc\u200b.py", "invalid_arguments"),  # zero-width space
    ("\u202eyp.clac", "invalid_arguments"),  # right-to-left override
    ("calc\ufeff.py", "invalid_arguments"),  # byte order mark
    ("calc\u2028.py", "invalid_arguments"),  # line separator
    ("\uff0e\uff0e/outside.txt", "invalid_arguments"),  # fullwidth dots
    ("..\uff0foutside.txt", "invalid_arguments"),  # fullwidth solidus
    ("\u2024\u2024/outside.txt", "invalid_arguments"),  # one-dot leaders
    ("pkg\u2215mod.py", "invalid_arguments"),  # division slash is NFKC-stable but…
    ("ca\u0301lc.py", "invalid_arguments"),  # a decomposed accent
    ("\ufb01le.py", "invalid_arguments"),  # the fi ligature
    ("calc\udcff.py", "invalid_arguments"),  # a lone surrogate
    ("calc\ue000.py", "invalid_arguments"),  # private use
    ("..\\outside.txt", "invalid_arguments"),
    ("calc.py ", "invalid_arguments"),
    (" calc.py", "invalid_arguments"),
    ("a" * 300, "invalid_arguments"),
    ("a/" * 600, "invalid_arguments"),
    ("calc\u00a0.py", "invalid_arguments"),  # no-break space
]


@pytest.mark.parametrize(("raw", "code"), REFUSED)
def test_a_path_that_escapes_or_hides_what_it_names_is_refused_with_its_code(
    files: WorkspaceFiles, raw: str, code: str
) -> None:
    if raw == "pkg\u2215mod.py":
        # U+2215 survives NFKC; it is still one file name, not a folder: not found
        assert code_of(files.read_text, raw) == "not_found"
        return
    assert code_of(files.read_text, raw) == code
    assert code_of(files.write_text, raw, "x") == code


def test_a_symlink_out_of_the_workspace_is_refused_for_reading_and_writing(
    files: WorkspaceFiles, ws: Path
) -> None:
    (ws / "out.txt").symlink_to(ws.parent / "outside.txt")
    (ws / "etc").symlink_to("/etc")
    (ws / "dangling").symlink_to(ws.parent / "new-file.txt")
    assert code_of(files.read_text, "out.txt") == "permission_denied"
    assert code_of(files.write_text, "out.txt", "pwned") == "permission_denied"
    assert code_of(files.read_text, "etc/passwd") == "permission_denied"
    assert code_of(files.write_text, "dangling", "pwned") == "permission_denied"
    assert (ws.parent / "outside.txt").read_text() == "secret\n"
    assert not (ws.parent / "new-file.txt").exists()


def test_a_symlink_loop_is_refused(files: WorkspaceFiles, ws: Path) -> None:
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    assert code_of(files.read_text, "a") == "permission_denied"


def test_a_symlink_inside_the_workspace_is_followed_and_the_write_lands_on_its_target(
    files: WorkspaceFiles, ws: Path
) -> None:
    (ws / "alias.py").symlink_to("calc.py")
    assert files.read_text("alias.py").path == "calc.py"
    assert files.write_text("alias.py", "x = 2\n").path == "calc.py"
    assert (ws / "calc.py").read_text() == "x = 2\n"
    assert (ws / "alias.py").is_symlink()


def test_a_symlink_to_a_protected_file_is_protected(files: WorkspaceFiles, ws: Path) -> None:
    (ws / "helper.py").symlink_to("test_calc.py")
    assert code_of(files.write_text, "helper.py", "assert True") == "permission_denied"


@pytest.mark.parametrize(
    "raw",
    [
        "test_calc.py",
        "TEST_CALC.PY",
        "Test_Calc.Py",
        "pkg/test_new.py",
        "CONFTEST.py",
        "__PYCACHE__/x.pyc",
        "./test_calc.py",
    ],
)
def test_protected_names_hold_whatever_their_case_and_depth(
    files: WorkspaceFiles, raw: str
) -> None:
    assert code_of(files.write_text, raw, "assert True") == "permission_denied"


def test_protected_names_may_still_be_read(files: WorkspaceFiles) -> None:
    assert files.read_text("test_calc.py").text == "assert True\n"


def test_a_write_over_the_cap_is_refused_and_writes_nothing(
    files: WorkspaceFiles, ws: Path
) -> None:
    with pytest.raises(ToolFailure) as caught:
        files.write_text("big.txt", "x" * 1001)
    assert caught.value.code == "invalid_arguments"
    assert "1,001 bytes" in caught.value.message
    assert not (ws / "big.txt").exists()
    assert files.write_text("big.txt", "é" * 500).bytes == 1000  # the cap counts bytes


def test_a_write_is_atomic_keeps_the_mode_and_leaves_no_temporary_file(
    files: WorkspaceFiles, ws: Path
) -> None:
    os.chmod(ws / "calc.py", 0o755)
    written = files.write_text("calc.py", "x = 3\n")
    assert written.path == "calc.py" and written.bytes == 6
    assert (ws / "calc.py").stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in ws.iterdir()) == ["calc.py", "pkg", "test_calc.py"]


def test_a_write_makes_missing_folders_inside_the_workspace(
    files: WorkspaceFiles, ws: Path
) -> None:
    files.write_text("new/deeper/notes.txt", "hi")
    assert (ws / "new" / "deeper" / "notes.txt").read_text() == "hi"


def test_a_folder_a_fifo_and_a_hard_link_are_not_files(files: WorkspaceFiles, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    os.link(ws / "calc.py", ws / "twin.py")
    assert code_of(files.read_text, "pkg") == "invalid_arguments"
    assert code_of(files.write_text, "pkg", "x") == "invalid_arguments"
    assert code_of(files.read_text, "pipe") == "permission_denied"  # and it did not block
    assert code_of(files.read_text, "twin.py") == "permission_denied"
    assert code_of(files.write_text, "twin.py", "x") == "permission_denied"


def test_a_missing_file_is_not_found(files: WorkspaceFiles) -> None:
    assert code_of(files.read_text, "nope.py") == "not_found"
    assert code_of(files.read_text, "nope/nope.py") == "not_found"


def test_a_read_is_capped_and_says_so(ws: Path) -> None:
    (ws / "long.txt").write_text("é" * 100)
    read = WorkspaceFiles(ws, max_read_bytes=51).read_text("long.txt")
    assert read.truncated and read.text == "é" * 25  # a character cut at the cap is left out
    (ws / "bin.dat").write_bytes(b"\xff\xfe" * 10)
    assert code_of(WorkspaceFiles(ws).read_text, "bin.dat") == "invalid_arguments"


def test_clean_relative_keeps_plain_unicode_names() -> None:
    assert str(clean_relative("docs/Résumé.md")) == "docs/Résumé.md"
    assert str(clean_relative("./pkg//mod.py")) == "pkg/mod.py"


def test_a_file_resource_is_the_same_on_hosts_that_mount_the_workspace_elsewhere() -> None:
    here, there = "/srv/a/shared/ws", "/mnt/nfs/ws"
    assert (
        file_resource("notes.txt", here)
        == file_resource("./notes.txt", there)
        == "file:ws/notes.txt"
    )
    assert file_resource("src/../calc.py", "/state/workspaces/r-1a2.s3") == "file:r-1a2.s3/calc.py"
    assert file_resource(".", here) == file_resource("./", there) == "file:ws/"  # the whole of it
    assert file_resource("a.txt", "/w/r-1") != file_resource("a.txt", "/w/r-2")


@pytest.mark.parametrize(
    "path",
    ["../../etc/passwd", "/etc/passwd", "//etc", "~/.ssh/id_rsa", "..", "a/../../x", "./../x"],
)
def test_a_path_that_leaves_the_workspace_names_no_file_in_it(path: str) -> None:
    with pytest.raises(ToolFailure) as refused:
        file_resource(path, "/srv/a/shared/ws")
    assert refused.value.code == "permission_denied"
    assert refused.value.message.startswith(f"path {ascii(path)} leads outside the workspace")


def test_a_read_may_replace_what_is_not_utf8_instead_of_refusing_it(ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"ok \xff\xfe end")
    assert WorkspaceFiles(ws).read_text("bin.dat", errors="replace").text == "ok \ufffd\ufffd end"


def test_an_append_adds_to_the_file_or_makes_it_and_says_what_it_appended(
    files: WorkspaceFiles, ws: Path
) -> None:
    files.append_text("log/timings.jsonl", "one\n")
    written = files.append_text("log/timings.jsonl", "two\n")
    assert (ws / "log" / "timings.jsonl").read_text() == "one\ntwo\n"
    assert (written.path, written.bytes) == ("log/timings.jsonl", 4)


def test_an_append_never_goes_through_a_link_a_fifo_a_hard_link_or_to_a_protected_file(
    files: WorkspaceFiles, ws: Path
) -> None:
    os.symlink(ws.parent / "outside.txt", ws / "out.txt")
    os.mkfifo(ws / "pipe")
    os.link(ws / "calc.py", ws / "twin.py")
    assert code_of(files.append_text, "out.txt", "x") == "permission_denied"
    assert code_of(files.append_text, "pipe", "x") == "permission_denied"  # and it did not block
    assert code_of(files.append_text, "twin.py", "x") == "permission_denied"
    assert code_of(files.append_text, "test_calc.py", "x") == "permission_denied"
    assert code_of(files.append_text, "calc.py", "x" * 1001) == "invalid_arguments"
    assert (ws.parent / "outside.txt").read_text() == "secret\n"
    assert (ws / "calc.py").read_text() == "x = 1\n"


FIX_TESTS = Path(__file__).resolve().parents[2] / "examples" / "fix_tests"


def test_a_fix_tests_call_on_a_path_outside_the_workspace_is_rejected_before_it_runs() -> None:
    toolset = load_toolset(["fix_tools"], [str(FIX_TESTS)])
    spec = make_spec(scopes=("files:read", "files:write")).model_copy(
        update={"tools": ("fix_tools",)}
    )
    log = Log.created(spec)  # a run is offered the tools of the modules its spec names
    do_model_turn(
        log,
        use("up", "write_file", path="../../etc/passwd", content="x"),
        use("abs", "read_file", path="/etc/passwd"),
        use("ok", "read_file", path="src/../calc.py"),
    )

    found = findings(toolset, log.s)
    verdicts = {e.call_id: e for e in validate_turn(log.s, found, known_tools=[], now=T0)}

    for call_id, path in (("up", "../../etc/passwd"), ("abs", "/etc/passwd")):
        rejected = verdicts[call_id]
        assert isinstance(rejected, ToolCallRejected)
        assert rejected.error.code == "permission_denied"
        assert rejected.error.message.startswith(f"path {path!r} leads outside the workspace")
    ok = verdicts["ok"]
    assert isinstance(ok, ToolCallValidated) and ok.reads == ("file:ws/calc.py",)

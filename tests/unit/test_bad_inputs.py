"""The pieces that turn a user's bad input into a named cause, not a traceback:
the parser's checks of ids and numbers, `--json` usage errors as one object,
a control the inbox message cannot hold, a spec from standard input, and the
words for what answers where a Redis was expected (`not_redis`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentledger.schemas.errors import InvalidSpec
from agentledger.services.adapters.redis.not_redis import PING, describe, speaks_redis
from agentledger.services.bounded_yaml import Limits
from agentledger.services.entrypoints.cli import exit_codes, main, spec_file
from agentledger.services.entrypoints.cli.parser import (
    MAX_WHOLE,
    USAGE_EXIT,
    BadOption,
    UsageError,
    parser,
    shown,
)
from agentledger.services.entrypoints.controls import build

SPEC = b"task: t\nprincipal: {id: a, tenant: t}\nmodel: {scripted: [{end_turn: ok}]}\n"


def refusal(*argv: str) -> str:
    with pytest.raises(UsageError) as refused:
        parser(raising=True).parse_args(list(argv))
    return refused.value.message


@pytest.mark.parametrize(
    "run_id", ["r-../../etc", "r-" + "x" * 200, "", "r-ünï", "r-1\n", "r/1", "-r", ".r", "r 1"]
)
def test_a_malformed_run_id_is_refused_by_the_parser_for_every_command(run_id: str) -> None:
    before = ["--"] if run_id.startswith("-") else []  # as a value, not an option
    for argv in (["status", *before, run_id], ["cancel", *before, run_id], ["raw", *before, run_id],
                 ["approve", "--", run_id, "c1"], ["reply", "--", run_id, "go on"],
                 ["tail", f"--run={run_id}"]):  # fmt: skip
        assert "is not a run id" in refusal(*argv), argv


def test_a_run_id_as_the_intake_makes_it_is_taken() -> None:
    args = parser(raising=True).parse_args(["cancel", "r-1a2497602727365e64c.s11"])
    assert args.run_id == "r-1a2497602727365e64c.s11"


def test_a_long_value_is_shown_cut_with_its_length() -> None:
    assert shown("x" * 300) == repr("x" * 40) + "… (300 characters)"
    assert shown("short") == "'short'"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["approve", "r-1", ""], "is not a call id"),
        (["deny", "r-1", "c 1"], "is not a call id"),
        (["approve", "r-1", "c" * 257], "is not a call id"),
        (["reply", "r-1", "  "], "a reply needs some text"),
        (["runs", "--limit", str(MAX_WHOLE + 1)], "too large"),
        (["raw", "r-1", "--after", "99999999999999999999"], "too large"),
        (["workers", "--threads", "257"], "at most 256 threads"),
        (["submit", "--queue", "q\n", "spec.yaml"], "a queue name is"),
    ],
)
def test_a_bad_value_is_refused_naming_the_argument(argv: list[str], says: str) -> None:
    assert says in refusal(*argv)


def test_the_parser_code_is_the_documented_usage_code() -> None:
    assert USAGE_EXIT == exit_codes.USAGE


def test_without_raising_the_parser_exits_as_argparse_does() -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["status"])
    assert exited.value.code == 2


def test_a_usage_error_with_json_is_one_object_on_stdout_and_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main.main(["status", "--json"])
    out, err = capsys.readouterr()
    assert code == exit_codes.USAGE
    answer = json.loads(out)
    assert answer == {
        "error": "usage", "exit_code": 2, "command": "agentledger status",
        "message": "agentledger status: the following arguments are required: run_id",
    }  # fmt: skip
    assert err == "agentledger status: error: the following arguments are required: run_id\n"


def test_a_usage_error_without_json_prints_the_usage_then_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main.main(["status"]) == exit_codes.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: agentledger status")
    assert err.endswith("agentledger status: error: the following arguments are required: run_id\n")


def test_json_after_a_double_dash_is_a_value_not_the_option() -> None:
    assert main._wants_json(["reply", "--json", "r-1"])
    assert not main._wants_json(["reply", "r-1", "--", "--json"])


def test_a_control_the_message_cannot_hold_is_a_bad_option_naming_the_field() -> None:
    with pytest.raises(BadOption) as refused:
        build("cancel", "r-../../etc", call_id=None, text="", by="alice")
    assert refused.value.name == "run_id"
    assert "'r-../../etc' is not accepted here" in str(refused.value)


def test_a_spec_from_standard_input_resolves_from_the_current_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SPEC)))
    spec, base_dir, _ = spec_file.load_spec_file("-")
    assert spec.task == "t" and base_dir == str(tmp_path)


def test_a_spec_on_standard_input_past_the_limit_is_refused_without_reading_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.BytesIO(SPEC * 1000)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stream))
    with pytest.raises(InvalidSpec) as refused:
        spec_file.load_spec_file("-", Limits(max_bytes=1000))
    assert "<stdin>: larger than 1,000 bytes" in refused.value.render()
    assert stream.tell() <= 1001 + 8192  # one bounded read (and a buffer), not the whole stream


def test_an_acceptance_command_with_a_nul_is_refused_with_the_spec() -> None:
    with pytest.raises(InvalidSpec) as refused:
        spec_file.parse_spec({
            "task": "t", "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "ok"}]}, "acceptance": [{"command": "true\x00x"}],
        })  # fmt: skip
    assert "a command cannot hold a NUL character" in refused.value.render()


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n\r\n",
            "an HTTP server (it answered 'HTTP/1.1 400 Bad Request')",
        ),
        (b"<!DOCTYPE HTML>\n<html><head>", "an HTTP server (it answered with HTML)"),
        (b"\x15\x03\x01\x00\x02\x02\x32", "a TLS server"),
        (PING, "an echo"),
        (PING[:5], "an echo"),
        (b"", "closed the connection without a word"),
        (None, "said nothing within"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "it answered b'SSH-2.0-OpenSSH_9.2\\r\\n'"),
    ],
)
def test_what_answers_where_a_redis_was_expected_is_named(answer: bytes | None, says: str) -> None:
    assert says in describe(answer)


@pytest.mark.parametrize(
    ("answer", "redis"),
    [(b"+PONG\r\n", True), (b"-LOADING Redis is loading\r\n", True), (b"-NOAUTH needed\r\n", True),
     (PING, False), (b"HTTP/1.1 200 OK\r\n\r\n", False), (b"", False), (None, False)],
)  # fmt: skip
def test_a_reply_in_redis_protocol_is_told_from_other_bytes(
    answer: bytes | None, redis: bool
) -> None:
    assert speaks_redis(answer) is redis

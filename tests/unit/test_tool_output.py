"""A tool's own output: what it prints is captured per call, bounded, recorded
on its outcome event and redacted like everything else; none of it reaches the
worker's stdout or stderr."""

from __future__ import annotations

import sys
import threading

import pytest
from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events.redact import redact_event, redactor
from agentledger.events.tool_step import Errored, Printed, Succeeded
from agentledger.events.types import ToolCallFailed, ToolCallSucceeded, ToolError
from agentledger.services.adapters.tools.capture import KEEP_CHARS, Bounded, capturing
from agentledger.services.adapters.tools.context import ToolContext, ToolFailure
from agentledger.services.adapters.tools.registry import REGISTRY, tool
from agentledger.services.adapters.tools.runner import run_tool


@tool(read_only=True, name="chatty_capture_test")
def chatty(n: int) -> dict:
    """Prints as it works."""
    for i in range(n):
        print(f"step {i}")
    print("careful", file=sys.stderr)
    return {"steps": n}


@tool(read_only=True, name="chatty_failing_capture_test")
def chatty_failing() -> dict:
    """Prints, then fails."""
    print("about to fail")
    raise ToolFailure("not_found", "nothing there")


@tool(read_only=True, name="quiet_capture_test")
def quiet() -> int:
    """Prints nothing."""
    return 1


def ctx() -> ToolContext:
    return ToolContext("run-1", "c1", None, "alice", "t1")


def run(name: str, args: dict) -> object:  # type: ignore[type-arg]
    registered = next(t for t in REGISTRY.of_module(__name__) if t.spec.name == name)
    assert registered is not None
    return run_tool(registered, args, ctx(), timeout_s=5)


def test_what_a_tool_prints_is_on_its_outcome_and_not_on_the_workers_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    outcome = run("chatty_capture_test", {"n": 3})
    assert isinstance(outcome, Succeeded)
    assert outcome.output == {"steps": 3}
    assert outcome.printed == Printed(stdout="step 0\nstep 1\nstep 2\n", stderr="careful\n")
    out, err = capfd.readouterr()
    assert "step" not in out and "careful" not in err


def test_a_failing_tool_keeps_what_it_printed() -> None:
    outcome = run("chatty_failing_capture_test", {})
    assert isinstance(outcome, Errored) and outcome.error.code == "not_found"
    assert outcome.printed == Printed(stdout="about to fail\n", stderr=None)


def test_a_quiet_tool_records_nothing_printed() -> None:
    outcome = run("quiet_capture_test", {})
    assert isinstance(outcome, Succeeded) and outcome.printed == Printed()


def test_the_capture_is_bounded_keeping_the_start_and_the_end() -> None:
    outcome = run("chatty_capture_test", {"n": 5000})
    assert isinstance(outcome, Succeeded)
    text = outcome.printed.stdout or ""
    assert text.startswith("step 0\n") and text.endswith("step 4999\n")
    assert "characters left out" in text
    assert len(text) < KEEP_CHARS + 100


def test_bounded_text_is_exact_under_its_cap() -> None:
    b = Bounded(10)
    b.write("abc")
    b.write("defghij")
    assert b.text() == "abcdefghij" and b.dropped == 0
    b.write("k")
    assert b.text() == "abcde\n[... 1 characters left out ...]\nghijk"


def test_other_threads_print_to_the_real_stream_while_a_call_is_captured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    started, release = threading.Event(), threading.Event()

    def captured_call() -> None:
        with capturing() as cap:
            print("inside the call")
            started.set()
            release.wait(5)
        assert cap.stdout.text() == "inside the call\n"

    t = threading.Thread(target=captured_call)
    t.start()
    started.wait(5)
    print("the worker's own line")
    release.set()
    t.join()
    out = capsys.readouterr().out
    assert "the worker's own line" in out and "inside the call" not in out


def _running_call() -> Log:
    log = Log.created()
    do_model_turn(log, use("a"))
    do_validate(log, "a")
    do_claim(log, "a")
    return log


def test_the_outcome_events_carry_the_printed_output() -> None:
    log = _running_call()
    [ok] = do_finish(log, "a", Succeeded("fine", printed=Printed(stdout="hello\n")))
    assert isinstance(ok, ToolCallSucceeded)
    assert (ok.stdout, ok.stderr) == ("hello\n", None)
    log = _running_call()
    error = ToolError(code="internal", message="boom", retryable=False)
    [failed] = do_finish(log, "a", Errored(error, printed=Printed(stderr="Traceback…\n")))
    assert isinstance(failed, ToolCallFailed)
    assert (failed.stdout, failed.stderr) == (None, "Traceback…\n")


def test_printed_output_is_redacted_like_everything_else() -> None:
    log = _running_call()
    secret = "hunter2-deploy-token"
    [ok] = do_finish(log, "a", Succeeded("fine", printed=Printed(stdout=f"token={secret}\n")))
    clean = redact_event(ok, redactor({"DEPLOY_TOKEN": secret}))
    assert isinstance(clean, ToolCallSucceeded)
    assert clean.stdout == "token=[REDACTED:DEPLOY_TOKEN]\n"

"""What the CLI tells a person about an embedded run whose `run` has exited: which
runs are this state folder's embedded ones, and commands that a shell reads back
as exactly the arguments meant (what the e2e tests type, `test_cli_attach`)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.schemas.spec import Principal, RunSpec, ScriptedModel, ScriptedTurn
from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.entrypoints.cli.embedded import (
    attach_command,
    embedded_here,
    left,
    waiting_for_a_person,
)
from agentledger.services.entrypoints.cli.execute import _attach_args
from agentledger.services.entrypoints.cli.parser import BadOption, parser
from agentledger.services.settings import Settings

SPEC = RunSpec(
    task="t",
    principal=Principal(id="p", tenant="t"),
    model=ScriptedModel(scripted=(ScriptedTurn(end_turn="done"),)),
)
RUN = "r-1a2498f759726972f60.s14"


def state(queue: str, publisher: str | None) -> RunState:
    return RunState(
        run_id=RUN, status=RunStatus.AWAITING_HUMAN, spec=SPEC, workspace=None, created_at=1.0,
        queue=queue, publisher=publisher,
    )  # fmt: skip


def quoted(text: str) -> list[list[str]]:
    return [shlex.split(c) for c in re.findall(r"`([^`]+)`", text)]


def test_an_embedded_run_is_on_a_private_queue_and_published_as_this_folders_own_publisher(
    tmp_path,
) -> None:
    settings = Settings(state_dir=str(tmp_path))
    mine = local_name(str(tmp_path))
    assert embedded_here(state("run.0123456789ab", mine), settings)
    assert not embedded_here(state("shared", mine), settings)
    assert not embedded_here(state("run.0123456789ab", "ci"), settings)
    assert not embedded_here(
        state("run.0123456789ab", local_name(str(tmp_path / "other"))), settings
    )


def test_the_awaiting_human_line_names_the_reply_then_the_attach() -> None:
    commands = quoted(waiting_for_a_person(RUN, attach_command(RUN)))
    assert commands == [
        ["agentledger", "reply", RUN, "…"],
        ["agentledger", "resume", RUN],
        ["agentledger", "abort", RUN],
        ["agentledger", "run", "--attach", RUN],
    ]


def test_the_controls_it_names_are_signed_as_the_runs_publisher_when_not_the_folders() -> None:
    reply, resume, abort, go_on = quoted(
        waiting_for_a_person(RUN, "agentledger workers --queue q", as_="ci")
    )
    assert reply == ["agentledger", "reply", RUN, "…", "--as", "ci"]
    assert resume[-2:] == abort[-2:] == ["--as", "ci"]
    assert go_on == ["agentledger", "workers", "--queue", "q"]


def test_a_run_left_cancelling_is_said_to_end_cancelled_once_attached() -> None:
    said = left(RUN, RunStatus.CANCELLING, attach_command(RUN))
    assert "left cancelling (it was asked to cancel: it ends cancelled)" in said
    assert quoted(said) == [["agentledger", "run", "--attach", RUN]]
    assert "asked to cancel" not in left(RUN, RunStatus.RUNNING_TOOLS, attach_command(RUN))


def parsed(*args: str) -> argparse.Namespace:
    return parser().parse_args(["run", *args])


def test_run_takes_a_spec_or_attach_and_nothing_that_cannot_go_with_attach() -> None:
    assert _attach_args(parsed("--attach", RUN)) == RUN
    assert _attach_args(parsed("spec.yaml")) is None
    for args, named in [((), "SPEC"), (("s.yaml", "--attach", RUN), "SPEC"),
                        (("--attach", RUN, "--as", "ci"), "--as")]:  # fmt: skip
        with pytest.raises(BadOption) as refused:
            _attach_args(parsed(*args))
        assert refused.value.name == named

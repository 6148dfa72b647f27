"""The intake's workspace line: where a requested run will work, decided on the
server. The request's workspace is resolved on this machine and held to the
rule (`agentledger.events.workspaces`) against the roots the operator's settings and the
publisher's grant name; then, unless the spec says `copy_workspace: false`,
copied to `<state folder>/workspaces/<run id>` (`adapters.workspaces.copy`).
`RunCreated.workspace` is that copy, or the resolved folder itself, or None
when the request asks for no workspace. Refusals are `Rejected`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from agentledger.events.workspaces import (
    Asked,
    allowed_roots,
    asked_workspace,
    works_in_copy,
    workspace_refusal,
)
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.workspaces import copy, resolve
from agentledger.services.loops.inbox_auth import Granted
from agentledger.services.loops.inbox_parse import Rejected
from agentledger.services.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """A workspace the rule allowed: its realpath, and whether the run gets a copy."""

    asked: Asked
    real: str
    copied: bool
    owner: str  # whose request it is, kept beside a copy


@dataclass(frozen=True)
class Placed:
    path: str | None  # RunCreated.workspace
    made: copy.Copied | None = None  # the copy made for this request, if one was


class Workspaces:
    def __init__(self, settings: Settings):
        self._settings = settings
        self._copies = os.path.join(settings.state_dir, "workspaces")

    def decide(self, message: RunRequested, by: Granted) -> Placement | None:
        """The workspace the request may have (None: it asks for none); Rejected
        with the reason, naming the field, when it may not."""
        asked = asked_workspace(message.workspace, message.spec.workspace, message.base_dir)
        if isinstance(asked, str):
            raise Rejected(asked)
        if asked is None:
            return None
        found = resolve.resolve(asked)
        roots = resolve.roots(allowed_roots(self._settings.workspace_roots, by.grant.workspaces))
        state_dir = resolve.real_state_dir(self._settings.state_dir)
        refusal = workspace_refusal(by.name, asked, found, roots=roots, state_dir=state_dir)
        if refusal is not None:
            raise Rejected(refusal)
        copied = works_in_copy(message.spec.copy_workspace)
        return Placement(asked, found.real, copied, owner=f"{by.name}\n{found.real}\n")

    def place(self, placement: Placement | None, run_id: str) -> Placed:
        """The run's workspace: its copy (made now, or kept from before for the
        same request) or the folder itself."""
        if placement is None:
            return Placed(None)
        if not placement.copied:
            return Placed(placement.real)
        s = self._settings
        try:
            done = copy.copy_for_run(
                placement.real, self._copies, run_id, owner=placement.owner,
                max_bytes=s.workspace_max_bytes, max_entries=s.workspace_max_files,
            )  # fmt: skip
        except copy.CopyRefused as exc:
            raise Rejected(
                f"{placement.asked.field}: {placement.asked.given!r} {exc.reason}"
            ) from None
        if done.made:
            log.info(
                "workspace %s copied for run %s: %d files and folders, %d bytes, "
                "%d sockets/devices/FIFOs left out",
                placement.real, run_id, done.entries, done.bytes, done.skipped,
            )  # fmt: skip
        return Placed(done.path, done if done.made else None)

    def discard(self, placed: Placed, run_id: str) -> None:
        """Remove the copy made for a run that was then not created."""
        if placed.made is not None:
            copy.discard(placed.made, self._copies, run_id)

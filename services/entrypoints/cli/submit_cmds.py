"""Commands for a shared task queue: submit (publish a request for a run of a
spec, signed as a publisher, to a queue that workers serve) and toolset (the
fingerprint a publisher names)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agentledger.events.types import DEFAULT_QUEUE
from agentledger.services.adapters.inbox.port import Liveness
from agentledger.services.adapters.tools.toolset import (
    ToolSetError,
    computing_imports,
    fingerprint_of,
    load_toolset,
    static_code,
)
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.prepare import Prepared, request_for
from agentledger.services.entrypoints.cli.publisher_cmds import check_grant
from agentledger.services.entrypoints.controls import signer_for
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.handlers.spec_check import spec_problems
from agentledger.services.redis_urls import masked
from agentledger.services.session import Session
from agentledger.services.settings import Settings

NO_PUBLISHER = (
    "submit signs the request as a publisher: pass --as NAME (`agentledger publishers "
    "add NAME --principal ID@TENANT --scopes A,B` files one and prints its key)"
)


def submit(
    session: Session,
    prepared: Prepared,
    *,
    queue: str | None,
    unserved_ok: bool,
    as_json: bool,
    as_: str | None = None,
) -> int:
    """Publish a request for a run of the spec to `queue` (else the spec's, else the
    default), signed as publisher `as_`; print the run's id. Refused when no worker
    ever served the queue with this tool set (unless `unserved_ok`), or when the tool
    set the workers recorded lacks what the spec names."""
    spec, fingerprint = prepared.spec, prepared.fingerprint
    queue = queue or spec.queue or DEFAULT_QUEUE
    if as_ is None:
        return fail(exit_codes.USAGE, "no publisher", NO_PUBLISHER, as_json)
    signer = signer_for(session.settings, as_)
    check_grant(session.settings, signer, spec.principal, queue)
    manifest = session.admin.manifest(queue, fingerprint)
    what = f"queue {queue!r} with tool set {fingerprint} ({', '.join(spec.tools) or 'no modules'})"
    if manifest is None and not unserved_ok:
        message = (
            f"no worker has ever served {what}: start one with `agentledger workers --queue "
            f"{queue} --tools {' '.join(spec.tools)}` (from the folder that has this code), or "
            "pass --unserved to publish anyway"
        )
        return fail(exit_codes.USAGE, "unserved", message, as_json)
    if manifest is not None and (
        problems := spec_problems(spec, prepared.base_dir, manifest=manifest)
    ):
        raise prepared.refuse(problems)
    _say_who_takes_it(
        session, what, queue=queue, fingerprint=fingerprint, served=manifest is not None,
        publisher=signer.name,
    )  # fmt: skip
    request = request_for(
        spec, prepared.base_dir, session.settings, queue=queue, toolset=fingerprint
    )
    entry_id = session.inbox.publish(request, signer=signer)
    if as_json:
        emit(
            {"run_id": request.run_id, "entry_id": entry_id, "queue": queue, "toolset": fingerprint}
        )
    else:
        print(request.run_id)
    return 0


def _say_who_takes_it(
    session: Session, what: str, *, queue: str, fingerprint: str, served: bool, publisher: str
) -> None:
    """What a submitted run will wait for, said before it is published: a worker that
    never served its queue and tool set (`served`: one did), none serving it now, no
    intake reading the inbox."""
    if not served:  # published with --unserved
        say(
            f"no worker has served {what} yet, so the tools the spec's scripted calls name "
            "are not checked: the intake refuses the run if its tool set lacks one, and "
            "`agentledger status RUN` then says why"
        )
    if served and not session.admin.live(queue, fingerprint):
        say(f"no worker serves {what} right now; the run waits for one")
    ttl_s = session.settings.member_ttl_s
    if session.inbox.intake_liveness(ttl_s=ttl_s, publisher=publisher) is Liveness.NONE:
        say(
            f"no intake reads the inbox on {masked(session.located.url)} (prefix "
            f"{session.settings.prefix!r}) yet: the run waits until `agentledger intake` (or "
            "`agentledger workers --pools intake`) starts there"
        )


def print_toolset(
    modules: Sequence[str], paths: Sequence[str], *, load: bool = False, as_json: bool
) -> int:
    """The fingerprint outside publishers name in a RunRequested's `toolset`: from
    the source files (no import), or with `load` as a worker computes it."""
    try:
        if load:
            loaded = load_toolset(modules, paths)
            fingerprint, hashed, dynamic = (
                loaded.fingerprint,
                list(loaded.hashed),
                list(loaded.dynamic),
            )
        else:
            fingerprint, hashed, dynamic = (
                fingerprint_of(modules, paths),
                sorted(static_code(modules, paths)),
                [],
            )
        computing = [] if load else list(computing_imports(modules, paths))
    except ToolSetError as exc:
        return fail(exit_codes.USAGE, "bad tool set", str(exc), as_json)
    if as_json:
        emit({"toolset": fingerprint, "modules": sorted(set(modules)), "hashed": hashed,
              "loaded": load, "dynamic": dynamic, "computing_imports": computing})  # fmt: skip
    else:
        print(fingerprint)
        if computing:
            print(f"agentledger: {', '.join(computing)} import modules by computed names, which a worker's "
                  "fingerprint counts and this one cannot: `agentledger toolset --load …` prints the "
                  "workers' (it imports the modules)", file=sys.stderr)  # fmt: skip
        if dynamic:
            print(f"agentledger: importing the modules loaded {', '.join(dynamic)}, which their source "
                  "does not name: this is the workers' fingerprint; without --load it is another",
                  file=sys.stderr)  # fmt: skip
    return 0


def print_mcp_toolset(
    modules: Sequence[str], paths: Sequence[str], mcp: str, settings: Settings, *, as_json: bool
) -> int:
    """The fingerprint of workers started with `--mcp FILE`: the modules loaded and the
    file's servers started (and stopped again), as a worker joins their tools. A server
    that is not up is left out, as a worker leaves it out: said, and exit 1."""
    from agentledger.services.entrypoints.cli.mcp_servers import start_hub

    try:
        base = load_toolset(modules, paths)
    except ToolSetError as exc:
        return fail(exit_codes.USAGE, "bad tool set", str(exc), as_json)
    hub = start_hub(mcp, settings)
    try:
        toolset, up = hub.toolset(base), sorted(hub.up())
    finally:
        hub.close()
    down = sorted(set(hub.file.servers) - set(up))
    if as_json:
        emit({"toolset": toolset.fingerprint, "modules": sorted(set(modules)), "mcp": mcp,
              "servers_up": up, "servers_down": down})  # fmt: skip
    else:
        print(toolset.fingerprint)
    if down:
        say(
            f"MCP servers not up, left out of this fingerprint as a worker leaves them out: {', '.join(down)}"
        )
        return 1
    return 0

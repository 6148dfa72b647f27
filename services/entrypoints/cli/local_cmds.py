"""`agentledger local status|start|stop`: the local Redis service of this
user's state folder (`agentledger.services.adapters.redis.local_service`)."""

from __future__ import annotations

from agentledger.events.counted import counted
from agentledger.services.adapters.redis.local_service import LocalService, ServiceStatus
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.reply import emit, say_loading
from agentledger.services.settings import Settings


def local(settings: Settings, action: str, *, force: bool, as_json: bool) -> int:
    service = LocalService(settings.state_dir)
    match action:
        case "start":
            _, started = service.start(say_loading)
            return _report(service.status(), "started" if started else "already running", as_json)
        case "stop":
            stopped = service.stop(force=force)  # ServiceBusy while clients are connected
            return _report(service.status(), "stopped" if stopped else "was not running", as_json)
    status = service.status()
    _report(status, None, as_json)
    return 0 if status.running else exit_codes.NO_REDIS


def _report(status: ServiceStatus, what: str | None, as_json: bool) -> int:
    if as_json:
        emit({**status.as_dict(), **({"action": what} if what else {})})
        return 0
    head = f"local Redis service: {what}" if what else "local Redis service"
    if status.running:
        held = (
            counted(status.keys or 0, "key")
            if status.loading_perc is None
            else f"still loading its AOF ({status.loading_perc:.0f}%): commands wait for it"
        )
        print(
            f"{head}\n  running at {status.url} (pid {status.pid}, redis {status.version}, "
            f"up {status.uptime_s}s)\n  {held}; {counted(status.other_clients or 0, 'other client')} "
            f"connected\n  data in {status.state_dir}/redis (AOF, appendfsync everysec)"
        )
    else:
        data = "an AOF from earlier" if status.has_data else "no data yet"
        print(f"{head}\n  not running; {data} in {status.state_dir}/redis")
    return 0

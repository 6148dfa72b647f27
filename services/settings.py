"""One frozen settings object, read at the edge. Nothing else reads os.environ."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from schemas.json_limits import MAX_MESSAGE_BYTES
from services.errors import ConfigError

SANDBOX_MODES = frozenset({"on", "off"})


@dataclass(frozen=True, slots=True)
class Settings:
    redis_url: str | None = None  # None: the CLI finds or starts a server
    probe_url: str = "redis://127.0.0.1:6379/0"  # used when it answers and REDIS_URL is unset
    prefix: str = "al"
    shards: int = 16  # for new runs; a run's shard is in its id
    inbox_partitions: int = 4
    lease_s: float = 2.0  # a live run idle this long is re-driven by the sweeper
    member_ttl_s: float = 2.0  # a worker silent this long is gone: its shards move on
    outcome_retry_s: float = 30.0  # how long an outcome in hand is retried across a Redis outage
    inbox_max_bytes: int = MAX_MESSAGE_BYTES  # a bigger inbox message is rejected unread
    lock_lease_s: float = 5.0  # a lock holder that stops renewing loses its locks after this
    ledger_keep_s: float = 30 * 86400.0  # a done operation key is replayed this long (0: forever)
    sweep_interval_s: float = 1.0
    model_lease_s: float = 120.0
    acceptance_lease_s: float = 600.0
    worker_threads: int = 8
    broker_claim_idle_s: float = 3.0  # a delivered message idle this long moves to another worker
    broker_max_deliveries: int = 3  # deliveries (kills included) before it is dead-lettered
    state_dir: str = ".agentledger"
    anthropic_api_key: str | None = field(default=None, repr=False)  # never in a log line
    anthropic_base_url: str | None = None  # None: the SDK's default, api.anthropic.com
    sandbox: str = "on"  # "on": commands run under bubblewrap; "off": as the worker, unconfined
    sandbox_cpu_s: int = 120  # CPU seconds per process of a sandboxed command
    sandbox_memory_mb: int = 2048  # address space per process
    sandbox_file_mb: int = 64  # largest file a command may write
    sandbox_processes: int = 64  # processes of one command, all of its tree
    sandbox_env: str = ""  # names (comma-separated) of worker variables passed into commands

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


_ENV: dict[str, tuple[str, type]] = {
    "REDIS_URL": ("redis_url", str),
    "AGENTLEDGER_PROBE_URL": ("probe_url", str),
    "AGENTLEDGER_PREFIX": ("prefix", str),
    "AGENTLEDGER_SHARDS": ("shards", int),
    "AGENTLEDGER_INBOX_PARTITIONS": ("inbox_partitions", int),
    "AGENTLEDGER_MEMBER_TTL_S": ("member_ttl_s", float),
    "AGENTLEDGER_OUTCOME_RETRY_S": ("outcome_retry_s", float),
    "AGENTLEDGER_INBOX_MAX_BYTES": ("inbox_max_bytes", int),
    "AGENTLEDGER_LEASE_S": ("lease_s", float),
    "AGENTLEDGER_SWEEP_INTERVAL_S": ("sweep_interval_s", float),
    "AGENTLEDGER_LOCK_LEASE_S": ("lock_lease_s", float),
    "AGENTLEDGER_LEDGER_KEEP_S": ("ledger_keep_s", float),
    "AGENTLEDGER_MODEL_LEASE_S": ("model_lease_s", float),
    "AGENTLEDGER_ACCEPTANCE_LEASE_S": ("acceptance_lease_s", float),
    "AGENTLEDGER_WORKER_THREADS": ("worker_threads", int),
    "AGENTLEDGER_BROKER_CLAIM_IDLE_S": ("broker_claim_idle_s", float),
    "AGENTLEDGER_BROKER_MAX_DELIVERIES": ("broker_max_deliveries", int),
    "AGENTLEDGER_STATE_DIR": ("state_dir", str),
    "ANTHROPIC_API_KEY": ("anthropic_api_key", str),
    "ANTHROPIC_BASE_URL": ("anthropic_base_url", str),
    "AGENTLEDGER_SANDBOX": ("sandbox", str),
    "AGENTLEDGER_SANDBOX_CPU_S": ("sandbox_cpu_s", int),
    "AGENTLEDGER_SANDBOX_MEMORY_MB": ("sandbox_memory_mb", int),
    "AGENTLEDGER_SANDBOX_FILE_MB": ("sandbox_file_mb", int),
    "AGENTLEDGER_SANDBOX_PROCESSES": ("sandbox_processes", int),
    "AGENTLEDGER_SANDBOX_ENV": ("sandbox_env", str),
}


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for var, (name, kind) in _ENV.items():
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        try:
            values[name] = kind(raw)
        except ValueError:
            raise ConfigError(var, f"expected {kind.__name__}, got {raw!r}") from None
    settings = Settings(**values)  # type: ignore[arg-type]
    if not 1 <= settings.shards <= 4096:
        raise ConfigError("AGENTLEDGER_SHARDS", "must be between 1 and 4096")
    if not 1 <= settings.inbox_partitions <= 1024:
        raise ConfigError("AGENTLEDGER_INBOX_PARTITIONS", "must be between 1 and 1024")
    _check_broker(settings)
    _check_sandbox(settings)
    if not settings.prefix or any(c in settings.prefix for c in "{} "):
        raise ConfigError(
            "AGENTLEDGER_PREFIX", f"{settings.prefix!r} is empty or has braces/spaces"
        )
    return settings


def _check_broker(settings: Settings) -> None:
    if settings.broker_claim_idle_s <= 0:
        raise ConfigError("AGENTLEDGER_BROKER_CLAIM_IDLE_S", "must be positive")
    if settings.broker_max_deliveries < 1:
        raise ConfigError("AGENTLEDGER_BROKER_MAX_DELIVERIES", "must be at least 1")


def _check_sandbox(settings: Settings) -> None:
    if settings.sandbox not in SANDBOX_MODES:
        raise ConfigError(
            "AGENTLEDGER_SANDBOX",
            f"expected one of {sorted(SANDBOX_MODES)}, got {settings.sandbox!r}",
        )
    for var, name in (
        ("AGENTLEDGER_SANDBOX_CPU_S", "sandbox_cpu_s"),
        ("AGENTLEDGER_SANDBOX_MEMORY_MB", "sandbox_memory_mb"),
        ("AGENTLEDGER_SANDBOX_FILE_MB", "sandbox_file_mb"),
        ("AGENTLEDGER_SANDBOX_PROCESSES", "sandbox_processes"),
    ):
        if getattr(settings, name) < 1:
            raise ConfigError(var, "must be at least 1")


def sandbox_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker variables the operator passes into sandboxed commands
    (AGENTLEDGER_SANDBOX_ENV names them); unset ones are left out."""
    env = os.environ if environ is None else environ
    names = [n.strip() for n in settings.sandbox_env.split(",")]
    return {n: env[n] for n in names if n and n in env}


ALWAYS_SECRET = ("ANTHROPIC_API_KEY",)


def read_secrets(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of the variables a run spec declares secret (`secrets`), of
    those AGENTLEDGER_SECRETS names (comma-separated) and of ALWAYS_SECRET, read
    when a run needs them; unset and empty ones are left out. Never logged."""
    env = os.environ if environ is None else environ
    listed = [n.strip() for n in env.get("AGENTLEDGER_SECRETS", "").split(",")]
    declared = dict.fromkeys([*names, *listed, *ALWAYS_SECRET])
    return {name: env[name] for name in declared if name and env.get(name)}


def environ_for_children(settings: Settings) -> dict[str, str]:
    """The variables that make a child process build the same settings."""
    env = dict(os.environ)
    for var, (name, _) in _ENV.items():
        value = getattr(settings, name)
        if value is not None:
            env[var] = str(value)
    return env

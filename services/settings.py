"""One frozen settings object, read at the edge. Nothing else reads os.environ.

Every value is checked here (each variable on its own in `agentledger.services.settings_env`,
which holds the table of variables; the values together below): a bad one is a
ConfigError naming the variable (the CLI prints it and exits 2), never a
traceback later."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from agentledger.events.retention import DEFAULT_RETENTION_S, RetentionPolicy
from agentledger.schemas.json_limits import MAX_MESSAGE_BYTES
from agentledger.services.errors import ConfigError
from agentledger.services.redis_urls import check_redis_url
from agentledger.services.settings_env import (
    ENV,
    model_endpoints,
    otlp_traces_wanted,
    parse_tables,
    read_values,
    trace_service,
    workspace_roots,
)

SANDBOX_MODES = frozenset({"on", "off"})
MODEL_KEY_VARS = "OPENAI_API_KEY"  # the credential variables a model spec may name, by default
NO_PROBE = "off"  # AGENTLEDGER_PROBE_URL=off (or unset): probe nothing


def user_state_dir(environ: Mapping[str, str] | None = None) -> str:
    """The per-user state home: $XDG_STATE_HOME/agentledger, else ~/.local/state/agentledger."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "agentledger")


@dataclass(frozen=True, slots=True)
class Settings:
    redis_url: str | None = None  # None: the CLI finds one (the probe if set, the local service)
    # a Redis the CLI uses when it answers and REDIS_URL is unset: only when asked for
    # (AGENTLEDGER_PROBE_URL), never by default: a Redis found on a well-known port may
    # be anybody's, and a newcomer's runs are not to be mixed into it
    probe_url: str | None = None
    prefix: str = "al"
    shards: int = 16  # for new runs; a run's shard is in its id
    inbox_partitions: int = 4
    # partitions of the lock table, fixed per deployment (recorded in Redis at the first
    # start; a process asking for another count refuses to start). None: the recorded
    # count, else 1 on one Redis and 8 on a cluster (agentledger.services.lock_partitions says why)
    lock_partitions: int | None = None
    lease_s: float = 2.0  # a live run idle this long is re-driven by the sweeper
    member_ttl_s: float = 2.0  # a worker silent this long is gone: its shards move on
    outcome_retry_s: float = 30.0  # how long an outcome in hand is retried across a Redis outage
    inbox_max_bytes: int = MAX_MESSAGE_BYTES  # a bigger inbox message is rejected unread
    lock_lease_s: float = 5.0  # a lock holder that stops renewing loses its locks after this
    ledger_keep_s: float = 30 * 86400.0  # a done operation key is replayed this long (0: forever)
    sweep_interval_s: float = 0.5  # a pass is 2-3 small calls; it also beats membership
    # how long one model request may take before another worker asks again (an attempt);
    # the turn's attempts and the time its retries may take (`agentledger.events.model_retry`): past
    # either, a model error ends the run `failed` with its cause
    model_lease_s: float = 240.0
    model_max_attempts: int = 5
    model_retry_s: float = 300.0
    acceptance_lease_s: float = 600.0
    worker_threads: int = 8
    # a delivery carries its run on (the next step due in a pool this process serves, in
    # the same append, on the same thread) for at most this long (a time slice: a step
    # due later waits in its queue behind the other runs' steps); 0: never
    carry_s: float = 1.0
    # ... but once it has carried one run this long, it hands its turn on to a run that
    # waits (round-robin: `agentledger.events.carrying`); 0: after every step
    carry_shared_s: float = 0.0
    broker_claim_idle_s: float = 3.0  # a delivered message idle this long moves to another worker
    broker_max_deliveries: int = 3  # deliveries (kills included) before it is dead-lettered
    # the local Redis service's data, its workspace copies: one folder per user
    state_dir: str = field(default_factory=user_state_dir)
    anthropic_api_key: str | None = field(default=None, repr=False)  # never in a log line
    anthropic_base_url: str | None = None  # None: the SDK's default, api.anthropic.com
    # models beyond Claude (issue 35): the base URLs a spec's model may name, the worker
    # variables it may name as its credential, and their values (read at the edge)
    model_endpoints: tuple[str, ...] = ()
    model_key_vars: str = MODEL_KEY_VARS
    model_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # never logged
    prices_file: str | None = None  # the operator's price table (services/prices_file.py)

    @property
    def model_key_var_names(self) -> tuple[str, ...]:
        return tuple(n.strip() for n in self.model_key_vars.split(",") if n.strip())

    def model_key(self, name: str) -> str | None:
        """The value of a credential variable a model spec may name; None: unset or not allowed."""
        return dict(self.model_keys).get(name)

    sandbox: str = "on"  # "on": commands run under bubblewrap; "off": as the worker, unconfined
    sandbox_cpu_s: int = 120  # CPU seconds per process of a sandboxed command
    sandbox_memory_mb: int = 2048  # address space per process
    sandbox_file_mb: int = 64  # largest file a command may write
    sandbox_processes: int = 64  # processes of one command, all of its tree
    sandbox_env: str = ""  # names (comma-separated) of worker variables passed into commands
    # the sandbox (issue 32, wt/sandbox): the host uid/gid a command runs as when the
    # worker is root (never root itself); the size of its /tmp and of its /dev/shm, each;
    # how many entries of a workspace are looked at before a command (more: refused)
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    sandbox_tmp_mb: int = 256
    sandbox_scan_max: int = 100_000
    # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT set: workers send the runs' spans over OTLP/HTTP
    # (the exporter reads the OTEL_* variables itself)
    otlp_traces: bool = False
    # the traces' service.name, as the OpenTelemetry SDK takes it (OTEL_SERVICE_NAME, else
    # OTEL_RESOURCE_ATTRIBUTES' service.name): what `trace --json` names, as the exporter does
    trace_service: str = "agentledger"
    publishers_file: str | None = None  # None: publishers.yaml in the state folder

    @property
    def publishers_path(self) -> str:
        """The publishers file: who may publish to the inbox, and what each may ask for."""
        return self.publishers_file or os.path.join(self.state_dir, "publishers.yaml")

    # prometheus_client's multiprocess folder: set, every worker process keeps its metrics there
    metrics_dir: str | None = None
    replica_acks: int = 0  # appends, claims and ledger writes WAIT for this many replicas
    # workspaces (issue 31.1): folders every publisher's runs may ask for a workspace
    # inside (a grant's own `workspaces` add to them), and the most the intake copies
    # into <state folder>/workspaces/<run> for one run (files counts every entry)
    workspace_roots: tuple[str, ...] = ()
    workspace_max_bytes: int = 1 << 30
    workspace_max_files: int = 100_000
    # time travel (issue 39): the folder workspace snapshots keep their trees and blobs in
    # (None: <state folder>/snapshots; "off": no snapshots), and what one snapshot keeps
    snapshot_dir: str | None = None
    snapshot_file_max_bytes: int = 64 << 20
    snapshot_max_bytes: int = 1 << 30
    snapshot_keep_s: float = 0.0  # 0: a run's snapshots are kept as long as the run

    @property
    def snapshot_path(self) -> str | None:
        """Where snapshots are kept; None when the operator switched them off."""
        if self.snapshot_dir == "off":
            return None
        return self.snapshot_dir or os.path.join(self.state_dir, "snapshots")

    # --- bounds (issue 32.3-32.5): the operator's maxima for user-given timeouts, and
    # each pool's own thread budget (docs/guide/limits.md) ---
    max_command_timeout_s: float = 600.0  # an acceptance `command:` check's timeout_s
    max_tool_timeout_s: float = (
        600.0  # a tool call's timeout (the tool's, the spec's tool_timeout_s)
    )
    max_mcp_timeout_s: float = 600.0  # an MCP tool call's timeout (the servers file's timeout_s)
    # threads of each pool of a process; None: its share of worker_threads
    # (agentledger.services.adapters.broker.budgets.thread_budgets: accept a quarter, model and tools the rest)
    model_threads: int | None = None
    tools_threads: int | None = None
    accept_threads: int | None = None
    tenant_share: str = "accept"  # pools where a tenant holds at most all but one slot
    # messages a pool with every slot taken reads ahead, to give a freed slot to the
    # tenant served least recently (agentledger.events.thread_turns)
    read_ahead: int = 16
    # pools given one spare slot (and thread) a process, for a tenant with nothing running there
    tenant_spare: str = "model"
    # replays (issue 31.4): an inbox message issued further than this from the intake's
    # clock, either side, is refused; its nonce is kept for twice as long
    replay_window_s: float = 300.0
    # identity and the web view (issue 31.6, 31.7): the token an operator signs in to
    # `agentledger ui` with (None: a token file in the state folder, made on first start),
    # and Host names the view answers besides loopback and its own address (comma-separated)
    ui_token: str | None = field(default=None, repr=False)  # never in a log line
    ui_allow_hosts: str = ""
    # intake (issue 31.2/31.3): each partition's rejected stream keeps about this many
    # entries (each a digest of at most 4 kB: 10,000 are at most ~40 MB)
    rejected_maxlen: int = 10_000
    # sizes (issue 32.7, docs/guide/limits.md): no stored event is larger than
    # event_max_bytes (a tool-made field past it is cut, the rest kept in the run's
    # overflow pages); a worker keeps folded states of at most state_cache_max_bytes;
    # its C allocator makes at most malloc_arenas arenas (0: glibc's default)
    event_max_bytes: int = 256 << 10
    state_cache_max_bytes: int = 64 << 20
    malloc_arenas: int = 2
    # retention (issue 36.1, docs/guide/operations.md): a finished run leaves Redis for
    # the archive this long after it ended (a tenant's own age in retention_tenants);
    # the archive is a folder or any fsspec URL (None: <state folder>/archive; "off":
    # none: nothing is archived, nothing read from one); the sweepers look this often
    retention_s: float = DEFAULT_RETENTION_S
    retention_tenants: tuple[tuple[str, float], ...] = ()
    archive_url: str | None = None
    archive_interval_s: float = 60.0
    limits: tuple[tuple[str, int], ...] = ()  # the operator's max per concurrency key (issue 37)
    # (queue, most live runs of one tenant on it): a run past it is held (events/run_caps.py)
    max_live_runs_per_tenant: tuple[tuple[str, int], ...] = ()

    @property
    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(self.retention_s, dict(self.retention_tenants))

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values = read_values(env)
    _resolve(values, env)
    settings = Settings(**values)  # type: ignore[arg-type]
    _check(settings)
    return settings


def _resolve(values: dict[str, object], env: Mapping[str, str]) -> None:
    """Paths made absolute, the state folder's default, the roots as folders, `off` as no probe."""
    if "state_dir" in values:
        values["state_dir"] = os.path.abspath(os.path.expanduser(str(values["state_dir"])))
    else:
        values["state_dir"] = user_state_dir(env)
    if "model_endpoints" in values:
        values["model_endpoints"] = model_endpoints(str(values["model_endpoints"]))
    names = str(values.get("model_key_vars", MODEL_KEY_VARS)).split(",")
    values["model_keys"] = tuple(
        (n, env[n]) for n in (x.strip() for x in names) if n and env.get(n)
    )
    if "workspace_roots" in values:
        values["workspace_roots"] = workspace_roots(str(values["workspace_roots"]))
    if "prices_file" in values:
        values["prices_file"] = os.path.abspath(os.path.expanduser(str(values["prices_file"])))
    if values.get("snapshot_dir") not in (None, "off"):
        values["snapshot_dir"] = os.path.abspath(os.path.expanduser(str(values["snapshot_dir"])))
    if "publishers_file" in values:
        values["publishers_file"] = os.path.abspath(
            os.path.expanduser(str(values["publishers_file"]))
        )
    parse_tables(values)
    if str(values.get("probe_url", "")).lower() in (NO_PROBE, "none", "no"):
        values["probe_url"] = None
    values["otlp_traces"] = otlp_traces_wanted(env)
    values["trace_service"] = trace_service(env)


def _check(settings: Settings) -> None:
    """The checks that need the values together: ConfigError naming the first variable at fault."""
    _check_counts(settings)
    if settings.redis_url is not None:
        check_redis_url("REDIS_URL", settings.redis_url)
    if settings.probe_url is not None:
        check_redis_url("AGENTLEDGER_PROBE_URL", settings.probe_url)
    _check_broker(settings)
    _check_sandbox(settings)
    _check_ui(settings)
    _check_sizes(settings)
    if not settings.prefix or any(c in settings.prefix for c in "{} "):
        raise ConfigError(
            "AGENTLEDGER_PREFIX", f"{settings.prefix!r} is empty or has braces/spaces"
        )
    if Path(settings.state_dir).exists() and not Path(settings.state_dir).is_dir():
        raise ConfigError("AGENTLEDGER_STATE_DIR", f"{settings.state_dir!r} is not a folder")


def _check_counts(settings: Settings) -> None:
    if not 1 <= settings.shards <= 4096:
        raise ConfigError("AGENTLEDGER_SHARDS", "must be between 1 and 4096")
    if not 1 <= settings.inbox_partitions <= 1024:
        raise ConfigError("AGENTLEDGER_INBOX_PARTITIONS", "must be between 1 and 1024")
    if settings.lock_partitions is not None and not 1 <= settings.lock_partitions <= 1024:
        raise ConfigError("AGENTLEDGER_LOCK_PARTITIONS", "must be between 1 and 1024")


def _check_broker(settings: Settings) -> None:
    if settings.broker_claim_idle_s <= 0:
        raise ConfigError("AGENTLEDGER_BROKER_CLAIM_IDLE_S", "must be positive")
    if settings.broker_max_deliveries < 1:
        raise ConfigError("AGENTLEDGER_BROKER_MAX_DELIVERIES", "must be at least 1")
    if bad := set(settings.tenant_share.split(",")) - {"model", "tools", "accept", ""}:
        raise ConfigError(
            "AGENTLEDGER_TENANT_SHARE", f"{sorted(bad)}: pools are model, tools, accept"
        )
    if bad := set(settings.tenant_spare.split(",")) - {"model", "tools", "accept", "none", ""}:
        raise ConfigError(
            "AGENTLEDGER_TENANT_SPARE", f"{sorted(bad)}: pools are model, tools, accept (or none)"
        )
    if not 1 <= settings.read_ahead <= 4096:
        raise ConfigError("AGENTLEDGER_READ_AHEAD", "must be between 1 and 4096")


MIN_EVENT_MAX_BYTES = 128 << 10  # room for a head beside an outcome's stdout and stderr


def _check_sizes(settings: Settings) -> None:
    if settings.event_max_bytes < MIN_EVENT_MAX_BYTES:
        raise ConfigError("AGENTLEDGER_EVENT_MAX_BYTES", f"must be at least {MIN_EVENT_MAX_BYTES}")
    if settings.state_cache_max_bytes < 1 << 20:
        raise ConfigError("AGENTLEDGER_STATE_CACHE_MAX_BYTES", f"must be at least {1 << 20}")


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
        ("AGENTLEDGER_SANDBOX_TMP_MB", "sandbox_tmp_mb"),
        ("AGENTLEDGER_SANDBOX_SCAN_MAX", "sandbox_scan_max"),
    ):
        if getattr(settings, name) < 1:
            raise ConfigError(var, "must be at least 1")
    for var, name in (
        ("AGENTLEDGER_SANDBOX_UID", "sandbox_uid"),
        ("AGENTLEDGER_SANDBOX_GID", "sandbox_gid"),
    ):
        if not 1 <= getattr(settings, name) < 2**32 - 1:  # 0 is root; 2**32-1 is "no id"
            raise ConfigError(var, f"must be a uid/gid from 1 to {2**32 - 2}, not root (0)")


UI_TOKEN_MIN_CHARS = 32  # 'REPLACE_ME…' placeholders are shorter: nothing runs with a known token


def _check_ui(settings: Settings) -> None:
    if settings.ui_token is not None and len(settings.ui_token) < UI_TOKEN_MIN_CHARS:
        raise ConfigError(
            "AGENTLEDGER_UI_TOKEN",
            f"must be at least {UI_TOKEN_MIN_CHARS} characters (e.g. `openssl rand -hex 32`)",
        )
    for host in ui_allowed_hosts(settings):
        if not host or any(c in host for c in "/ @?#"):
            raise ConfigError("AGENTLEDGER_UI_ALLOW_HOSTS", f"{host!r} is not a host name")


def ui_allowed_hosts(settings: Settings) -> list[str]:
    """AGENTLEDGER_UI_ALLOW_HOSTS' names, lower case."""
    return [h.strip().lower() for h in settings.ui_allow_hosts.split(",") if h.strip()]


def sandbox_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker variables the operator passes into sandboxed commands
    (AGENTLEDGER_SANDBOX_ENV names them); unset ones are left out."""
    env = os.environ if environ is None else environ
    names = [n.strip() for n in settings.sandbox_env.split(",")]
    return {n: env[n] for n in names if n and n in env}


ALWAYS_SECRET = ("ANTHROPIC_API_KEY", "AGENTLEDGER_UI_TOKEN", "OPENAI_API_KEY")


def read_secrets(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of the variables a run spec declares secret (`secrets`), of
    those AGENTLEDGER_SECRETS names (comma-separated) and of ALWAYS_SECRET, read
    when a run needs them; unset and empty ones are left out. Never logged."""
    env = os.environ if environ is None else environ
    listed = [n.strip() for n in env.get("AGENTLEDGER_SECRETS", "").split(",")]
    listed += [n.strip() for n in env.get("AGENTLEDGER_MODEL_KEY_VARS", MODEL_KEY_VARS).split(",")]
    declared = dict.fromkeys([*names, *listed, *ALWAYS_SECRET])
    return {name: env[name] for name in declared if name and env.get(name)}


def read_key_variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A publisher's key kept in a variable (`key_env` in the publishers file);
    None when it is unset or empty. Never logged."""
    env = os.environ if environ is None else environ
    return env.get(name) or None


def read_variables(
    names: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The values of the worker variables named (an MCP server's `headers:`);
    unset and empty ones are left out. Never logged."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in names if env.get(name)}


def environ_for_children(settings: Settings) -> dict[str, str]:
    """The variables that make a child process build the same settings."""
    env = dict(os.environ)
    for var, (name, _) in ENV.items():
        value = getattr(settings, name)
        if isinstance(value, tuple):  # roots and URLs alike are read back split at ','
            env[var] = ",".join(value)
        elif value is not None:
            env[var] = str(value)
    if settings.probe_url is None:
        env["AGENTLEDGER_PROBE_URL"] = NO_PROBE
    return env

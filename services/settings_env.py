"""The environment variables that are settings: which field of `Settings` each
sets and of what kind (`ENV`), a line saying what each does (`ENV_HELP`, the
reference page is made from it), the variables read besides (`ENV_ALSO`), and
reading them: every value is checked here, a bad one is a ConfigError naming
the variable. `agentledger.services.settings` builds the settings object from what is read."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from agentledger.events.retention import parse_tenant_ages
from agentledger.services.errors import ConfigError

ENV: dict[str, tuple[str, type]] = {
    "REDIS_URL": ("redis_url", str),
    "AGENTLEDGER_PROBE_URL": ("probe_url", str),
    "AGENTLEDGER_PREFIX": ("prefix", str),
    "AGENTLEDGER_SHARDS": ("shards", int),
    "AGENTLEDGER_INBOX_PARTITIONS": ("inbox_partitions", int),
    "AGENTLEDGER_LOCK_PARTITIONS": ("lock_partitions", int),
    "AGENTLEDGER_MEMBER_TTL_S": ("member_ttl_s", float),
    "AGENTLEDGER_OUTCOME_RETRY_S": ("outcome_retry_s", float),
    "AGENTLEDGER_INBOX_MAX_BYTES": ("inbox_max_bytes", int),
    "AGENTLEDGER_LEASE_S": ("lease_s", float),
    "AGENTLEDGER_SWEEP_INTERVAL_S": ("sweep_interval_s", float),
    "AGENTLEDGER_LOCK_LEASE_S": ("lock_lease_s", float),
    "AGENTLEDGER_LEDGER_KEEP_S": ("ledger_keep_s", float),
    "AGENTLEDGER_MODEL_LEASE_S": ("model_lease_s", float),
    "AGENTLEDGER_MODEL_MAX_ATTEMPTS": ("model_max_attempts", int),
    "AGENTLEDGER_MODEL_RETRY_S": ("model_retry_s", float),
    "AGENTLEDGER_ACCEPTANCE_LEASE_S": ("acceptance_lease_s", float),
    "AGENTLEDGER_WORKER_THREADS": ("worker_threads", int),
    "AGENTLEDGER_CARRY_S": ("carry_s", float),
    "AGENTLEDGER_CARRY_SHARED_S": ("carry_shared_s", float),
    "AGENTLEDGER_BROKER_CLAIM_IDLE_S": ("broker_claim_idle_s", float),
    "AGENTLEDGER_BROKER_MAX_DELIVERIES": ("broker_max_deliveries", int),
    "AGENTLEDGER_STATE_DIR": ("state_dir", str),
    "AGENTLEDGER_SNAPSHOT_DIR": ("snapshot_dir", str),
    "AGENTLEDGER_SNAPSHOT_FILE_MAX_BYTES": ("snapshot_file_max_bytes", int),
    "AGENTLEDGER_SNAPSHOT_MAX_BYTES": ("snapshot_max_bytes", int),
    "AGENTLEDGER_SNAPSHOT_KEEP_S": ("snapshot_keep_s", float),
    "ANTHROPIC_API_KEY": ("anthropic_api_key", str),
    "ANTHROPIC_BASE_URL": ("anthropic_base_url", str),
    # models beyond Claude (issue 35): the endpoints and credential variables a spec may name
    "AGENTLEDGER_MODEL_ENDPOINTS": ("model_endpoints", str),
    "AGENTLEDGER_MODEL_KEY_VARS": ("model_key_vars", str),
    "AGENTLEDGER_PRICES_FILE": ("prices_file", str),
    "AGENTLEDGER_SANDBOX": ("sandbox", str),
    "AGENTLEDGER_SANDBOX_CPU_S": ("sandbox_cpu_s", int),
    "AGENTLEDGER_SANDBOX_MEMORY_MB": ("sandbox_memory_mb", int),
    "AGENTLEDGER_SANDBOX_FILE_MB": ("sandbox_file_mb", int),
    "AGENTLEDGER_SANDBOX_PROCESSES": ("sandbox_processes", int),
    "AGENTLEDGER_SANDBOX_ENV": ("sandbox_env", str),
    # the sandbox (issue 32, wt/sandbox)
    "AGENTLEDGER_SANDBOX_UID": ("sandbox_uid", int),
    "AGENTLEDGER_SANDBOX_GID": ("sandbox_gid", int),
    "AGENTLEDGER_SANDBOX_TMP_MB": ("sandbox_tmp_mb", int),
    "AGENTLEDGER_SANDBOX_SCAN_MAX": ("sandbox_scan_max", int),
    "AGENTLEDGER_PUBLISHERS": ("publishers_file", str),
    "PROMETHEUS_MULTIPROC_DIR": ("metrics_dir", str),
    "AGENTLEDGER_REPLICA_ACKS": ("replica_acks", int),
    # workspaces (issue 31.1); the roots are absolute folders separated by ':' or ','
    "AGENTLEDGER_WORKSPACE_ROOTS": ("workspace_roots", str),
    "AGENTLEDGER_WORKSPACE_MAX_BYTES": ("workspace_max_bytes", int),
    "AGENTLEDGER_WORKSPACE_MAX_FILES": ("workspace_max_files", int),
    # bounds
    "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S": ("max_command_timeout_s", float),
    "AGENTLEDGER_MAX_TOOL_TIMEOUT_S": ("max_tool_timeout_s", float),
    "AGENTLEDGER_MAX_MCP_TIMEOUT_S": ("max_mcp_timeout_s", float),
    "AGENTLEDGER_MODEL_THREADS": ("model_threads", int),
    "AGENTLEDGER_TOOLS_THREADS": ("tools_threads", int),
    "AGENTLEDGER_ACCEPT_THREADS": ("accept_threads", int),
    "AGENTLEDGER_TENANT_SHARE": ("tenant_share", str),
    "AGENTLEDGER_READ_AHEAD": ("read_ahead", int),
    "AGENTLEDGER_TENANT_SPARE": ("tenant_spare", str),
    # replays (issue 31.4)
    "AGENTLEDGER_REPLAY_WINDOW_S": ("replay_window_s", float),
    # identity and the web view (issue 31.6, 31.7)
    "AGENTLEDGER_UI_TOKEN": ("ui_token", str),
    "AGENTLEDGER_UI_ALLOW_HOSTS": ("ui_allow_hosts", str),
    # intake (issue 31.2/31.3)
    "AGENTLEDGER_REJECTED_MAXLEN": ("rejected_maxlen", int),
    # sizes (issue 32.7)
    "AGENTLEDGER_EVENT_MAX_BYTES": ("event_max_bytes", int),
    "AGENTLEDGER_STATE_CACHE_MAX_BYTES": ("state_cache_max_bytes", int),
    "AGENTLEDGER_MALLOC_ARENAS": ("malloc_arenas", int),
    # retention (issue 36.1)
    "AGENTLEDGER_RETENTION_S": ("retention_s", float),
    "AGENTLEDGER_RETENTION_TENANTS": ("retention_tenants", str),
    "AGENTLEDGER_LIMITS": ("limits", str),
    "AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT": ("max_live_runs_per_tenant", str),
    "AGENTLEDGER_ARCHIVE_URL": ("archive_url", str),
    "AGENTLEDGER_ARCHIVE_INTERVAL_S": ("archive_interval_s", float),
}
# One line per variable of ENV: what it sets (docs/reference/environment.md is made from
# this, `make docs`; a unit test fails when a variable has none). Defaults come from Settings.
ENV_HELP: dict[str, str] = {
    "REDIS_URL": "the Redis (or any node of a Redis Cluster) to use; it must answer, else exit 10",
    "AGENTLEDGER_PROBE_URL": "tried when REDIS_URL is unset, used when it answers; `off` never tries it",
    "AGENTLEDGER_PREFIX": "the key prefix of every key of this deployment (tests use their own)",
    "AGENTLEDGER_SHARDS": "new runs are spread over this many shards; a run's shard is in its id (`r-<hex>.s3`), so raising it later never moves a run (every reader covers the largest count this Redis has seen)",
    "AGENTLEDGER_INBOX_PARTITIONS": "inbox partitions (`<prefix>:{in<N>}:inbox:<publisher>`); a request goes to one by a hash of its id",
    "AGENTLEDGER_LOCK_PARTITIONS": "partitions of the lock table; unset: the count recorded in `<prefix>:meta`, else 1 on one Redis and 8 on a cluster. Fixed per deployment: another count refuses to start (exit 2)",
    "AGENTLEDGER_MEMBER_TTL_S": "a worker silent this long is gone: its shards and pool membership move to the others",
    "AGENTLEDGER_OUTCOME_RETRY_S": "how long a worker holding an outcome (a tool's result, its claim, its operation key, a model reply, acceptance results) keeps trying to record it across a Redis outage, with back-off; 0 never retries",
    "AGENTLEDGER_INBOX_MAX_BYTES": "a bigger inbox message (or spec file) is rejected unread (`size limit`)",
    "AGENTLEDGER_LEASE_S": "a live run without progress this long is re-driven by the sweeper, from its log (claims still within their deadline are left alone)",
    "AGENTLEDGER_SWEEP_INTERVAL_S": "how often the sweeper looks (a run it looked at is looked at again after the lease, or at its next deadline)",
    "AGENTLEDGER_LOCK_LEASE_S": "a lock holder that stops renewing loses its locks after this",
    "AGENTLEDGER_LEDGER_KEEP_S": "how long a done operation key is remembered and replayed; 0 keeps it forever",
    "AGENTLEDGER_MODEL_LEASE_S": "the claim lease of one anthropic model request (another worker may ask again after it); the scripted model uses its longest delay + 1 s",
    "AGENTLEDGER_MODEL_MAX_ATTEMPTS": "model requests per turn before the run fails with the cause (connection refused, overloaded…); an error retrying cannot help (401, 403, 400) fails it at once",
    "AGENTLEDGER_MODEL_RETRY_S": "no model request of a turn starts later than this after the turn's first attempt",
    "AGENTLEDGER_ACCEPTANCE_LEASE_S": "unused: an acceptance claim lasts its checks' timeouts plus AGENTLEDGER_LEASE_S",
    "AGENTLEDGER_WORKER_THREADS": "worker threads per process (`--threads`), split among the pools it serves",
    "AGENTLEDGER_CARRY_S": "how long one delivery may carry its run on into the next step a pool of this process serves, with no message; 0: every step goes through its queue",
    "AGENTLEDGER_CARRY_SHARED_S": "how long a worker thread carries one run before it hands its turn on to another run that waits (round-robin; no message, no append); 0: after every step",
    "AGENTLEDGER_BROKER_CLAIM_IDLE_S": "a delivered message idle this long (its worker died) goes to another worker",
    "AGENTLEDGER_BROKER_MAX_DELIVERIES": "deliveries (kills included) before a message is dead-lettered",
    "AGENTLEDGER_STATE_DIR": "the per-user state folder: the local Redis service's data, workspace copies, publishers file, last internal error (default $XDG_STATE_HOME/agentledger, else ~/.local/state/agentledger)",
    "ANTHROPIC_API_KEY": "for `model: anthropic`; always secret",
    "ANTHROPIC_BASE_URL": "for `model: anthropic`: another endpoint than the SDK's default",
    "AGENTLEDGER_MODEL_ENDPOINTS": "base URLs (comma-separated) a run spec's model may name as its `base_url` (an OpenAI-compatible server: vLLM, Ollama, a LiteLLM proxy); a spec naming another is refused",
    "AGENTLEDGER_PRICES_FILE": "a YAML file of model prices (model id or id prefix: {input, output, cache_read, …} in $ per million tokens) for models the built-in table lacks or prices otherwise; a run's spec is given its model's price when it names none",
    "AGENTLEDGER_MODEL_KEY_VARS": "names (comma-separated) of worker variables a run spec's model may name as its `api_key_env`; their values are secret",
    "AGENTLEDGER_SANDBOX": "`on`: commands run under bubblewrap; `off`: as the worker, unconfined, with its rights (only the environment stays minimal)",
    "AGENTLEDGER_SANDBOX_CPU_S": "CPU seconds per process of a sandboxed command (SIGXCPU, then SIGKILL a second later)",
    "AGENTLEDGER_SANDBOX_MEMORY_MB": "address space per process of a sandboxed command",
    "AGENTLEDGER_SANDBOX_FILE_MB": "the largest file a sandboxed command may write",
    "AGENTLEDGER_SANDBOX_PROCESSES": "processes of one command, its whole tree; at the limit the command is stopped",
    "AGENTLEDGER_SANDBOX_ENV": "names (comma-separated) of worker variables passed into every sandboxed command; none by default",
    "AGENTLEDGER_SANDBOX_UID": "the host uid a root worker's commands run as (never 0)",
    "AGENTLEDGER_SANDBOX_GID": "the host gid a root worker's commands run as (never 0)",
    "AGENTLEDGER_SANDBOX_TMP_MB": "the size of a command's /tmp, and of its /dev/shm",
    "AGENTLEDGER_SANDBOX_SCAN_MAX": "entries of a workspace looked at before a command; a bigger workspace is refused",
    "AGENTLEDGER_PUBLISHERS": "the publishers file: who may publish to the inbox, with which key, and what each may ask for (default <state folder>/publishers.yaml)",
    "PROMETHEUS_MULTIPROC_DIR": "prometheus_client's multiprocess folder (`--processes N`); unset: a fresh temporary one",
    "AGENTLEDGER_REPLICA_ACKS": "appends, ledger writes and lock-table changes wait (WAIT) until this many replicas hold them",
    "AGENTLEDGER_WORKSPACE_ROOTS": "absolute folders (`:` or `,` between) every publisher's runs may ask for a workspace inside",
    "AGENTLEDGER_WORKSPACE_MAX_BYTES": "the most bytes the intake copies for one run's workspace",
    "AGENTLEDGER_WORKSPACE_MAX_FILES": "the most entries (files, links, folders) the intake copies for one run's workspace",
    "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S": "the operator's maximum for an acceptance `command:` check's timeout_s",
    "AGENTLEDGER_MAX_TOOL_TIMEOUT_S": "the operator's maximum for a tool call's timeout (the tool's, the spec's tool_timeout_s)",
    "AGENTLEDGER_MAX_MCP_TIMEOUT_S": "the operator's maximum for an MCP tool call's timeout (the servers file's timeout_s)",
    "AGENTLEDGER_MODEL_THREADS": "the model pool's thread budget; unset: its share of the worker threads",
    "AGENTLEDGER_TOOLS_THREADS": "the tools pool's thread budget; unset: its share of the worker threads",
    "AGENTLEDGER_ACCEPT_THREADS": "the acceptance pool's thread budget; unset: a quarter of the worker threads",
    "AGENTLEDGER_READ_AHEAD": "the messages a pool with every slot of a process taken reads ahead (1–4,096), so a slot given back goes to the message whose tenant, then run, was served least recently, not to the next in the stream: one tenant's backlog of slow steps holds another tenant's message behind the steps running, not the backlog. What is read ahead waits in that process (kept alive; another process takes it over if it dies). Default 16",
    "AGENTLEDGER_TENANT_SPARE": "the pools (`model,tools,accept`) given one spare slot, and thread, in each process: taken only when every other slot of the pool is, and only for a step of a tenant with nothing of that pool running in the process — so a lone tenant keeps the pool's whole budget and another tenant's first step starts at once, behind however slow a backlog. Default `model` (the slow turns); `none`: no spare slot",
    "AGENTLEDGER_TENANT_SHARE": "the pools (`model,tools,accept`) in which one tenant holds at most all but one of a process's slots, so another tenant's step always finds one (a delivery past its tenant's share is let go and re-driven after a lease); `accept` counts only acceptances whose checks run code. Default `accept`",
    "AGENTLEDGER_REPLAY_WINDOW_S": "an inbox message issued further than this from the intake's clock (either side) is refused; nonces are kept twice as long",
    "AGENTLEDGER_UI_TOKEN": "the web view's sign-in token (at least 32 characters); unset: <state folder>/ui-token, made on first start",
    "AGENTLEDGER_UI_ALLOW_HOSTS": "Host names (comma-separated) the web view answers to besides loopback and its own address",
    "AGENTLEDGER_REJECTED_MAXLEN": "entries each partition's rejected stream keeps (each a digest of at most 4 kB)",
    "AGENTLEDGER_EVENT_MAX_BYTES": "the largest stored event (at least 131072); a tool-made field past it keeps a head, the rest in overflow pages",
    "AGENTLEDGER_STATE_CACHE_MAX_BYTES": "the folded run states a worker keeps, in estimated bytes (at least 1 MiB)",
    "AGENTLEDGER_MALLOC_ARENAS": "glibc allocator arenas of a worker (0: glibc's default; MALLOC_ARENA_MAX in the environment wins)",
    "AGENTLEDGER_RETENTION_S": "a finished run leaves Redis for the archive this many seconds after it ended (the sweepers, and `agentledger archive`); every read command still reads it",
    "AGENTLEDGER_LIMITS": "the operator's concurrency limits, `KEY=MAX,…` (a key or a key template: `svc:payments=10,tenant:{tenant}:payments=2`); they take precedence over what tools declare",
    "AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT": "the most live runs one tenant may have on a task queue, `QUEUE=N,…` (e.g. `default=20`; the settings form of `queues: {NAME: {max_live_runs_per_tenant: N}}`): a run past it is created and held (status `held`, its place in `status`), started when one of that tenant's live runs on the queue ends, first come first. Default: no cap",
    "AGENTLEDGER_RETENTION_TENANTS": "tenants' own retention ages, `tenant=age,…` (age: seconds or 30m, 12h, 7d, 2w); the others keep AGENTLEDGER_RETENTION_S",
    "AGENTLEDGER_ARCHIVE_URL": "the cold store finished runs are archived to: a folder (default `<state folder>/archive`), or any fsspec URL (s3://…, gs://…, az://…) with `agentledger[archive]` and its plugin installed; `off`: runs stay in Redis",
    "AGENTLEDGER_SNAPSHOT_DIR": "the folder workspace snapshots keep their trees and blobs in, each content once (default `<state folder>/snapshots`; `off`: no snapshots); `agentledger diff` and `checkout` read it, so workers and the CLI name the same folder",
    "AGENTLEDGER_SNAPSHOT_FILE_MAX_BYTES": "a workspace file larger than this is left out of snapshots (recorded as left out, with a note on the call)",
    "AGENTLEDGER_SNAPSHOT_MAX_BYTES": "the most file bytes one snapshot keeps; files past it are left out (recorded, with a note on the call)",
    "AGENTLEDGER_SNAPSHOT_KEEP_S": "a finished run's workspace snapshots are collected by `agentledger gc` this many seconds after it ended (its log stays; `diff` then says they are gone); 0: kept as long as the run",
    "AGENTLEDGER_ARCHIVE_INTERVAL_S": "how often a sweeper archives the finished runs past their retention age (and trims the feeds to that age)",
}
# Variables read outside ENV (not settings of their own), for the same reference page.
ENV_ALSO: dict[str, str] = {
    "AGENTLEDGER_SECRETS": "names (comma-separated) of more variables whose values are secret, for every run",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "set (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): `workers` and `run` send each run's spans over OTLP/HTTP; the exporter reads the other OTEL_* variables itself",
    "OTEL_SDK_DISABLED": "`true` switches trace export off (so does OTEL_TRACES_EXPORTER=none)",
    "OTEL_SERVICE_NAME": "the traces' `service.name` (also from OTEL_RESOURCE_ATTRIBUTES, read by the OpenTelemetry SDK); `agentledger` when neither names one",
    "XDG_STATE_HOME": "where the default state folder lives ($XDG_STATE_HOME/agentledger)",
    "MALLOC_ARENA_MAX": "when set, wins over AGENTLEDGER_MALLOC_ARENAS",
    "LOGNAME": "who a control says it is from when `--by` is not given (as getpass finds the user name)",
}
# numbers that must be positive (> 0) or at least zero, by variable
POSITIVE = (
    "AGENTLEDGER_SHARDS", "AGENTLEDGER_INBOX_PARTITIONS", "AGENTLEDGER_MEMBER_TTL_S",
    "AGENTLEDGER_INBOX_MAX_BYTES", "AGENTLEDGER_LEASE_S", "AGENTLEDGER_SWEEP_INTERVAL_S",
    "AGENTLEDGER_LOCK_LEASE_S", "AGENTLEDGER_MODEL_LEASE_S", "AGENTLEDGER_ACCEPTANCE_LEASE_S",
    "AGENTLEDGER_MODEL_MAX_ATTEMPTS", "AGENTLEDGER_MODEL_RETRY_S",
    "AGENTLEDGER_WORKER_THREADS", "AGENTLEDGER_BROKER_CLAIM_IDLE_S",
    "AGENTLEDGER_BROKER_MAX_DELIVERIES",
    "AGENTLEDGER_WORKSPACE_MAX_BYTES", "AGENTLEDGER_WORKSPACE_MAX_FILES",
    # bounds
    "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S", "AGENTLEDGER_MAX_TOOL_TIMEOUT_S",
    "AGENTLEDGER_MAX_MCP_TIMEOUT_S", "AGENTLEDGER_MODEL_THREADS", "AGENTLEDGER_TOOLS_THREADS",
    "AGENTLEDGER_ACCEPT_THREADS",
    "AGENTLEDGER_BROKER_MAX_DELIVERIES", "AGENTLEDGER_REPLAY_WINDOW_S",
    "AGENTLEDGER_BROKER_MAX_DELIVERIES", "AGENTLEDGER_REJECTED_MAXLEN",
    "AGENTLEDGER_ARCHIVE_INTERVAL_S", "AGENTLEDGER_SNAPSHOT_FILE_MAX_BYTES",
    "AGENTLEDGER_SNAPSHOT_MAX_BYTES",
)  # fmt: skip
NOT_NEGATIVE = (
    "AGENTLEDGER_LEDGER_KEEP_S", "AGENTLEDGER_OUTCOME_RETRY_S", "AGENTLEDGER_REPLICA_ACKS",
    "AGENTLEDGER_CARRY_S", "AGENTLEDGER_MALLOC_ARENAS", "AGENTLEDGER_RETENTION_S",
    "AGENTLEDGER_CARRY_SHARED_S", "AGENTLEDGER_SNAPSHOT_KEEP_S",
)  # fmt: skip
_KIND = {int: "a whole number", float: "a number", str: "text"}


def read_values(env: Mapping[str, str]) -> dict[str, object]:
    """The set variables of `ENV`, each as its field's kind, by field name (an empty
    value is the same as unset); ConfigError naming the first bad one."""
    values: dict[str, object] = {}
    for var, (name, kind) in ENV.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        try:
            values[name] = kind(raw.strip())
        except ValueError:
            raise ConfigError(var, f"expected {_KIND[kind]}, got {raw!r}") from None
    _check_numbers(values)
    return values


def _check_numbers(values: Mapping[str, object]) -> None:
    for var in (*POSITIVE, *NOT_NEGATIVE):
        value = values.get(ENV[var][0])
        if not isinstance(value, int | float):
            continue
        if value != value or value in (float("inf"), float("-inf")):  # nan, inf
            raise ConfigError(var, f"expected a finite number, got {value!r}")
        if var in POSITIVE and value <= 0:
            raise ConfigError(var, f"must be more than 0, got {value!r}")
        if value < 0:
            raise ConfigError(var, f"must not be negative, got {value!r}")


def workspace_roots(text: str) -> tuple[str, ...]:
    """AGENTLEDGER_WORKSPACE_ROOTS as folders: absolute, separated by ':' or ','."""
    roots = [r.strip() for r in text.replace(",", ":").split(":") if r.strip()]
    for root in roots:
        if not os.path.isabs(root) or "\x00" in root:
            raise ConfigError(
                "AGENTLEDGER_WORKSPACE_ROOTS", f"{root!r} is not an absolute folder (e.g. /srv/ws)"
            )
    return tuple(dict.fromkeys(os.path.normpath(r) for r in roots))


def model_endpoints(text: str) -> tuple[str, ...]:
    """AGENTLEDGER_MODEL_ENDPOINTS as base URLs: http(s)://host[:port][/path], separated
    by ',' or spaces, without a trailing '/'."""
    urls = [u.strip().rstrip("/") for u in text.replace(",", " ").split() if u.strip()]
    for url in urls:
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 -- raises on a port that is not a number
        except ValueError:
            parts = parts._replace(netloc="")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise ConfigError(
                "AGENTLEDGER_MODEL_ENDPOINTS", f"{url!r} is not http(s)://host[:port][/path]"
            )
    return tuple(dict.fromkeys(urls))


def otlp_traces_wanted(env: Mapping[str, str]) -> bool:
    """The standard OpenTelemetry variables name an OTLP endpoint and do not switch traces off."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    off = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return (
        bool(endpoint and endpoint.strip())
        and not off
        and env.get("OTEL_TRACES_EXPORTER", "otlp").strip() != "none"
    )


def trace_service(env: Mapping[str, str]) -> str:
    """The service a run's spans are named by: OTEL_SERVICE_NAME, else the `service.name`
    of OTEL_RESOURCE_ATTRIBUTES (comma-separated key=value, values percent-encoded), as the
    OpenTelemetry SDK reads them; `agentledger` when neither names one."""
    if name := env.get("OTEL_SERVICE_NAME", "").strip():
        return name
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, _, value = pair.partition("=")
        if key.strip() == "service.name" and unquote(value.strip()):
            return unquote(value.strip())
    return "agentledger"


def parse_tables(values: dict[str, object]) -> None:
    """The variables that are lists of `NAME=VALUE`. The limits' parsers are imported
    here, not at the top: they import pydantic (the limits' schema), and the sandbox's
    modules, which import the settings, run under a python that may lack it; and only when
    set (the CLI reads the settings before it imports the models: `cli.main`)."""
    if "retention_tenants" in values:
        try:
            values["retention_tenants"] = parse_tenant_ages(str(values["retention_tenants"]))
        except ValueError as exc:
            raise ConfigError("AGENTLEDGER_RETENTION_TENANTS", str(exc)) from None
    if "limits" in values:
        from agentledger.events.limits import parse_operator_limits

        try:
            values["limits"] = tuple(parse_operator_limits(str(values["limits"])).items())
        except ValueError as exc:
            raise ConfigError("AGENTLEDGER_LIMITS", str(exc)) from None
    if "max_live_runs_per_tenant" in values:
        from agentledger.events.run_caps import parse_queue_caps

        try:
            caps = parse_queue_caps(str(values["max_live_runs_per_tenant"]))
        except ValueError as exc:
            raise ConfigError("AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT", str(exc)) from None
        values["max_live_runs_per_tenant"] = tuple(caps.items())

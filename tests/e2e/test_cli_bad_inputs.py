"""Exit 70 only for our bugs: a scripted list of bad inputs a user can give the
CLI, each answered with one line naming what is wrong and the exit code
`exit_codes` documents for it — never a traceback, never exit 70.

Each case is argv (with placeholders the module's world fills in: a run that
ended, a request still in the inbox, servers that are not Redis), and
optionally an environment, standard input and files in the working folder;
the exit code it must end with (None: only "not 70, no traceback", for a bound
another change owns) and a phrase its error line must hold. With `--json`
among the arguments, stdout must be one JSON object naming the error. The last
test prints the tally."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socketserver
import ssl
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from e2ekit import AGENTLEDGER, Cli, copy_example

from agentledger.services.adapters.redis.local_server import free_port, start_server
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.settings_env import ENV as SETTINGS

USAGE, STILL_LIVE, NO_REDIS = exit_codes.USAGE, exit_codes.STILL_LIVE, exit_codes.NO_REDIS
DOCUMENTED = {
    v
    for k, v in vars(exit_codes).items()
    if k.isupper() and isinstance(v, int) and v != exit_codes.BUG
}
CASE_TIMEOUT_S = 45.0
PASSWORD = "s3cret-pw"  # of the password-protected Redis: never in any output
SPEC = b"task: t\nprincipal: {id: a, tenant: t}\nmodel: {scripted: [{end_turn: ok}]}\n"


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int | None  # None: only "not 70, no traceback" (a bound another change decides)
    says: str = ""  # a phrase the error line holds
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset it
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # written into the working folder
    world: bool = False  # it reaches a Redis: the module's (else it ends before any)

    @property
    def in_world(self) -> bool:
        """It runs in the module's world: flagged, or naming one of its places."""
        texts = [*self.argv, *(v for v in self.env.values() if v is not None)]
        return self.world or any("{" + key + "}" in t for key in WORLD_KEYS for t in texts)


def case(name: str, *argv: str, code: int | None, says: str = "", **more: object) -> Case:
    return Case(name, argv, code, says, **more)  # type: ignore[arg-type]


# --- malformed and unknown run ids, for every command that takes one ------------------

RUN_COMMANDS: dict[str, tuple[str, ...]] = {  # the command, with RUN where the id goes
    "status": ("status", "RUN"),
    "replay": ("replay", "RUN"),
    "context": ("context", "RUN", "--turn", "1"),
    "trace": ("trace", "RUN"),
    "raw": ("raw", "RUN"),
    "tail": ("tail", "--run", "RUN"),
    "cancel": ("cancel", "RUN"),
    "approve": ("approve", "RUN", "c17"),
    "deny": ("deny", "RUN", "c17"),
    "reply": ("reply", "RUN", "go on"),
    "resume": ("resume", "RUN"),
    "abort": ("abort", "RUN"),
}
CONTROLS = ("cancel", "approve", "deny", "reply", "resume", "abort")
BAD_IDS = {
    "traversal": "r-../../etc",
    "300-chars": "r-" + "x" * 298,
    "empty": "",
    "unicode": "r-ünï",
    "newline": "r-1\n",
    "slash": "r/1",
}


def with_id(command: str, run_id: str) -> tuple[str, ...]:
    return tuple(run_id if a == "RUN" else a for a in RUN_COMMANDS[command])


ID_CASES = [
    case(f"{command}-id-{label}", *with_id(command, bad), code=USAGE, says="is not a run id")
    for command in RUN_COMMANDS
    for label, bad in BAD_IDS.items()
    if label in ("traversal", "300-chars") or command in ("status", "cancel", "approve", "reply")
]
UNKNOWN_CASES = [
    case(
        f"{command}-unknown-run",
        *with_id(command, "r-nope"),
        code=USAGE,
        says="no run 'r-nope'",
        world=True,
    )
    for command in RUN_COMMANDS
]
ENDED_CASES = [
    case(f"{command}-ended-run", *with_id(command, "{ended}"), code=USAGE,
         says="already ended completed")
    for command in CONTROLS
]  # fmt: skip
CONTROL_CASES = [
    case("approve-empty-call", "approve", "r-1", "", code=USAGE, says="is not a call id"),
    case("deny-call-with-space", "deny", "r-1", "c 17", code=USAGE, says="is not a call id"),
    case("approve-300-char-call", "approve", "r-1", "c" * 300, code=USAGE, says="is not a call id"),
    case("reply-empty-text", "reply", "r-1", "", code=USAGE, says="a reply needs some text"),
    case("reply-blank-text", "reply", "r-1", "   ", code=USAGE, says="a reply needs some text"),
    case("reply-no-text", "reply", "r-1", code=USAGE, says="required: text"),
]

# --- a request still in the inbox ---------------------------------------------------

WAITING_CASES = [
    case("status-of-a-request-in-the-inbox", "status", "{waiting}", code=STILL_LIVE,
         says="waiting for the intake"),
    case("status-json-of-a-request-in-the-inbox", "status", "--json", "{waiting}", code=STILL_LIVE,
         says="waiting for the intake"),
    case("cancel-of-a-request-in-the-inbox", "cancel", "--as", "e2e", "{waiting}", code=USAGE,
         says="its request waits in the inbox for the intake"),
]  # fmt: skip

# --- flags' bad values ------------------------------------------------------------------

HUGE = "99999999999999999999"
FLAG_CASES = [
    case("runs-limit-negative", "runs", "--limit", "-1", code=USAGE, says="must not be negative"),
    case("runs-limit-word", "runs", "--limit", "many", code=USAGE, says="expected a whole number"),
    case("runs-limit-fraction", "runs", "--limit", "1.5", code=USAGE, says="expected a whole number"),
    case("runs-limit-zero", "runs", "--limit", "0", code=USAGE, says="--limit: must be at least 1", world=True),
    case("runs-limit-huge", "runs", "--limit", HUGE, code=USAGE, says="too large"),
    case("runs-since-words", "runs", "--since", "last tuesday", code=USAGE, says="as a time", world=True),
    case("runs-status-unknown", "runs", "--status", "finished", code=USAGE, says="no status 'finished'", world=True),
    case("runs-page-junk", "runs", "--page", "next", code=USAGE, says="is not a page token", world=True),
    case("tail-type-unknown", "tail", "--type", "Nope", code=USAGE, says="no event type 'Nope'", world=True),
    case("raw-after-huge", "raw", "r-1", "--after", HUGE, code=USAGE, says="too large"),
    case("raw-after-negative", "raw", "r-1", "--after", "-1", code=USAGE, says="must not be negative"),
    case("context-turn-word", "context", "r-1", "--turn", "one", code=USAGE,
         says="expected a whole number"),
    case("context-turn-huge", "context", "r-1", "--turn", HUGE, code=USAGE, says="too large"),
    case("context-turn-absent", "context", "{ended}", "--turn", "99", code=USAGE,
         says="has no model request for turn 99"),
    case("context-attempt-negative", "context", "r-1", "--turn", "1", "--attempt", "-2",
         code=USAGE, says="must not be negative"),
    case("workers-threads-zero", "workers", "--threads", "0", code=USAGE, says="must be at least 1"),
    case("workers-threads-huge", "workers", "--threads", HUGE, code=USAGE, says="too large"),
    case("run-threads-many", "run", "--threads", "100000", "spec.yaml", code=USAGE,
         says="at most 256 threads"),
    case("workers-processes-word", "workers", "--processes", "two", code=USAGE,
         says="expected a whole number"),
    case("run-processes-negative", "run", "--processes", "-1", "spec.yaml", code=USAGE,
         says="must not be negative"),
    # the bound of --processes is another change's (issue 33.5): here only "not 70, no traceback"
    # (refused by that bound, or else by the Redis it names, before any process is started)
    case("workers-processes-40", "workers", "--processes", "40", code=None, env={"REDIS_URL": "{closed}"}),
    case("workers-pools-unknown", "workers", "--pools", "gpu", code=USAGE, says="the pools are"),
    case("workers-pools-intake-and-more", "workers", "--pools", "intake,model", code=USAGE,
         says="intake runs alone"),
    case("submit-queue-traversal", "submit", "--queue", "../x", "spec.yaml", code=USAGE,
         says="a queue name is"),
    case("ui-port-too-big", "ui", "--port", "70000", code=USAGE, says="a port is at most 65535"),
    case("ui-port-negative", "ui", "--port", "-1", code=USAGE, says="must not be negative"),
    case("ui-allow-host-with-path", "ui", "--allow-host", "a/b", code=USAGE, says="is not a host name"),
    case("intake-metrics-port-word", "intake", "--metrics-port", "http", code=USAGE,
         says="expected a whole number"),
    case("log-level-unknown", "--log-level", "loud", "runs", code=USAGE, says="invalid choice: 'loud'"),
    case("publishers-add-bad-name", "publishers", "add", "a b", "--principal", "x@y", code=USAGE,
         says="a publisher name is"),
    case("publishers-add-bad-principal", "publishers", "add", "p9", "--principal", "nobody",
         code=USAGE, says="is not ID@TENANT"),
    case("publishers-add-relative-workspace", "publishers", "add", "p9", "--principal", "a@b",
         "--workspaces", "ws", code=USAGE, says="is not an absolute folder"),
    case("dead-letters-redrive-junk", "dead-letters", "--redrive", "nope", code=USAGE,
         says="'nope' is not QUEUE:TOOLSET:POOL:SHARD:ENTRY", world=True),
    case("submit-as-unknown-publisher", "submit", "--as", "nobody", "spec.yaml", code=USAGE,
         says="no publisher 'nobody'", files={"spec.yaml": SPEC}, world=True),
    case("unknown-command", "frobnicate", code=USAGE, says="invalid choice: 'frobnicate'"),
]  # fmt: skip

# --- `--json` argument errors: one object on stdout ------------------------------------

JSON_CASES = [
    case("json-missing-run-id", "status", "--json", code=USAGE, says="required: run_id"),
    case("json-bad-limit", "runs", "--json", "--limit", "x", code=USAGE, says="expected a whole number"),
    case("json-unknown-command", "--json", "frobnicate", code=USAGE, says="invalid choice"),
    case("json-malformed-id", "cancel", "--json", "r-../../etc", code=USAGE, says="is not a run id"),
    case("json-empty-reply", "reply", "--json", "r-1", "", code=USAGE, says="a reply needs some text"),
    case("json-unknown-option", "runs", "--json", "--bogus", code=USAGE, says="unrecognized arguments"),
]  # fmt: skip

# --- spec files that are not specs ------------------------------------------------------

SPEC_CASES = [
    case("run-a-folder", "run", "afolder", code=USAGE, says="Is a directory",
         files={"afolder/x": b""}),
    case("run-dev-zero", "run", "/dev/zero", code=USAGE, says="larger than"),
    case("submit-dev-zero", "submit", "--as", "e2e", "/dev/zero", code=USAGE, says="larger than"),
    case("run-missing-file", "run", "no-such-spec.yaml", code=USAGE, says="No such file or directory"),
    case("run-unreadable-file", "run", "{unreadable}", code=USAGE, says="Permission denied"),
    case("run-symlink-loop", "run", "loop-a", code=USAGE, says="Too many levels of symbolic links",
         files={"@symlink loop-a": b"loop-b", "@symlink loop-b": b"loop-a"}),
    case("run-binary-file", "run", "spec.bin", code=USAGE, says="not a text file",
         files={"spec.bin": bytes(range(256)) * 4}),
    case("run-stdin-binary", "run", "-", code=USAGE, says="<stdin>: not a text file",
         stdin=b"\xff\xfe\x00garbage"),
    case("run-stdin-not-yaml", "run", "-", code=USAGE, says="<stdin>:2: not valid YAML",
         stdin=b"task: [\n"),
    case("run-stdin-empty", "run", "-", code=USAGE, says="got nothing", stdin=b""),
    case("submit-stdin-a-list", "submit", "--as", "e2e", "-", code=USAGE, says="got a list",
         stdin=b"[1, 2]\n"),
    case("run-stdin-too-large", "run", "-", code=USAGE, says="larger than",
         stdin=b"#" * (9 << 20)),
    case("run-spec-nul-in-command", "run", "nul.yaml", code=USAGE,
         says="a command cannot hold a NUL character",
         files={"nul.yaml": SPEC + b'acceptance: [{command: "true\\0x"}]\n'}),
    case("run-spec-nul-in-workspace", "run", "nul.yaml", code=USAGE, says="is not a folder",
         files={"nul.yaml": SPEC + b'workspace: "ws\\0x"\n'}),
    case("run-mcp-dev-zero", "run", "--mcp", "/dev/zero", "spec.yaml", code=USAGE,
         says="--mcp /dev/zero: larger than", files={"spec.yaml": SPEC}),
    case("run-spec-unknown-key", "run", "spec.yaml", code=USAGE, says="did you mean 'task'",
         files={"spec.yaml": SPEC.replace(b"task:", b"tsk:")}),
]  # fmt: skip

# --- REDIS_URL forms, and servers that are not Redis ------------------------------------

REDIS_CASES = [
    case("redis-url-garbage", "runs", code=USAGE, says="REDIS_URL: 'garbage' is not a Redis URL",
         env={"REDIS_URL": "garbage"}),
    case("redis-url-http-scheme", "runs", code=USAGE, says="is not a Redis URL",
         env={"REDIS_URL": "http://127.0.0.1:6379/0"}),
    case("redis-url-port-word", "runs", code=USAGE, says="the port is not a number",
         env={"REDIS_URL": "redis://127.0.0.1:sixty/0"}),
    case("redis-url-port-out-of-range", "runs", code=USAGE, says="the port is not a number",
         env={"REDIS_URL": "redis://127.0.0.1:99999/0"}),
    case("redis-url-port-zero", "runs", code=USAGE, says="port 0 is not a port",
         env={"REDIS_URL": "redis://127.0.0.1:0/0"}),
    case("redis-url-no-host", "runs", code=USAGE, says="names no host", env={"REDIS_URL": "redis://"}),
    case("redis-url-db-word", "runs", code=USAGE, says="the database 'zero' is not a number",
         env={"REDIS_URL": "redis://127.0.0.1:6379/zero"}),
    case("redis-url-closed-port", "runs", code=NO_REDIS, says="nothing answers at REDIS_URL",
         env={"REDIS_URL": "{closed}"}),
    case("redis-url-unix-missing", "cancel", "r-1", code=NO_REDIS, says="nothing answers at REDIS_URL",
         env={"REDIS_URL": "unix:///nonexistent/redis.sock"}),
    case("redis-url-http-server", "runs", code=NO_REDIS, says="is not a Redis server: an HTTP server",
         env={"REDIS_URL": "{http}"}),
    case("redis-url-http-server-status", "status", "r-1", code=NO_REDIS,
         says="is not a Redis server: an HTTP server", env={"REDIS_URL": "{http}"}),
    case("redis-url-http-server-cancel", "cancel", "r-1", code=NO_REDIS,
         says="is not a Redis server: an HTTP server", env={"REDIS_URL": "{http}"}),
    case("redis-url-http-server-password", "submit", "--as", "e2e", "spec.yaml", code=NO_REDIS,
         says="'redis://:***@127.0.0.1", env={"REDIS_URL": "{http_pw}"}, files={"spec.yaml": SPEC}),
    case("redis-url-echo-server", "runs", code=NO_REDIS, says="an echo", env={"REDIS_URL": "{echo}"}),
    case("redis-url-closes-at-once", "runs", code=NO_REDIS, says="closed the connection",
         env={"REDIS_URL": "{dropper}"}),
    case("redis-url-tls-port", "runs", code=NO_REDIS, says="is not a Redis server",
         env={"REDIS_URL": "{tls}"}),
    case("rediss-url-plain-redis", "runs", code=NO_REDIS, says="rediss:// speaks TLS",
         env={"REDIS_URL": "{rediss_plain}"}),
    case("redis-needs-a-password", "runs", code=NO_REDIS, says="requires a password",
         env={"REDIS_URL": "{auth_none}"}),
    case("redis-wrong-password", "runs", code=NO_REDIS, says="refused the login",
         env={"REDIS_URL": "{auth_wrong}"}),
    case("redis-unknown-acl-user", "status", "r-1", code=NO_REDIS, says="refused the login",
         env={"REDIS_URL": "{auth_bob}"}),
    case("redis-acl-user-without-rights", "runs", code=USAGE, says="the Redis user 'weak' may not do this",
         env={"REDIS_URL": "{auth_weak}"}),
    case("redis-database-absent", "runs", code=USAGE, says="the server refused it",
         env={"REDIS_URL": "{db99}"}),
    case("acl-apply-on-a-redis-before-7", "acl", "--apply", code=USAGE,
         says="the ACL rules need Redis 7 or later", env={"REDIS_URL": "{redis6}"}),
    case("probe-at-an-http-server", "cancel", "r-1", code=NO_REDIS,
         says="the local Redis service", env={"REDIS_URL": None, "AGENTLEDGER_PROBE_URL": "{http}"}),
]  # fmt: skip

# --- every numeric AGENTLEDGER_* setting given a word ----------------------------------

ENV_CASES = [
    case(f"env-{var}", "status", "r-1", code=USAGE,
         says=f"{var}: expected a {'whole ' if kind is int else ''}number", env={var: "lots"})
    for var, (_, kind) in SETTINGS.items()
    if kind in (int, float)
] + [
    case("env-lease-negative", "status", "r-1", code=USAGE, says="AGENTLEDGER_LEASE_S: must be more than 0",
         env={"AGENTLEDGER_LEASE_S": "-2"}),
    case("env-member-ttl-nan", "status", "r-1", code=USAGE, says="expected a finite number",
         env={"AGENTLEDGER_MEMBER_TTL_S": "nan"}),
    case("env-shards-too-many", "status", "r-1", code=USAGE, says="must be between 1 and 4096",
         env={"AGENTLEDGER_SHARDS": "100000"}),
    case("env-prefix-with-braces", "status", "r-1", code=USAGE, says="AGENTLEDGER_PREFIX",
         env={"AGENTLEDGER_PREFIX": "a{b}"}),
    case("env-state-dir-a-file", "status", "r-1", code=USAGE, says="is not a folder",
         env={"AGENTLEDGER_STATE_DIR": "/etc/passwd"}),
    case("env-publishers-dev-zero", "submit", "--as", "e2e", "spec.yaml", code=USAGE,
         says="AGENTLEDGER_PUBLISHERS: '/dev/zero': larger than",
         env={"AGENTLEDGER_PUBLISHERS": "/dev/zero"}, files={"spec.yaml": SPEC}, world=True),
]  # fmt: skip

CASES = [
    *ID_CASES, *UNKNOWN_CASES, *ENDED_CASES, *CONTROL_CASES, *WAITING_CASES, *FLAG_CASES,
    *JSON_CASES, *SPEC_CASES, *REDIS_CASES, *ENV_CASES,
]  # fmt: skip
RESULTS: dict[str, tuple[int, bool]] = {}  # case name -> (exit code, a traceback shown)
WORLD_KEYS = (  # the module world's places (`world`); {unreadable} is made by each case
    "ended", "waiting", "closed", "http", "http_pw", "echo", "dropper", "tls", "rediss_plain",
    "auth_none", "auth_wrong", "auth_bob", "auth_weak", "db99", "redis6",
)  # fmt: skip


# --- the world the cases run in -----------------------------------------------------------


@dataclass
class World:
    env: dict[str, str]
    values: dict[str, str | None]

    def fill(self, text: str) -> str:
        for key, value in self.values.items():
            if "{" + key + "}" in text:
                if value is None:
                    pytest.skip(f"{key} cannot be made on this machine")
                text = text.replace("{" + key + "}", value)
        return text


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


class _Dropper(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.close()


class _Quiet(http.server.BaseHTTPRequestHandler):  # answers every request with an error page
    def log_message(self, *_: object) -> None:
        pass


def serve(server: socketserver.BaseServer) -> str:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return f"redis://{host}:{port}/0"


def tls_server(folder: Path) -> socketserver.BaseServer | None:
    """A TLS server on loopback (a self-signed certificate from openssl), or None."""
    if shutil.which("openssl") is None:
        return None
    key, cert = folder / "key.pem", folder / "cert.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=localhost"], capture_output=True, timeout=60,
    )  # fmt: skip
    if made.returncode != 0:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    class Tls(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                with context.wrap_socket(self.request, server_side=True) as tls:
                    tls.recv(64)
            except (ssl.SSLError, OSError):
                pass  # a plain-text client: the handshake fails, as a real TLS port's does

    return socketserver.ThreadingTCPServer(("127.0.0.1", 0), Tls)


def unreadable(folder: Path) -> str | None:
    """A file this process cannot read: mode 000 (not for root, who reads it anyway),
    else a kernel setting only writable (root included)."""
    if os.geteuid() != 0:
        path = folder / "secret.yaml"
        path.write_bytes(SPEC)
        path.chmod(0)
        return str(path)
    drop_caches = "/proc/sys/vm/drop_caches"
    try:
        open(drop_caches, "rb").close()  # noqa: SIM115
    except PermissionError:
        return drop_caches
    except OSError:
        return None
    return None


def before_7(url: str) -> bool:
    """The server is a Redis before 7 (no ACL selectors)."""
    client = redis.Redis.from_url(url)
    try:
        return int(str(client.info("server")["redis_version"]).split(".")[0]) < 7
    finally:
        client.close()


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[World]:
    home = tmp_path_factory.mktemp("bad-inputs")
    main = start_server(home / "redis")
    guarded = start_server(home / "redis-auth")
    admin = redis.Redis.from_url(guarded.url)
    admin.execute_command("ACL", "SETUSER", "weak", "on", ">weakpw", "+ping")
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    servers: list[socketserver.BaseServer] = []

    def started(server: socketserver.BaseServer | None) -> str | None:
        if server is None:
            return None
        servers.append(server)
        return serve(server)

    try:
        cli = make_cli(home)
        cli.env["REDIS_URL"] = main.url
        copy_example("inventory", home)
        code, summary = cli.run_json(home / "inventory" / "spec.yaml")
        assert code == 0, summary
        publisher = cli.publisher("e2e")
        submitted = cli("submit", "--as", publisher, "--unserved", home / "inventory" / "spec.yaml")
        assert submitted.returncode == 0, submitted.stderr
        port = guarded.url.rsplit(":", 1)[1].split("/")[0]
        http_url = started(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet))
        assert http_url is not None
        values: dict[str, str | None] = {
            "ended": summary["run_id"],
            "waiting": submitted.stdout.strip(),
            "closed": f"redis://127.0.0.1:{free_port()}/0",
            "http": http_url,
            "http_pw": http_url.replace("redis://", f"redis://:{PASSWORD}@"),
            "echo": started(socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)),
            "dropper": started(socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Dropper)),
            "tls": started(tls_server(home)),
            "rediss_plain": main.url.replace("redis://", "rediss://"),
            "auth_none": guarded.url,
            "auth_wrong": f"redis://:wrong@127.0.0.1:{port}/0",
            "auth_bob": f"redis://bob:{PASSWORD}@127.0.0.1:{port}/0",
            "auth_weak": f"redis://weak:weakpw@127.0.0.1:{port}/0",
            "db99": main.url.rsplit("/", 1)[0] + "/99",
            "redis6": main.url if before_7(main.url) else None,
        }
        yield World(cli.env, values)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        main.stop()
        redis.Redis.from_url(guarded.url.replace("redis://", f"redis://:{PASSWORD}@")).shutdown(
            nosave=True
        )
        guarded.process.wait(timeout=10)


def run_case(world: World, c: Case, folder: Path) -> subprocess.CompletedProcess[bytes]:
    for name, content in c.files.items():
        if name.startswith("@symlink "):
            (folder / name.split(" ", 1)[1]).symlink_to(content.decode())
            continue
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    env = dict(world.env)
    for var, value in c.env.items():
        if value is None:
            env.pop(var, None)
        else:
            env[var] = world.fill(value)
    argv = [world.fill(a) for a in c.argv]
    return subprocess.run(
        [*AGENTLEDGER, *argv], cwd=folder, env=env, input=c.stdin if c.stdin is not None else b"",
        capture_output=True, timeout=CASE_TIMEOUT_S,
    )  # fmt: skip


def check(world: World, c: Case, done: subprocess.CompletedProcess[bytes]) -> None:
    """No traceback, not 70, the documented code, and one line of ours that says it."""
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    RESULTS[c.name] = (done.returncode, "Traceback" in out + err)
    assert "Traceback" not in out + err, err
    assert done.returncode != exit_codes.BUG, err
    assert PASSWORD not in out + err
    if c.code is None:
        return
    assert done.returncode == c.code, f"exit {done.returncode}, not {c.code}:\n{err}"
    assert c.code in DOCUMENTED
    says = world.fill(c.says)
    if "--json" in c.argv:
        answer = json.loads(out.strip().splitlines()[-1])  # one object on stdout
        if c.code == STILL_LIVE:
            assert answer["status"] == "awaiting_intake" and says in answer["detail"], answer
            return
        assert answer["error"] and says in answer["message"] and answer["exit_code"] == c.code, (
            answer
        )
        assert "usage:" not in err  # the usage text only without --json
    where = out if c.code == STILL_LIVE else err  # a state is printed on stdout, an error on stderr
    said = [line for line in where.splitlines() if says in line]
    assert said, f"no line says {says!r}:\n{out}\n{err}"
    assert said[0].startswith(("agentledger", "  ")), said[0]  # a line of ours, not a library's


WORLD_CASES = [c for c in CASES if c.in_world]
PLAIN_CASES = [c for c in CASES if not c.in_world]


@pytest.mark.parametrize("c", WORLD_CASES, ids=[c.name for c in WORLD_CASES])
def test_a_bad_input_reaching_redis_is_one_line_naming_it_and_a_documented_code(
    world: World, c: Case, tmp_path: Path
) -> None:
    check(world, c, run_case(world, c, tmp_path))


@pytest.mark.parametrize("c", PLAIN_CASES, ids=[c.name for c in PLAIN_CASES])
def test_a_bad_argument_setting_or_spec_is_one_line_naming_it_and_a_documented_code(
    cli: Cli, c: Case, tmp_path: Path
) -> None:
    """Refused before any Redis is used: by the parser, the settings, or the spec's reading."""
    plain = World(cli.env, {"unreadable": unreadable(tmp_path)})
    check(plain, c, run_case(plain, c, tmp_path))


def test_the_tally_of_bad_inputs_has_no_traceback_and_no_exit_70(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Last in the module: what the cases above came to (those this process ran:
    spread over workers, each prints its own)."""
    codes = Counter(code for code, _ in RESULTS.values())
    tracebacks = sum(shown for _, shown in RESULTS.values())
    with capsys.disabled():
        print(
            f"\nbad inputs: {len(CASES)} scripted, {len(RESULTS)} run through the CLI here; exit codes "
            + ", ".join(f"{code}: {n}" for code, n in sorted(codes.items()))
            + f"; tracebacks: {tracebacks}; exit 70: {codes[exit_codes.BUG]}"
        )
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)
    assert tracebacks == 0 and codes[exit_codes.BUG] == 0

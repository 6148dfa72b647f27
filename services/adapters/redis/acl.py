"""Redis ACL users for the roles of a deployment, each with only the keys and
commands it needs (under the key prefix of the deployment):

- **one user per publisher** (`<prefix>-pub-<name>`) — `XADD` to its own inbox
  streams (`<prefix>:{in*}:inbox:<name>`), nothing else: it cannot read them
  back, write another publisher's, touch a run's log or see any other key; a
  `MAXLEN 0`, an explicit maximal id or a flood hurts only its own streams;
- **intake** — the inbox streams, the rejected streams, request ids, the runs'
  keys (it appends their first events and the controls), the lock table (a
  control may release locks), its membership sets and the meta hash; reads the
  tool sets' manifests; no ledger, no pool membership;
- **workers** — the pools and the sweeper: the runs' keys and task-queue streams,
  the ledger, the lock table, the pools' membership, the meta hash and the tool
  sets' manifests; not the inbox (it reads the rejected streams' sizes, for
  metrics), not the intakes' membership; of the request ids only GET and DEL
  (a selector, also inside a script): the sweeper's retention takes an archived
  run's request key out of Redis, and may never write one;
- **scaler** — what KEDA's `redis-streams` scaler runs, and nothing else: `PING`
  and `INFO` (it connects, then reads the server's version), `XINFO GROUPS`
  (lagCount) and `XPENDING` (pendingEntriesCount) on the task-queue streams
  only (`<prefix>:{<shard>}:q:*`, read-only: it cannot read an entry, a run's
  log or any other key);
- **ops** — reads every key under the prefix, with read commands only: no
  write, and no script (`EVAL`, `EVALSHA`, `SCRIPT`, `FUNCTION`, `FCALL`: a
  script can block Redis for everyone); the CLI's reads fall back to plain
  reads for it.

The intake and the workers run the data, stream and scripting commands; no
admin or dangerous command (`CONFIG`, `FLUSHALL`, `KEYS`, `DEBUG`, `SHUTDOWN`,
`ACL`, `SCRIPT FLUSH`), no pub/sub. The rules need Redis 7 or later (selectors,
subcommand rules). `rules` is the one home of these rules; `agentledger acl`
prints them as `ACL SETUSER` lines (or applies them), and `deploy/redis-acl/`
shows the ACL-file form, which also turns the `default` user off."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import redis

DEFAULT_OFF = "user default off"  # the ACL file's line for Redis's own default user

_SERVICE_REFUSED = (
    "-@dangerous", "-@admin", "-@pubsub", "-script|flush", "-script|kill", "-script|debug", "-function",
    "-select", "-swapdb", "-move", "-migrate",
)  # fmt: skip
_OPS_ALLOWED = (
    "+@read",
    "+@connection",
    "+time",
    "+xinfo",
    "+xpending",
    "+xrange",
    "+xrevrange",
    "+scan",
)
_SCALER_ALLOWED = ("+ping", "+info", "+xinfo|groups", "+xpending")
_OPS_REFUSED = (
    "-@write", "-@dangerous", "-@scripting", "-eval", "-evalsha", "-eval_ro", "-evalsha_ro",
    "-script", "-function", "-fcall", "-fcall_ro",
)  # fmt: skip


@dataclass(frozen=True)
class AclUser:
    role: str
    name: str
    rules: tuple[str, ...]  # after `reset on >password`
    publisher: str | None = None  # the publisher a publisher user writes as

    def setuser(self, password: str) -> list[str]:
        """The arguments of `ACL SETUSER` for this user with `password`."""
        return ["ACL", "SETUSER", self.name, "reset", "on", f">{password}", *self.rules]

    def file_line(self, password: str) -> str:
        """Its line in an ACL file (`aclfile`): `>password`, or `#<its sha256>`."""
        return " ".join(["user", self.name, "on", password, *self.rules])


def publisher_user(prefix: str, name: str, *, user_prefix: str | None = None) -> AclUser:
    """The user of one publisher: XADD to its own inbox streams, nothing else."""
    head = user_prefix if user_prefix is not None else prefix
    rules = ("resetchannels", f"~{prefix}:{{in*}}:inbox:{name}", "-@all", "+xadd")
    return AclUser("publisher", f"{head}-pub-{name}", rules, publisher=name)


def rules(
    prefix: str, publishers: Sequence[str] = (), *, user_prefix: str | None = None
) -> list[AclUser]:
    """The users of a deployment whose keys start with `prefix`: one per publisher
    in `publishers`, then the intake, the workers, ops and the scaler."""
    head = user_prefix if user_prefix is not None else prefix
    p = prefix
    runs, locks = f"~{p}:{{[0-9]*}}:*", f"~{p}:{{lk*}}:*"
    lines = f"~{p}:{{rl*}}:*"  # the tenants' lines on capped queues (intake admits, workers end)
    intake_keys = (
        f"~{p}:{{in*}}:*", f"~{p}:{{rq*}}:*", runs, locks, lines, f"~{p}:intakes:*",
        f"~{p}:meta", f"%R~{p}:toolsets:*",
    )  # fmt: skip
    workers_keys = (
        runs, f"~{p}:{{ld*}}:*", locks, lines, f"~{p}:members:*", f"~{p}:meta",
        f"~{p}:toolsets:*", f"%R~{p}:{{in*}}:rejected",
    )  # fmt: skip
    # retention (the sweeper): read an archived run's request key, delete it (in a script)
    requests_read_delete = f"(~{p}:{{rq*}}:* +get +del +evalsha +eval)"
    return [
        *(publisher_user(prefix, name, user_prefix=user_prefix) for name in sorted(publishers)),
        AclUser("intake", f"{head}-intake", ("resetchannels", *intake_keys, "+@all", *_SERVICE_REFUSED)),
        AclUser("workers", f"{head}-workers", ("resetchannels", *workers_keys, "+@all", *_SERVICE_REFUSED,
                                               requests_read_delete)),
        AclUser("ops", f"{head}-ops",
                ("resetchannels", f"%R~{p}:*", "-@all", *_OPS_ALLOWED, *_OPS_REFUSED)),
        AclUser("scaler", f"{head}-scaler",
                ("resetchannels", f"%R~{p}:{{[0-9]*}}:q:*", "-@all", *_SCALER_ALLOWED)),
    ]  # fmt: skip


def set_user(client: redis.Redis, command: Sequence[str]) -> str | None:
    """Run one `ACL SETUSER` command; the server's words when it refuses the rules
    (a user that may not run ACL at all raises NoPermissionError, as it is)."""
    try:
        client.execute_command(*command)  # type: ignore[no-untyped-call]
    except redis.exceptions.NoPermissionError:
        raise
    except redis.ResponseError as exc:
        return str(exc)
    return None


def server_version(client: redis.Redis) -> str | None:
    """The server's version (None: INFO is refused to this user)."""
    try:
        return str(client.info("server").get("redis_version", ""))
    except redis.ResponseError:
        return None

"""Redis ACL users for the roles of a deployment, one per role, each with only
the keys and commands it needs (under the key prefix of the deployment):

- **publisher** — `XADD` to the inbox partitions, nothing else: it cannot read
  the inbox back, touch a run's log, or see any other key;
- **workers** — the pools, intake and sweeper: every key under the prefix, the
  data, stream and scripting commands; no admin or dangerous command (no
  `CONFIG`, `FLUSHALL`, `KEYS`, `DEBUG`, `SHUTDOWN`, `ACL`, `SCRIPT FLUSH`), no
  pub/sub, no key outside the prefix;
- **ops** — read-only: every key under the prefix for reading (scripts may
  run, but any write inside one is refused by the key permission), nothing
  else.

Scripts are allowed to ops because Redis checks every command a script runs
against the caller's rights: a write inside one is refused. The rules need
Redis 7 or later (subcommand rules). `rules` is the one home of these rules;
`agentledger acl` prints them as `ACL SETUSER` lines (or applies them), and
`deploy/redis-acl/` shows the ACL-file form."""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("publisher", "workers", "ops")

_WORKER_REFUSED = (
    "-@dangerous", "-@admin", "-@pubsub", "-script|flush", "-script|kill", "-script|debug", "-function",
    "-select", "-swapdb", "-move", "-migrate",
)  # fmt: skip
_OPS_ALLOWED = (
    "+@read", "+@connection", "+time", "+evalsha", "+eval", "+evalsha_ro", "+eval_ro",
    "+script|load", "+script|exists", "+xinfo", "+xpending", "+xrange", "+xrevrange", "+scan",
)  # fmt: skip


@dataclass(frozen=True)
class AclUser:
    role: str
    name: str
    rules: tuple[str, ...]  # after `reset on >password`

    def setuser(self, password: str) -> list[str]:
        """The arguments of `ACL SETUSER` for this user with `password`."""
        return ["ACL", "SETUSER", self.name, "reset", "on", f">{password}", *self.rules]

    def file_line(self, password: str) -> str:
        """Its line in an ACL file (`aclfile`): `>password`, or `#<its sha256>`."""
        return " ".join(["user", self.name, "on", password, *self.rules])


def rules(prefix: str, *, user_prefix: str | None = None) -> list[AclUser]:
    """The users of a deployment whose keys start with `prefix`."""
    head = user_prefix if user_prefix is not None else prefix
    everything = f"~{prefix}:*"
    return [
        AclUser("publisher", f"{head}-publisher",
                ("resetchannels", f"~{prefix}:{{in*}}:inbox", "-@all", "+xadd")),
        AclUser("workers", f"{head}-workers",
                ("resetchannels", everything, "+@all", *_WORKER_REFUSED)),
        AclUser("ops", f"{head}-ops",
                ("resetchannels", everything, "-@all", *_OPS_ALLOWED, "-@write", "-@dangerous")),
    ]  # fmt: skip

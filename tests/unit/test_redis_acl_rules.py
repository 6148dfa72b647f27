"""The Redis ACL rules of the roles (services.adapters.redis.acl): the publisher
may only XADD to the inbox partitions, the workers reach only the prefix's
keys and no admin command, ops only read; deploy/redis-acl/users.acl is the
same rules in the ACL-file form, never out of step with the code."""

from __future__ import annotations

from pathlib import Path

from services.adapters.redis.acl import rules

USERS_ACL = Path(__file__).resolve().parents[2] / "deploy" / "redis-acl" / "users.acl"


def test_each_role_has_only_its_keys_and_commands() -> None:
    by_role = {u.role: u for u in rules("al")}
    assert by_role["publisher"].rules == ("resetchannels", "~al:{in*}:inbox", "-@all", "+xadd")
    workers = by_role["workers"].rules
    assert "~al:*" in workers and "~*" not in workers
    assert {"-@dangerous", "-@admin", "-script|flush", "-function"} <= set(workers)
    ops = by_role["ops"].rules
    assert ops.index("-@all") < ops.index("+@read") < ops.index("-@write")
    assert not [r for r in ops if r.startswith("+") and r[1:] in ("xadd", "set", "del", "@write")]


def test_the_user_names_and_keys_follow_the_prefix() -> None:
    users = rules("shop", user_prefix="agentledger")
    assert [u.name for u in users] == ["agentledger-publisher", "agentledger-workers", "agentledger-ops"]
    assert all(any(r.startswith("~shop:") for r in u.rules) for u in users)
    command = users[0].setuser("pw")
    assert command[:6] == ["ACL", "SETUSER", "agentledger-publisher", "reset", "on", ">pw"]


def test_the_deploy_acl_file_is_the_rules_of_prefix_al() -> None:
    expected = [u.file_line(f">change-me-{u.role}") for u in rules("al")]
    assert USERS_ACL.read_text().splitlines() == expected

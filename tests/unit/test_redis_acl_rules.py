"""The Redis ACL rules of the roles (agentledger.services.adapters.redis.acl): each publisher
may only XADD to its own inbox streams, the intake reaches the inbox and the
runs but not the ledger, the workers reach the runs but not the inbox, ops only
read and run no script; deploy/redis-acl/users.acl is the same rules in the
ACL-file form (with Redis's `default` user off), never out of step with the code."""

from __future__ import annotations

from pathlib import Path

from agentledger.services.adapters.redis.acl import DEFAULT_OFF, rules

USERS_ACL = Path(__file__).resolve().parents[2] / "deploy" / "redis-acl" / "users.acl"
DEPLOY_PUBLISHERS = ("billing-svc",)  # deploy/kubernetes/secret.yaml's publishers file


def test_each_publisher_has_a_user_that_may_only_xadd_to_its_own_streams() -> None:
    users = rules("al", ["billing", "ledger"])
    publishers = {u.publisher: u for u in users if u.role == "publisher"}
    assert publishers["billing"].name == "al-pub-billing"
    assert publishers["billing"].rules == (
        "resetchannels",
        "~al:{in*}:inbox:billing",
        "-@all",
        "+xadd",
    )
    assert publishers["ledger"].rules[1] == "~al:{in*}:inbox:ledger"


def test_the_intake_and_the_workers_reach_only_their_own_keys() -> None:
    by_role = {u.role: u for u in rules("al")}
    intake, workers = set(by_role["intake"].rules), set(by_role["workers"].rules)
    assert {"~al:{in*}:*", "~al:{rq*}:*", "~al:intakes:*", "%R~al:toolsets:*"} <= intake
    assert not {r for r in intake if "{ld*}" in r or "members:" in r or r == "~al:*"}
    assert {"~al:{ld*}:*", "~al:members:*", "%R~al:{in*}:rejected"} <= workers
    assert not {r for r in workers if r in ("~al:{in*}:*", "~al:{rq*}:*", "~al:intakes:*", "~al:*")}
    for rules_ in (intake, workers):
        assert {"-@dangerous", "-@admin", "-script|flush", "-function"} <= rules_
    # retention: the workers' sweeper reads and deletes an archived run's request key, no more
    assert "(~al:{rq*}:* +get +del +evalsha +eval)" in workers


def test_ops_reads_only_and_runs_no_script() -> None:
    ops = {u.role: u for u in rules("al")}["ops"].rules
    assert ops.index("-@all") < ops.index("+@read") < ops.index("-@write")
    assert "%R~al:*" in ops and "~al:*" not in ops
    assert {"-@scripting", "-eval", "-evalsha", "-script", "-function", "-fcall"} <= set(ops)
    assert not [
        r for r in ops if r.startswith("+") and r[1:] in ("xadd", "set", "del", "@write", "eval")
    ]


def test_the_user_names_and_keys_follow_the_prefix() -> None:
    users = rules("shop", ["p1"], user_prefix="agentledger")
    names = ["agentledger-pub-p1", "agentledger-intake", "agentledger-workers", "agentledger-ops",
             "agentledger-scaler"]  # fmt: skip
    assert [u.name for u in users] == names
    assert all(any(r.lstrip("%R").startswith("~shop:") for r in u.rules) for u in users)
    command = users[0].setuser("pw")
    assert command[:6] == ["ACL", "SETUSER", "agentledger-pub-p1", "reset", "on", ">pw"]


def test_the_deploy_acl_file_is_the_rules_of_prefix_al_with_the_default_user_off() -> None:
    expected = [DEFAULT_OFF] + [
        u.file_line(f">change-me-{u.name}") for u in rules("al", DEPLOY_PUBLISHERS)
    ]
    lines = [line for line in USERS_ACL.read_text().splitlines() if not line.startswith("#")]
    assert lines == expected


def test_the_scaler_may_ping_info_and_read_its_streams_groups_and_nothing_else() -> None:
    scaler = {u.role: u for u in rules("al")}["scaler"].rules
    assert scaler == ("resetchannels", "%R~al:{[0-9]*}:q:*", "-@all", "+ping", "+info",
                      "+xinfo|groups", "+xpending")  # fmt: skip

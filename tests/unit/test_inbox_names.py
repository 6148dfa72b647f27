"""The names the intake's contract is made of: each publisher's inbox stream of a
partition (`<prefix>:{in<N>}:inbox:<publisher>`, read back into its partition and
publisher), the intakes' membership sets apart from the pools', the embedded
run's publisher named after its state folder's real path, and `--pools intake`
alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.entrypoints.cli.parser import parser
from agentledger.services.keys import Keys

KEYS = Keys("al", 16)


def test_each_publisher_has_its_own_stream_of_a_partition_under_the_partitions_tag() -> None:
    assert KEYS.inbox(3, "billing-svc") == "al:{in3}:inbox:billing-svc"
    assert KEYS.inbox_publisher("al:{in3}:inbox:billing-svc") == (3, "billing-svc")
    for not_one in ("al:{in3}:inbox", "al:{in3}:rejected", "other:{in3}:inbox:x", "al:{3}:run:x"):
        assert KEYS.inbox_publisher(not_one) is None


def test_the_intakes_membership_is_apart_from_the_pools() -> None:
    assert KEYS.intake_members() == "al:intakes:all"
    assert KEYS.intake_members("local-0123456789ab") == "al:intakes:pub:local-0123456789ab"
    assert not KEYS.intake_members().startswith(KEYS.members(""))


def test_the_embedded_runs_publisher_is_named_after_its_state_folders_real_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    os.symlink(tmp_path / "a", tmp_path / "link")
    a, b = local_name(str(tmp_path / "a")), local_name(str(tmp_path / "b"))
    assert a.startswith("local-") and len(a) == len("local-") + 12 and a != b
    assert local_name(str(tmp_path / "link")) == a  # the real path: one folder, one name


def test_the_intake_runs_alone_among_the_pools() -> None:
    assert parser().parse_args(["workers", "--pools", "intake"]).pools == ["intake"]
    for mixed in ("intake,model", "tools,intake"):
        with pytest.raises(SystemExit):
            parser().parse_args(["workers", "--pools", mixed])
    assert parser().parse_args(["intake", "--metrics-port", "0", "--json"]).command == "intake"

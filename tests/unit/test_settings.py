"""Settings come from the environment once, and every bad value is refused
naming its variable: the CLI turns that into a message and exit code 2."""

from __future__ import annotations

import pytest

from agentledger.services.errors import ConfigError
from agentledger.services.redis_urls import masked
from agentledger.services.settings import environ_for_children, from_env, user_state_dir


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("garbage", "is not a Redis URL"),
        ("http://127.0.0.1:6379/0", "is not a Redis URL"),
        ("redis://127.0.0.1:abc/0", "the port is not a number"),
        ("redis://127.0.0.1:99999/0", "the port is not a number"),
        ("redis://127.0.0.1:6379/abc", "the database 'abc' is not a number"),
        ("redis://127.0.0.1:6379/-1", "the database '-1' is not a number"),
        ("redis://127.0.0.1:6379/0?db=x", "the database 'x' is not a number"),
        ("redis://", "names no host"),
    ],
)
def test_a_bad_redis_url_is_refused_naming_the_variable(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_env({"REDIS_URL": url})
    assert err.value.name == "REDIS_URL"
    assert says in str(err.value)


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "redis://h:1", "rediss://h:6380/2", "unix:///tmp/r.sock?db=1"],
)
def test_good_redis_urls_are_taken(url: str) -> None:
    assert from_env({"REDIS_URL": url}).redis_url == url


def test_a_password_in_a_bad_url_is_not_repeated() -> None:
    with pytest.raises(ConfigError) as err:
        from_env({"REDIS_URL": "redis://user:hunter2@h:x/0"})
    assert "hunter2" not in str(err.value)
    assert masked("redis://:hunter2@h:1/0") == "redis://:***@h:1/0"


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("AGENTLEDGER_SHARDS", "eight", "expected a whole number"),
        ("AGENTLEDGER_SHARDS", "0", "must be more than 0"),
        ("AGENTLEDGER_LEASE_S", "-1", "must be more than 0"),
        ("AGENTLEDGER_LEASE_S", "nan", "finite"),
        ("AGENTLEDGER_LEDGER_KEEP_S", "-5", "must not be negative"),
        ("AGENTLEDGER_WORKER_THREADS", "1.5", "expected a whole number"),
        ("AGENTLEDGER_CARRY_S", "-1", "must not be negative"),
        ("AGENTLEDGER_CARRY_S", "soon", "expected a number"),
        ("AGENTLEDGER_PREFIX", "a b", "braces/spaces"),
        ("AGENTLEDGER_PROBE_URL", "localhost", "is not a Redis URL"),
        ("AGENTLEDGER_LOCK_PARTITIONS", "0", "between 1 and 1024"),
        ("AGENTLEDGER_LOCK_PARTITIONS", "eight", "expected a whole number"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(var: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_env({var: value})
    assert err.value.name == var
    assert says in str(err.value)


def test_the_state_folder_is_per_user_by_default() -> None:
    assert from_env({"HOME": "/home/u"}).state_dir == "/home/u/.local/state/agentledger"
    assert user_state_dir({"XDG_STATE_HOME": "/x/state"}) == "/x/state/agentledger"


def test_a_relative_state_folder_is_made_absolute(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert from_env({"AGENTLEDGER_STATE_DIR": "st"}).state_dir == str(tmp_path / "st")


def test_a_state_folder_that_is_a_file_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError) as err:
        from_env({"AGENTLEDGER_STATE_DIR": str(tmp_path / "f")})
    assert err.value.name == "AGENTLEDGER_STATE_DIR"


def test_nothing_is_probed_unless_asked_and_a_probe_asked_for_is_inherited() -> None:
    assert from_env({}).probe_url is None  # a Redis on 127.0.0.1:6379 may be anybody's
    asked = from_env({"AGENTLEDGER_PROBE_URL": "redis://127.0.0.1:6379/0"})
    assert asked.probe_url == "redis://127.0.0.1:6379/0"
    assert from_env(environ_for_children(asked)).probe_url == asked.probe_url


def test_the_probe_can_be_switched_off_and_children_inherit_that() -> None:
    settings = from_env({"AGENTLEDGER_PROBE_URL": "off"})
    assert settings.probe_url is None
    assert environ_for_children(settings)["AGENTLEDGER_PROBE_URL"] == "off"
    assert from_env(environ_for_children(settings)).probe_url is None


def test_the_lock_partitions_are_unset_by_default_and_children_inherit_a_set_count() -> None:
    assert from_env({}).lock_partitions is None  # the recorded count, else the topology's
    settings = from_env({"AGENTLEDGER_LOCK_PARTITIONS": "8"})
    assert settings.lock_partitions == 8
    assert environ_for_children(settings)["AGENTLEDGER_LOCK_PARTITIONS"] == "8"


def test_carrying_lasts_a_second_by_default_and_zero_switches_it_off() -> None:
    assert from_env({}).carry_s == 1.0
    assert from_env({"AGENTLEDGER_CARRY_S": "0"}).carry_s == 0.0


def test_workspace_roots_are_absolute_folders_separated_by_colons_or_commas_and_children_inherit_them() -> (
    None
):
    assert from_env({}).workspace_roots == ()
    settings = from_env({"AGENTLEDGER_WORKSPACE_ROOTS": "/srv/a:/srv/b/, /srv/a"})
    assert settings.workspace_roots == ("/srv/a", "/srv/b")
    assert from_env(environ_for_children(settings)).workspace_roots == ("/srv/a", "/srv/b")


@pytest.mark.parametrize("value", ["srv/a", "/srv/a:~/b", "/srv/a,./b"])
def test_a_relative_workspace_root_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_env({"AGENTLEDGER_WORKSPACE_ROOTS": value})
    assert err.value.name == "AGENTLEDGER_WORKSPACE_ROOTS"
    assert "is not an absolute folder" in str(err.value)


@pytest.mark.parametrize(
    "var", ["AGENTLEDGER_WORKSPACE_MAX_BYTES", "AGENTLEDGER_WORKSPACE_MAX_FILES"]
)
def test_the_workspace_copy_maxima_are_positive_whole_numbers(var: str) -> None:
    for bad, says in (("0", "must be more than 0"), ("1e9", "expected a whole number")):
        with pytest.raises(ConfigError) as err:
            from_env({var: bad})
        assert err.value.name == var and says in str(err.value)
    assert from_env({"AGENTLEDGER_WORKSPACE_MAX_FILES": "7"}).workspace_max_files == 7


def test_the_traces_service_is_named_as_the_opentelemetry_sdk_names_it() -> None:
    assert from_env({}).trace_service == "agentledger"
    assert from_env({"OTEL_SERVICE_NAME": " shop "}).trace_service == "shop"
    attrs = {"OTEL_RESOURCE_ATTRIBUTES": "team=a, service.name=shop%20agents"}
    assert from_env(attrs).trace_service == "shop agents"
    both = {**attrs, "OTEL_SERVICE_NAME": "wins"}
    assert from_env(both).trace_service == "wins"
    assert from_env({"OTEL_RESOURCE_ATTRIBUTES": "service.name="}).trace_service == "agentledger"

"""Every model spec class has its provider's row, and the core asks the spec's
capabilities, never its type: no module of events/ names a provider's spec class."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import get_args

import pytest

from agentledger.schemas.spec import MODELS, ModelSpec, RunSpec
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.models.providers import PROVIDERS, make_adapter
from agentledger.services.handlers.spec_check import endpoint_problems
from agentledger.services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _spec_classes() -> list[type]:
    union = get_args(ModelSpec)[0]
    return [get_args(member)[0] for member in get_args(union)]


def test_every_model_spec_class_has_a_provider_row() -> None:
    classes = _spec_classes()
    assert len(classes) >= 3
    assert set(classes) == set(PROVIDERS), (
        "a spec class without its row, or a row without its class"
    )


def test_the_spec_key_of_each_provider_names_its_class_in_the_union() -> None:
    assert list(MODELS.values()) == _spec_classes()


def test_the_core_never_checks_a_provider_type() -> None:
    names = "|".join(c.__name__ for c in _spec_classes())
    checks = re.compile(rf"isinstance\([^)]*\b({names})\b|case ({names})\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "events").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if checks.search(line)
    ]
    assert found == []


def _openai_spec(**openai: object) -> RunSpec:
    model = {"openai": {"model": "gpt-5-mini", **openai}}
    return RunSpec.model_validate(
        {"task": "t", "principal": {"id": "p", "tenant": "t"}, "model": model}
    )


def test_a_spec_may_name_only_the_endpoints_and_key_variables_the_deployment_lists() -> None:
    allowed = Settings(
        model_endpoints=("http://127.0.0.1:8000/v1",), model_key_vars="OPENAI_API_KEY,VLLM_KEY"
    )
    assert (
        endpoint_problems(
            _openai_spec(base_url="http://127.0.0.1:8000/v1/", api_key_env="VLLM_KEY"), allowed
        )
        == []
    )
    assert endpoint_problems(_openai_spec(), allowed) == []  # OpenAI's own, its own variable
    hostile = _openai_spec(
        base_url="http://attacker.example/v1", api_key_env="AWS_SECRET_ACCESS_KEY"
    )
    assert [(p.field, p.reason) for p in endpoint_problems(hostile, allowed)] == [
        (
            "model.openai.base_url",
            "'http://attacker.example/v1' is not one of this deployment's model endpoints "
            "(AGENTLEDGER_MODEL_ENDPOINTS: http://127.0.0.1:8000/v1)",
        ),
        (
            "model.openai.api_key_env",
            "'AWS_SECRET_ACCESS_KEY' is not a variable this deployment lets a model spec name "
            "(AGENTLEDGER_MODEL_KEY_VARS: OPENAI_API_KEY, VLLM_KEY)",
        ),
    ]
    assert [
        p.field
        for p in endpoint_problems(_openai_spec(base_url="http://127.0.0.1:8000/v1"), Settings())
    ] == [
        "model.openai.base_url"  # none listed: none may be named
    ]


def test_a_base_url_is_an_http_url_and_a_key_variable_a_variable_name() -> None:
    for bad in (
        {"base_url": "file:///etc/passwd"},
        {"base_url": "http://h/v1?x=1"},
        {"api_key_env": "A-B"},
    ):
        try:
            _openai_spec(**bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_the_openai_spec_answers_the_capabilities_the_core_asks() -> None:
    model = _openai_spec(max_tokens=99, fallback_model="gpt-5").model
    assert (model.provider, model.model_id, model.output_limit, model.fallback_model) == (
        "openai",
        "gpt-5-mini",
        99,
        "gpt-5",
    )
    assert model.names_model and model.server_tool_definitions() == () and model.problems() == ()


def test_a_worker_without_the_openai_sdk_fails_each_request_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` fails as if not installed
    monkeypatch.delitem(
        sys.modules, "agentledger.services.adapters.models.openai_adapter", raising=False
    )
    adapter = make_adapter(_openai_spec().model, Settings(), None)
    with pytest.raises(ModelError) as raised:
        adapter.respond(ModelRequest("r", 1, None, (), ()))
    assert raised.value.failure.kind == "not_configured"
    assert "pip install 'agentledger[openai]'" in str(raised.value)

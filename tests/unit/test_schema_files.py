"""The JSON Schema files for outside publishers match the models."""

import json

import jsonschema
import pytest

from agentledger.schemas.export import HERE, documents, render


@pytest.mark.parametrize("name", sorted(documents()))
def test_the_committed_schema_file_is_current(name):
    committed = (HERE / name).read_text() if (HERE / name).exists() else ""
    assert committed == render(documents()[name]), f"schemas/{name} is stale: run `make schemas`"


def test_an_inbox_message_is_valid_against_the_exported_schema_and_a_bad_one_is_not():
    schema = json.loads((HERE / "inbox_message.schema.json").read_text())
    good = {
        "type": "RunRequested",
        "spec": {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "done"}]},
        },
    }
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "spec": {**good["spec"], "colour": "red"}}, schema)

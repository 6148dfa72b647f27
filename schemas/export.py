"""Writes the JSON Schema files outside publishers validate against
(`make schemas`); a unit test fails when a committed file is stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agentledger.schemas.envelope import Envelope
from agentledger.schemas.inbox import InboxMessage
from agentledger.schemas.publishers import PublishersFile
from agentledger.schemas.spec import RunSpec

HERE = Path(__file__).parent


class _AnyEvent(BaseModel):
    """Stand-in for the event payload: an object whose `type` equals the envelope's."""

    model_config = {"extra": "allow"}
    type: str


def documents() -> dict[str, dict[str, Any]]:
    return {
        "inbox_message.schema.json": TypeAdapter(InboxMessage).json_schema(),
        "run_spec.schema.json": RunSpec.model_json_schema(),
        "envelope.schema.json": Envelope[_AnyEvent].model_json_schema(),
        "publishers.schema.json": PublishersFile.model_json_schema(),
    }


def render(doc: dict[str, Any]) -> str:
    return (
        json.dumps(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


def main() -> None:
    for name, doc in documents().items():
        (HERE / name).write_text(render(doc))
        print(f"wrote schemas/{name}")


if __name__ == "__main__":
    main()

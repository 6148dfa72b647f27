"""The publishers file: who may publish to the inbox, with which key, and what
each may ask for — the principals it may act for, the scopes a run may hold and
the task queues it may fill. Grants live here, on the server; a message never
widens them.

```yaml
publishers:
  billing-svc:
    key: "3f9c…"                 # hex; or key_env: NAME (the key in that variable)
    principals: [{id: alice, tenant: shop-1}]
    scopes: [stock:read, stock:write]
    queues: [default]
    workspaces: [/srv/billing]   # folders its runs' workspaces may be asked inside
```

A grant entry may be a pattern with `*` (the embedded `run`'s own publisher
grants every principal and scope on the private `run.*` queues only); an
omitted `queues` is `[default]`. `workspaces` are absolute folders, never
patterns: a run's workspace must resolve inside one of them (or inside a root
the operator's settings name); none means only the settings' roots."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentledger.schemas.model_build import deferred
from agentledger.schemas.names import PUBLISHER_NAME_PATTERN

KEY_PATTERN = r"^[0-9a-fA-F]{32,256}$"  # at least 128 bits
ROOT_PATTERN = r"^/[^\x00]{0,4095}$"  # an absolute folder
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())


class GrantedPrincipal(_Model):
    id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.id}@{self.tenant}"


class Publisher(_Model):
    key: str | None = Field(default=None, pattern=KEY_PATTERN, repr=False)
    key_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    principals: tuple[GrantedPrincipal, ...] = Field(min_length=1)
    scopes: tuple[str, ...] = ()
    queues: tuple[str, ...] = ("default",)
    workspaces: tuple[Annotated[str, Field(pattern=ROOT_PATTERN)], ...] = Field(
        default=(), description="absolute folders a run's workspace may be inside"
    )

    @model_validator(mode="after")
    def _one_key(self) -> Publisher:
        if (self.key is None) == (self.key_env is None):
            raise ValueError("give exactly one of 'key' (hex) and 'key_env' (a variable name)")
        return self


class PublishersFile(_Model):
    publishers: dict[str, Publisher] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> PublishersFile:
        bad = [n for n in self.publishers if not re.match(PUBLISHER_NAME_PATTERN, n)]
        if bad:
            raise ValueError(f"publisher names are letters, digits, '.', '_' or '-': {bad!r}")
        return self

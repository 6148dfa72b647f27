"""The cold store port: named blobs, each written whole or not at all (`put`: a
reader never sees half of one), read back by name (`get`: None when there is
none). The folder (`folder.FolderStore`) and fsspec's file systems
(`fsspec_store.FsspecStore`) implement it."""

from __future__ import annotations

from typing import Protocol


class ColdStore(Protocol):
    url: str  # where it is, as the operator named it (for messages)

    def put(self, name: str, data: bytes) -> None:
        """Write `data` under `name` (a relative path of '/'-separated parts) atomically
        and durably, replacing what was there."""
        ...

    def get(self, name: str) -> bytes | None: ...

    def exists(self, name: str) -> bool: ...

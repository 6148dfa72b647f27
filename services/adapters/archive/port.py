"""The cold store port: named blobs, each written whole or not at all (`put`: a
reader never sees half of one), read back by name (`get`: None when there is
none), and listed a folder at a time (`names`). The folder (`folder.FolderStore`) and fsspec's file systems
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

    def names(self, folder: str) -> list[str]:
        """The names (last part only) of the blobs and folders right under `folder`;
        [] when there is none. A blob being written is not listed."""
        ...

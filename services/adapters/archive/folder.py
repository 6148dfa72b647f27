"""The cold store in a folder (the default: `<state folder>/archive`): each blob
is written to a temporary file in its own folder, flushed to disk (fsync), then
renamed over its name and the folder synced — a crash leaves the old blob or the
new one, never a part."""

from __future__ import annotations

import os
import threading
from pathlib import Path


class FolderStore:
    def __init__(self, root: str) -> None:
        self.url = root
        self._root = Path(root)

    def put(self, name: str, data: bytes) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself survives a crash
        finally:
            os.close(fd)

    def get(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def names(self, folder: str) -> list[str]:
        try:
            return [n for n in os.listdir(self._path(folder)) if not n.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _path(self, name: str) -> Path:
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"{name!r} is not a blob name")
        return self._root.joinpath(*parts)

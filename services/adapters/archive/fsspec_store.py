"""The cold store at any URL fsspec knows (`s3://bucket/prefix`, `gs://…`,
`az://…`, `memory://…`), where the operator installs fsspec and the plugin of
that file system (`pip install 'agentledger[archive]' s3fs`). A blob is written
under a temporary name and then moved over its own (on object stores a put is
whole already; the move keeps a local or network file system whole as well)."""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from typing import Any


class FsspecStore:
    def __init__(self, url: str) -> None:
        fsspec: Any = importlib.import_module("fsspec")  # the optional extra: agentledger[archive]
        self.url = url
        fs, root = fsspec.core.url_to_fs(url)
        self._fs: Any = fs
        self._root = root.rstrip("/")

    def put(self, name: str, data: bytes) -> None:
        path = self._path(name)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp"
        self._fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self._fs.pipe_file(tmp, data)
        try:
            self._fs.mv(tmp, path)
        finally:
            if self._fs.exists(tmp):
                self._fs.rm_file(tmp)

    def get(self, name: str) -> bytes | None:
        try:
            data: bytes = self._fs.cat_file(self._path(name))
        except FileNotFoundError:
            return None
        return data

    def exists(self, name: str) -> bool:
        return bool(self._fs.exists(self._path(name)))

    def names(self, folder: str) -> list[str]:
        try:
            found = self._fs.ls(self._path(folder), detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = (str(p).rstrip("/").rsplit("/", 1)[-1] for p in found)
        return [n for n in names if not n.endswith(".tmp")]

    def _path(self, name: str) -> str:
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"{name!r} is not a blob name")
        return f"{self._root}/{name}"

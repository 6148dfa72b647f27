"""The archive of one deployment (its key prefix) in a cold store: a run's segment
under a name made from a digest of its id (`<prefix>/runs/ab/abcd….seg`: no run
id, however chosen, names a path of its own), its entry in the catalogue of
archived runs (`catalogue`), a tombstone per request id of an
archived run under a digest of its request key (`<prefix>/requests/…`), and the
events of the runs read last, decoded by the store's one decoder."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any

from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.archive import catalogue, segment
from agentledger.services.adapters.archive.port import ColdStore
from agentledger.services.adapters.archive.segment import Segment, SegmentError
from agentledger.services.adapters.reading.port import Position
from agentledger.services.adapters.store.entries import decode_raw
from agentledger.services.errors import ConfigError

OFF = "off"
KEPT_RUNS = 8  # archived runs whose decoded events a process keeps (a command reads one)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class Archive:
    def __init__(self, cold: ColdStore, prefix: str) -> None:
        self.cold = cold
        self._prefix = prefix
        self._kept: OrderedDict[str, tuple[Segment, list[Envelope[Any]]]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.cold.url

    def segment_name(self, run_id: str) -> str:
        d = _digest(run_id)
        return f"{self._prefix}/runs/{d[:2]}/{d}.seg"

    def write(self, seg: Segment) -> None:
        """The run's catalogue entry, then its segment (`catalogue`)."""
        first = decode_raw(b"0-1", seg.entries[0]) if seg.entries else None
        if first is not None:
            self.cold.put(catalogue.entry_name(self._prefix, seg.run_id, int(first.at * 1000)), b"")
        self.cold.put(self.segment_name(seg.run_id), segment.encode(seg))
        with self._lock:
            self._kept.pop(seg.run_id, None)

    def read(self, run_id: str) -> Segment | None:
        """The run's segment, checked (SegmentError: damaged, or another run's)."""
        data = self.cold.get(self.segment_name(run_id))
        if data is None:
            return None
        seg = segment.decode(data)
        if seg.run_id != run_id:
            raise SegmentError(f"segment {self.segment_name(run_id)} holds run {seg.run_id!r}")
        return seg

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        """The archived runs before `cursor`, as `RunReader.runs_before` gives runs."""
        return catalogue.runs_before(self.cold, self._prefix, cursor, floor_ms, n)

    def holds(self, run_id: str) -> bool:
        """Whether a run of this id is archived (its segment is there, whole or not)."""
        return self.cold.exists(self.segment_name(run_id))

    def events(
        self, run_id: str, *, fresh: bool = False
    ) -> tuple[Segment, list[Envelope[Any]]] | None:
        """The archived run's segment and its events, decoded and checked: seq 1… in
        order, the last one's id the segment's (SegmentError, InvalidEvent if not).
        `fresh`: read from the cold store, not from what this process kept."""
        with self._lock:
            if not fresh and (kept := self._kept.get(run_id)) is not None:
                self._kept.move_to_end(run_id)
                return kept
        seg = self.read(run_id)
        if seg is None:
            return None
        envs = [decode_raw(f"0-{n}".encode(), blob) for n, blob in enumerate(seg.entries, 1)]
        if not envs or envs[-1].id != seg.last_id:
            raise SegmentError(f"segment of {run_id!r} does not end with event {seg.last_id!r}")
        with self._lock:
            self._kept[run_id] = (seg, envs)
            while len(self._kept) > KEPT_RUNS:
                self._kept.popitem(last=False)
        return seg, envs

    def tombstone_name(self, request_key: str) -> str:
        return f"{self._prefix}/requests/{_digest(request_key)}"

    def put_request(self, request_key: str, value: str) -> None:
        """Keep what an archived run's request key held (`<run id> <request digest>`)."""
        self.cold.put(self.tombstone_name(request_key), value.encode())

    def request(self, request_key: str) -> str | None:
        data = self.cold.get(self.tombstone_name(request_key))
        return None if data is None else data.decode()


def open_cold_store(url: str) -> ColdStore:
    """A folder for a path (or `file://`), else fsspec's file system for the URL."""
    if "://" not in url or url.startswith("file://"):
        from agentledger.services.adapters.archive.folder import FolderStore

        return FolderStore(os.path.abspath(url.removeprefix("file://")))
    try:
        from agentledger.services.adapters.archive.fsspec_store import FsspecStore

        return FsspecStore(url)
    except ImportError as exc:
        raise ConfigError(
            "AGENTLEDGER_ARCHIVE_URL",
            f"{url!r} needs fsspec and its plugin for that scheme "
            f"(pip install 'agentledger[archive]' and e.g. s3fs): {exc}",
        ) from None
    except (ValueError, OSError) as exc:
        raise ConfigError("AGENTLEDGER_ARCHIVE_URL", f"{url!r} cannot be opened: {exc}") from None


def archive_url(archive_setting: str | None, state_dir: str) -> str | None:
    """Where the archive is: the setting, else `<state folder>/archive`; None when `off`."""
    if archive_setting is not None and archive_setting.strip().lower() == OFF:
        return None
    return archive_setting or os.path.join(state_dir, "archive")


def open_archive(archive_setting: str | None, state_dir: str, prefix: str) -> Archive | None:
    url = archive_url(archive_setting, state_dir)
    return None if url is None else Archive(open_cold_store(url), prefix)

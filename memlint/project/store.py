"""Module summaries kept between runs, so the project model re-reads only what changed.

One JSON file per memlint version beside the result cache: per path the size, mtime and
content hash last seen, and per content hash the module's summary (or that it needs none).
A file whose size and mtime are unchanged is not read again; a corrupt or foreign store is
ignored, never an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import memlint
from memlint.cache import read_json, write_json
from memlint.project.summary import SCHEMA, ModuleSummary

FORMAT = 1


@dataclass(frozen=True)
class Record:
    mtime_ns: int
    size: int
    digest: str


class SummaryStore:
    """Summaries by content hash; ``directory`` None keeps them for this run only."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.file = None if directory is None else (
            directory / memlint.__version__ / f"summaries-{SCHEMA}.json")
        self.records: dict[str, Record] = {}
        # digest -> summary; None: the file needs none (or does not parse)
        self.summaries: dict[str, ModuleSummary | None] = {}
        # The JSON form of summaries read from disk, written back as it was.
        self._raw: dict[str, Any] = {}
        self.dirty = False
        self._load()

    def _load(self) -> None:
        data = None if self.file is None else read_json(self.file, FORMAT)
        if data is None:
            return
        try:
            for path, (mtime_ns, size, digest) in data["records"].items():
                self.records[str(path)] = Record(int(mtime_ns), int(size), str(digest))
            for digest, raw in data["summaries"].items():
                self.summaries[str(digest)] = (
                    None if raw is None else ModuleSummary.from_json(raw))
                self._raw[str(digest)] = raw
        except (KeyError, TypeError, ValueError, AttributeError):
            self.records, self.summaries, self._raw = {}, {}, {}

    def known(self, path: str, st: os.stat_result | None) -> str | None:
        """The content hash of an unchanged file whose summary (or that it needed none) is
        stored."""
        record = self.records.get(path)
        if (record is None or st is None or record.mtime_ns != st.st_mtime_ns
                or record.size != st.st_size or record.digest not in self.summaries):
            return None
        return record.digest

    def put(self, path: str, st: os.stat_result | None, digest: str,
            summary: ModuleSummary | None) -> None:
        if st is not None:
            record = Record(st.st_mtime_ns, st.st_size, digest)
            if self.records.get(path) != record:
                self.records[path] = record
                self.dirty = True
        # A content hash fixes the summary; only a file first stored without one (no rule
        # needed it then) gains one later.
        if digest not in self.summaries or (
                summary is not None and self.summaries[digest] is None):
            self.summaries[digest] = summary
            self._raw.pop(digest, None)
            self.dirty = True

    def save(self) -> str | None:
        if not self.dirty or self.file is None or self.directory is None:
            return None
        live = {r.digest for r in self.records.values()}
        payload = {
            "format": FORMAT,
            "records": {p: [r.mtime_ns, r.size, r.digest] for p, r in sorted(self.records.items())},
            "summaries": {d: self._raw[d] if d in self._raw else (
                              None if s is None else s.to_json())
                          for d, s in self.summaries.items() if d in live},
        }
        warning = write_json(self.directory, self.file, payload)
        if warning is None:
            self.dirty = False
        return warning

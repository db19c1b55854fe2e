"""The result cache: a rerun of an unchanged tree reads no source file at all.

One JSON file per (memlint version, effective settings, rule code) holds every file's result.
An entry is trusted without reading the file when its size and nanosecond mtime match; when
they differ the file's content hash decides, so touching a file costs one read, not a lint.
The cache is written atomically (temporary file + rename) and only inside ``--cache-dir``;
a corrupt or foreign cache file is ignored, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import memlint
from memlint.diagnostics import Diagnostic

CACHE_DIR_NAME = ".memlint_cache"
FORMAT = 3


def content_digest(source: bytes) -> str:
    """A fast content hash (blake2b is several times quicker than sha256 in CPython)."""
    return hashlib.blake2b(source, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Entry:
    mtime_ns: int
    size: int
    digest: str
    diagnostics: tuple[Diagnostic, ...]
    skipped: str | None = None
    # The rules whose prefilter passed (None: none did), and the fingerprint of the project
    # facts the file was linted with: when another file changes those facts, it is linted again.
    active: tuple[str, ...] | None = None
    view: str | None = None
    # The --file-timeout this content ran out of, if it did: a run with the same or a shorter
    # timeout reuses the failure instead of waiting for it again; a longer one tries again.
    timeout: float | None = None

    def to_json(self) -> list[Any]:
        return [self.mtime_ns, self.size, self.digest, self.skipped,
                [d.to_json() for d in self.diagnostics],
                None if self.active is None else list(self.active), self.view, self.timeout]

    @classmethod
    def from_json(cls, data: Any) -> Entry | None:
        try:
            mtime_ns, size, digest, skipped, diags, active, view, timeout = data
            entry = cls(int(mtime_ns), int(size), str(digest),
                        tuple(Diagnostic.from_json(d) for d in diags),
                        None if skipped is None else str(skipped),
                        None if active is None else tuple(str(a) for a in active),
                        None if view is None else str(view),
                        None if timeout is None else float(timeout))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            return None
        return entry

    def for_path(self, display: str) -> tuple[Diagnostic, ...]:
        """The diagnostics with the path the current run shows (cwd may have changed)."""
        return tuple(d if d.path == display else replace(d, path=display)
                     for d in self.diagnostics)


def _source_fingerprint() -> str:
    """Size and mtime of memlint's own modules: editing a rule invalidates the cache."""
    package = Path(memlint.__file__).parent
    parts: list[str] = []
    for path in sorted(package.rglob("*.py")):
        with contextlib.suppress(OSError):
            st = path.stat()
            parts.append(f"{path.relative_to(package)}:{st.st_mtime_ns}:{st.st_size}")
    return ";".join(parts)


def cache_key(settings_fingerprint: str, rule_ids: Sequence[str]) -> str:
    material = "|".join([
        f"format={FORMAT}",
        f"version={memlint.__version__}",
        settings_fingerprint,
        "rules=" + ",".join(sorted(rule_ids)),
        _source_fingerprint(),
    ])
    return hashlib.blake2b(material.encode(), digest_size=12).hexdigest()


class ResultCache:
    """Per-file results for one effective configuration, keyed by absolute path."""

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.file = directory / memlint.__version__ / f"{key}.json"
        self.entries: dict[str, Entry] = {}
        # The state of every file the last run's project model read (see memlint.runner).
        self.project: str | None = None
        self.dirty = False
        self._load()

    def _load(self) -> None:
        data = read_json(self.file, FORMAT)
        if data is None:
            return
        files = data.get("files")
        if not isinstance(files, dict):
            return
        project = data.get("project")
        self.project = project if isinstance(project, str) else None
        for path, raw in files.items():
            entry = Entry.from_json(raw)
            if entry is not None:
                self.entries[path] = entry

    def fresh(self, path: str, st: os.stat_result) -> Entry | None:
        """The entry for a file whose size and mtime are unchanged since it was cached."""
        entry = self.entries.get(path)
        if entry is not None and entry.mtime_ns == st.st_mtime_ns and entry.size == st.st_size:
            return entry
        return None

    def digest(self, path: str) -> str | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.digest

    def store(self, path: str, entry: Entry) -> None:
        if self.entries.get(path) != entry:
            self.entries[path] = entry
            self.dirty = True

    def save(self) -> str | None:
        """Write atomically; returns a warning instead of failing the run when it cannot."""
        if not self.dirty:
            return None
        payload = {
            "format": FORMAT,
            "project": self.project,
            "files": {path: entry.to_json() for path, entry in sorted(self.entries.items())},
        }
        warning = write_json(self.directory, self.file, payload)
        if warning is None:
            self.dirty = False
        return warning


def read_json(file: Path, version: int) -> dict[str, Any] | None:
    """A cache file's content when it is readable JSON of this format version, else None:
    a missing, corrupt or foreign cache is ignored, never an error."""
    try:
        data = json.loads(file.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != version:
        return None
    return data


def write_json(directory: Path, file: Path, payload: Any) -> str | None:
    """Write ``payload`` to ``file`` inside the cache ``directory`` atomically (a temporary
    file, then a rename), marking the directory as a cache first. Returns a warning instead
    of failing the run when it cannot."""
    try:
        _write_json(directory, file, payload)
    except OSError as exc:
        return f"cannot write cache in {directory}: {exc.strerror or exc}"
    return None


def _write_json(directory: Path, file: Path, payload: Any) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    # Keep the cache out of git and out of backups, as other tools' caches do.
    for name, text in ((".gitignore", "# Created by memlint.\n*\n"),
                       ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")):
        marker = directory / name
        if not marker.exists():
            marker.write_text(text, encoding="utf-8")
    # A name no other process uses, created exclusively (what tempfile.mkstemp does,
    # without importing tempfile on a one-file pre-commit run's critical path).
    tmp = str(file.parent / f".tmp-{os.getpid()}-{time.monotonic_ns()}.json")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # json.dumps, not json.dump: only the former uses the C encoder.
            handle.write(json.dumps(payload, separators=(",", ":")))
        os.replace(tmp, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def prune_missing(cache: ResultCache, keep: Iterable[str]) -> None:
    """Forget files under linted directories that no longer exist (kept: other trees)."""
    wanted = set(keep)
    for path in list(cache.entries):
        if path not in wanted and not os.path.exists(path):
            del cache.entries[path]
            cache.dirty = True

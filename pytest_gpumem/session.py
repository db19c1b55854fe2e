"""Session-wide plugin state, kept out of the hook module so other features can extend it.

The controller (or the only process) collects one JSON record per marked test from the
reports it receives, whichever process measured the test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_gpumem.backends import make_backend
from pytest_gpumem.backends.base import Backend, TestTracker
from pytest_gpumem.linked import Linker
from pytest_gpumem.marker import MarkerSpec
from pytest_gpumem.options import Settings, limits_for
from pytest_gpumem.result import TestMeasurement
from pytest_gpumem.units import format_bytes


@dataclass
class TestRun:
    """One marked test while it runs: its tracker and what has been measured so far."""

    __test__ = False

    item: pytest.Item
    tracker: TestTracker
    measurement: TestMeasurement


@dataclass
class GpumemSession:
    settings: Settings
    backend: Backend | None = None
    current: TestRun | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)  # one-line remarks for the terminal summary
    linker: Linker = field(default_factory=Linker)  # memlint's findings, per file linted

    @property
    def enabled(self) -> bool:
        return self.settings.enabled and self.backend is not None

    def start_backend(self) -> None:
        self.backend = make_backend(
            self.settings.backend,
            round_bytes=self.settings.round_bytes,
            timeline=self.settings.timeline_dir is not None,
        )

    def fixture_backend(self) -> Backend:
        """The session's backend, or a quiet one for ``gpumem`` fixture use without --gpumem."""
        if self.backend is None:
            self.backend = make_backend(
                self.settings.backend, round_bytes=self.settings.round_bytes,
                record_history=False,
            )
        return self.backend

    def begin(self, item: pytest.Item, spec: MarkerSpec) -> TestRun:
        assert self.backend is not None
        measurement = TestMeasurement(
            nodeid=item.nodeid,
            backend=self.backend.name,
            device=self.backend.device,
            label=self.backend.label,
            limits=limits_for(spec, self.settings),
        )
        self.current = TestRun(item, self.backend.tracker(), measurement)
        return self.current

    def end(self) -> None:
        if self.current is not None:
            self.current.tracker.close()
            self.current = None

    def add_record(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def top_peaks(self, n: int) -> list[dict[str, Any]]:
        measured = [r for r in self.records if r.get("peak_bytes") is not None]
        return sorted(measured, key=lambda r: (-int(r["peak_bytes"]), str(r["nodeid"])))[:n]

    def summary_lines(self, peaks: list[dict[str, Any]]) -> list[str]:
        lines = []
        for r in peaks:
            budget = r.get("budget_bytes")
            limit = "no budget" if budget is None else f"budget {format_bytes(int(budget))}"
            lines.append(f"{format_bytes(int(r['peak_bytes'])):>12}  ({limit}, "
                         f"{r['backend']} {r['device']})  {r['nodeid']}")
        labels = sorted({str(r.get("measurement")) for r in peaks})
        return lines + [f"measured by: {label}" for label in labels]

    def closing_notes(self) -> list[str]:
        """Remarks about options that had no effect, or artifacts the run left behind."""
        notes = set(self.notes)
        settings, backend = self.settings, self.backend
        if settings.snapshot_dir is not None and backend is not None and not backend.has_snapshots:
            notes.add(
                f"--gpumem-snapshot-dir: no snapshots written, memory snapshots need the CUDA "
                f"backend (this run measured on {backend.name}); --gpumem-timeline-dir draws "
                "timelines on any backend"
            )
        if settings.timeline_all and settings.timeline_dir is None:
            notes.add("--gpumem-timeline=all: no timelines written without --gpumem-timeline-dir")
        timelines = sum(1 for r in self.records if r.get("timeline"))
        if timelines:
            notes.add(f"{timelines} memory timeline(s) written to {settings.timeline_dir}")
        return sorted(notes)

    def shutdown(self) -> None:
        self.end()
        if self.backend is not None:
            self.backend.shutdown()

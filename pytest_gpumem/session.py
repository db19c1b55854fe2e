"""Session-wide plugin state and one measured test's life, kept out of the hook module.

A measured test is followed through pytest's own protocol rather than a protocol of ours,
so plugins that run a test several times (pytest-rerunfailures, flaky, pytest-repeat) keep
working and each run is measured afresh: the tracker starts when setup starts, the body
window covers the call phase (a unittest ``TestCase``'s setUp, test method and tearDown, a
doctest, or a test function), and the leak is read once teardown is over.

Verdicts go where pytest puts a problem found in that phase: a peak over budget (or an
out-of-memory error, or growth on every ``repeat``) fails the call report; a leak, known
only after the fixtures are torn down, fails the teardown report. Every report of a
measured test carries the record as it stands then; the controller keeps the last one per
test, whichever process measured it.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gpumem.backends import make_backend
from pytest_gpumem.backends.base import Backend, TestTracker
from pytest_gpumem.holders import fixture_roots, holders_of
from pytest_gpumem.linked import Linker, link_measurement
from pytest_gpumem.marker import MarkerError, MarkerSpec, marker_owner, marker_spec
from pytest_gpumem.options import Settings, limits_for
from pytest_gpumem.report import failure_text, headline, memory_longrepr
from pytest_gpumem.result import LEAK, PEAK, TestMeasurement, attach_record
from pytest_gpumem.timeline import render_html
from pytest_gpumem.units import format_bytes
from pytest_gpumem.xfail import expected_failure, is_strict_xpass, mark_expected

SPEC = pytest.StashKey[MarkerSpec | None]()  # each item's merged marker, from collection


def check_markers(items: list[pytest.Item]) -> tuple[list[pytest.Item], list[tuple[str, str]]]:
    """Validate and remember every item's marker: the items whose marker is wrong, and one
    (node id, one-line message) per wrong marker, named where it was written (a module's
    ``pytestmark`` is one error, not one per test).

    Run once collection (and every ``pytest_collection_modifyitems``) is done, so a marker a
    conftest adds, or one on a unittest method, is checked like any other.
    """
    bad: list[pytest.Item] = []
    errors: dict[tuple[str, str], None] = {}  # ordered, without repeats
    for item in items:
        try:
            item.stash[SPEC] = marker_spec(item)
        except MarkerError as exc:
            bad.append(item)
            owner = marker_owner(item)
            errors[(owner, f"{owner}: {exc}")] = None
    return bad, list(errors)


def _is_oom(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom = getattr(torch, "OutOfMemoryError", None)
    return isinstance(oom, type) and isinstance(exc, oom)


def _outcome(reports: list[pytest.TestReport], oom: bool) -> str:
    for report in reports:
        if report.when != "call" and report.failed:
            return "error"
        if report.skipped:
            return "skipped"
        if report.when == "call" and report.failed and not oom:
            return "failed"
    return "passed"


def _artifact_path(directory: Path, nodeid: str, suffix: str) -> Path:
    """One file per test, named after its node id in characters every file system takes."""
    return directory / (re.sub(r"[^\w.-]+", "_", nodeid)[-150:] + suffix)


@dataclass
class TestRun:
    """One run of a measured test (a rerun is a new one): its tracker and measurement."""

    __test__ = False

    item: pytest.Item
    tracker: TestTracker
    measurement: TestMeasurement
    reports: list[pytest.TestReport] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # added to the record (the CI gate)
    instance: Any = None  # weak reference to the test's class instance (a TestCase's self)

    def record(self) -> dict[str, Any]:
        return {**self.measurement.to_json(), **self.extra}


@dataclass
class GpumemSession:
    settings: Settings
    backend: Backend | None = None
    current: TestRun | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # by node id, last wins
    seen: set[str] = field(default_factory=set)  # every test the run reported
    notes: set[str] = field(default_factory=set)  # one-line remarks for the terminal summary
    artifact_dir: Callable[[], Path] | None = None  # pytest's cache folder, when there is one
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

    # -- one test -----------------------------------------------------------------------

    def spec_for(self, item: pytest.Item) -> MarkerSpec | None:
        """The limits source of a test, or ``None`` when this run does not measure it."""
        if SPEC in item.stash:
            spec = item.stash[SPEC]
        else:  # an item made after collection: checked now, never a crash mid-run
            try:
                spec = marker_spec(item)
            except MarkerError as exc:
                self.notes.add(f"not measured: {item.nodeid}: {exc}")
                return None
        if spec is None and self.settings.measure_all:
            return MarkerSpec()
        return spec

    def begin(self, item: pytest.Item) -> TestRun | None:
        """Start measuring before setup, if the test is measured; ends any earlier run."""
        self.end()
        spec = self.spec_for(item)
        if spec is None or self.backend is None:
            return None
        measurement = TestMeasurement(
            nodeid=item.nodeid,
            backend=self.backend.name,
            device=self.backend.device,
            label=self.backend.label,
            limits=limits_for(spec, self.settings),
        )
        self.current = TestRun(item, self.backend.tracker(), measurement)
        self.current.tracker.start()
        return self.current

    def run_for(self, item: pytest.Item) -> TestRun | None:
        run = self.current
        return run if run is not None and run.item is item else None

    def body(self, run: TestRun) -> Callable[[BaseException | None], None]:
        """Open the body's peak window (repeating the body when asked); returns the closer."""
        item, m, tracker = run.item, run.measurement, run.tracker
        restore: Callable[[], None] = lambda: None  # noqa: E731
        if m.limits.repeat > 1 and isinstance(item, pytest.Function):
            original = item.obj
            undo = _run_undoer(item)

            def repeated(*args: Any, **kwargs: Any) -> Any:
                result = None
                for _ in range(m.limits.repeat):
                    mark = undo.mark()
                    result = original(*args, **kwargs)
                    undo.back_to(mark)  # what monkeypatch keeps for undoing is not the test's
                    m.live_after_runs.append(tracker.live_bytes())
                return result

            item.obj = repeated

            def restore() -> None:
                item.obj = original

        instance = getattr(item, "instance", None)
        if instance is not None:
            with contextlib.suppress(TypeError):
                run.instance = weakref.ref(instance)
        tracker.body_start()

        def close(exc: BaseException | None) -> None:
            restore()
            if exc is not None and _is_oom(exc):
                m.oom_message = str(exc)
            m.peak = tracker.body_end()
            self._drop_if_unmeasured(run)

        return close

    def on_report(self, run: TestRun, report: pytest.TestReport, verbosity: int) -> None:
        """Judge the phase just reported, fail its report if a limit broke, attach the record."""
        run.reports.append(report)
        m = run.measurement
        if m.outcome != "memory":
            m.outcome = _outcome(run.reports, oom=m.oom_message is not None)
        if report.when == "call" and m.outcome == "failed" and is_strict_xpass(report):
            # It passed; only its strict xfail failed it. A memory failure is the expected one.
            if expected_failure(run.item) is not None and m.judge_body():
                self._judge(run, report, verbosity, m.violations)
        elif report.when == "call" and m.outcome == "passed":
            self._judge(run, report, verbosity, m.judge_body())
        elif report.when == "teardown":
            # A peak over budget is no reason to skip the leak check: both are reported.
            if (m.outcome in ("passed", "memory") and m.violations in ([], [PEAK])
                    and m.limits.repeat == 1 and m.not_measured is None):
                _drop_function_fixtures(run.item)
                m.leak = run.tracker.finish(_owned(run), m.limits.max_leak_bytes)
                found = [] if self._drop_if_unmeasured(run) else m.judge_leak()
                if found:
                    m.holders = _holders(run, m)
                self._judge(run, report, verbosity, found)
            else:
                run.tracker.finish(_owned(run))
            if self.settings.timeline_all and m.timeline_path is None:
                self._write_timeline(run)
        if report.when != "setup":
            attach_record(report, run.record())

    def _drop_if_unmeasured(self, run: TestRun) -> bool:
        """Drop figures the backend says are wrong, so no verdict rests on them, and say
        why in the record and the summary."""
        problem = run.tracker.problem
        if problem is None:
            return False
        m = run.measurement
        m.not_measured, m.peak, m.leak, m.live_after_runs = problem, None, None, []
        return True

    def _judge(
        self, run: TestRun, report: pytest.TestReport, verbosity: int, found: list[str]
    ) -> None:
        m = run.measurement
        if not found:
            return
        if m.peak is not None and not m.peak.sites:
            m.peak = replace(m.peak, sites=run.tracker.explain_peak())
        backend = self.backend
        if backend is not None and backend.has_snapshots and m.snapshot_path is None:
            snapshot = backend.dump_snapshot(self._snapshot_path(m.nodeid))
            m.snapshot_path = None if snapshot is None else str(snapshot)
        self._write_timeline(run)
        if LEAK in found and m.limits.repeat > 1 and m.leak is None:
            _explain_growth(run, m)  # after the snapshot: it may touch the allocator
        link_measurement(self.linker, m)  # memlint's findings at the sites, if any
        report.longrepr = memory_longrepr(
            failure_text(m, verbosity, found), headline(m, found), report.location
        )
        reason = expected_failure(run.item)
        if reason is not None:  # an xfail test failing on memory: the expected failure
            m.outcome = "skipped"
            mark_expected(report, reason)
            return
        m.outcome = "memory"
        report.outcome = "failed"

    def _snapshot_path(self, nodeid: str) -> Path:
        directory = self.settings.snapshot_dir
        if directory is None:
            directory = (
                self.artifact_dir() if self.artifact_dir is not None
                else Path(tempfile.mkdtemp(prefix="gpumem-"))
            )
        return _artifact_path(Path(directory), nodeid, ".pickle")

    def _write_timeline(self, run: TestRun) -> None:
        """The HTML timeline of a memory failure, or of every measured test when asked."""
        m, settings = run.measurement, self.settings
        if settings.timeline_dir is None or m.peak is None:
            return
        timeline = run.tracker.timeline()
        if timeline is None:
            self.notes.add(f"no memory timeline: {run.tracker.no_timeline_reason}")
            return
        path = _artifact_path(settings.timeline_dir, m.nodeid, ".html")
        page = render_html(
            timeline,
            nodeid=m.nodeid,
            backend=m.backend,
            device=m.device,
            budget_bytes=m.limits.budget_bytes,
            measured_by=m.label,
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page, encoding="utf-8")
        except OSError as exc:
            self.notes.add(f"could not write memory timelines: {exc}")
            return
        m.timeline_path = str(path)

    def end(self) -> None:
        if self.current is not None:
            self.current.tracker.close()
            self.current = None

    # -- the whole run ------------------------------------------------------------------

    def add_record(self, record: dict[str, Any]) -> None:
        self.records[str(record["nodeid"])] = record

    def top_peaks(self, n: int | None) -> list[dict[str, Any]]:
        measured = [r for r in self.records.values() if r.get("peak_bytes") is not None]
        ranked = sorted(measured, key=lambda r: (-int(r["peak_bytes"]), str(r["nodeid"])))
        return ranked if n is None else ranked[:n]

    def summary_lines(self, peaks: list[dict[str, Any]]) -> list[str]:
        lines = []
        for r in peaks:
            budget = r.get("budget_bytes")
            limit = "no budget" if budget is None else f"budget {format_bytes(int(budget))}"
            lines.append(f"{format_bytes(int(r['peak_bytes'])):>12}  ({limit}, "
                         f"{r['backend']} {r['device']})  {r['nodeid']}")
        labels = sorted({str(r.get("measurement")) for r in peaks})
        return lines + [f"measured by: {label}" for label in labels]

    def coverage_line(self) -> str | None:
        """How many tests were measured, when not all were; says how to measure the rest."""
        measured, total = len(self.records), len(self.seen)
        if self.settings.measure_all or measured == total:
            return None
        if measured == 0:
            return (f"no test measured: none of the {total} tests that ran carries a gpu_mem "
                    "marker; --gpumem-all (ini gpumem_all = true) measures every test")
        return (f"{measured} of {total} tests measured (those with a gpu_mem marker); "
                "--gpumem-all measures every test")

    def closing_notes(self) -> list[str]:
        """Remarks about options that had no effect, or artifacts the run left behind."""
        notes = set(self.notes)
        # From the records, so that a test an xdist worker could not measure is named too.
        notes.update(f"not measured: {r['nodeid']}: {r['not_measured']}"
                     for r in self.records.values() if r.get("not_measured"))
        settings, backend = self.settings, self.backend
        if settings.snapshot_dir is not None and backend is not None and not backend.has_snapshots:
            measured = "cuda-fast" if backend.name == "cuda" else backend.name
            notes.add(
                "--gpumem-snapshot-dir: no snapshots written, memory snapshots need the CUDA "
                f"backend's allocation history (this run measured on {measured}); "
                "--gpumem-timeline-dir draws timelines on every backend but cuda-fast"
            )
        if settings.round_bytes != 1 and backend is not None and backend.name != "cpu":
            notes.add(f"--gpumem-round: no effect on the {backend.name} backend, which reads "
                      "the allocator's own block sizes; it rounds the cpu backend's storages")
        if settings.timeline_all and settings.timeline_dir is None:
            notes.add("--gpumem-timeline=all: no timelines written without --gpumem-timeline-dir")
        timelines = sum(1 for r in self.records.values() if r.get("timeline"))
        if timelines:
            notes.add(f"{timelines} memory timeline(s) written to {settings.timeline_dir}")
        return sorted(notes)

    def shutdown(self) -> None:
        self.end()
        if self.backend is not None:
            self.backend.shutdown()


STATE = pytest.StashKey[GpumemSession]()


def _owned(run: TestRun) -> tuple[object, ...]:
    """The test's class instance if still alive: what it holds is the test's own state, gone
    with the instance, however long pytest (a class test's item) or a protocol plugin (flaky
    holds a TestCase until its reruns are decided) keeps the instance itself."""
    instance = run.instance() if run.instance is not None else None
    return () if instance is None else (instance,)


def _explain_growth(run: TestRun, m: TestMeasurement) -> None:
    """For a test that grew on every repeated run: what the runs after the first made and
    still hold, and what keeps it; a clue, so a failure to find out leaves it out."""
    try:
        m.leak = run.tracker.growth_survivors()
    except Exception:
        m.leak = None
    if m.leak is not None and m.leak.survivors:
        m.holders = _holders(run, m)


def _holders(run: TestRun, m: TestMeasurement) -> list[str]:
    """What keeps a leak alive: a clue for the report, so a failure to find out (an object
    of the test's that breaks when inspected) leaves the clue out, never the verdict."""
    try:
        return holders_of(m.leak, fixture_roots(run.item), run.tracker.key_of)
    except Exception:
        return []


def _drop_function_fixtures(item: pytest.Item) -> None:
    """Forget the values of the test's torn-down function-scoped fixtures now, as pytest does
    right after teardown, so they are not taken for memory the test left behind. Values of
    wider-scoped fixtures stay: they are alive for other tests anyway."""
    funcargs = getattr(item, "funcargs", None)
    info = getattr(item, "_fixtureinfo", None)
    if not funcargs or info is None:
        return
    wider = {
        name for name, defs in info.name2fixturedefs.items()
        if defs and defs[-1].scope != "function"
    }
    for name in [n for n in funcargs if n not in wider]:
        del funcargs[name]


class _Undoer:
    """Undo the monkeypatching one repeated run did, so what ``monkeypatch`` keeps for its
    own undo list (the values each run replaced: a previous run's ``Mock`` with the
    tensors it was called with) does not look like growth from run to run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch | None) -> None:
        self.mp = monkeypatch

    def mark(self) -> tuple[int, int] | None:
        mp = self.mp
        if mp is None:
            return None
        return len(getattr(mp, "_setattr", ())), len(getattr(mp, "_setitem", ()))

    def back_to(self, mark: tuple[int, int] | None) -> None:
        mp = self.mp
        if mp is None or mark is None:
            return
        setattrs, setitems = getattr(mp, "_setattr", None), getattr(mp, "_setitem", None)
        if not isinstance(setattrs, list) or not isinstance(setitems, list):
            return
        newer = pytest.MonkeyPatch()  # undone with pytest's own code, in its order
        newer._setattr, newer._setitem = setattrs[mark[0]:], setitems[mark[1]:]
        del setattrs[mark[0]:], setitems[mark[1]:]
        newer.undo()


def _run_undoer(item: pytest.Item) -> _Undoer:
    funcargs = getattr(item, "funcargs", None) or {}
    mp = funcargs.get("monkeypatch")
    return _Undoer(mp if isinstance(mp, pytest.MonkeyPatch) else None)

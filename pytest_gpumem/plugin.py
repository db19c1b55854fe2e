"""pytest hooks for per-test tensor memory budgets; the logic lives in the sibling modules.

Registered as the ``pytest11`` entry point ``gpumem``. Nothing here imports torch unless
``--gpumem`` (or ini ``gpumem = true``) is on or a ``gpumem`` fixture is requested.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _pytest.runner import runtestprotocol
from _pytest.terminal import TerminalReporter

from pytest_gpumem.backends import require_torch
from pytest_gpumem.fixtures import GpumemProbe, probe_for
from pytest_gpumem.json_report import write_json_report
from pytest_gpumem.linked import link_measurement
from pytest_gpumem.marker import MARKER_HELP, MarkerError, marker_spec
from pytest_gpumem.options import add_options, read_settings
from pytest_gpumem.report import failure_text, headline, memory_longrepr
from pytest_gpumem.result import RECORD_KEY, TestMeasurement
from pytest_gpumem.session import GpumemSession, TestRun
from pytest_gpumem.timeline import render_html

STATE = pytest.StashKey[GpumemSession]()
HOOKS_NAME = "gpumem-session"
# CI features (baselines, xdist device pinning, NVML view) live in their own plugin module.
pytest_plugins = ("pytest_gpumem.gate",)


def _state(config: pytest.Config) -> GpumemSession | None:
    return config.stash.get(STATE, None)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Refuse --gpumem without torch before any configure hook can touch torch."""
    if read_settings(config).enabled:
        require_torch()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    state = GpumemSession(read_settings(config))
    config.stash[STATE] = state
    if state.settings.enabled:
        state.start_backend()  # a one-line UsageError when torch or CUDA is missing
        config.pluginmanager.register(GpumemHooks(state, config), HOOKS_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state(config)
    if state is not None:
        state.shutdown()
    hooks = config.pluginmanager.get_plugin(HOOKS_NAME)
    if hooks is not None:
        config.pluginmanager.unregister(hooks)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item):
            try:
                marker_spec(item)
            except MarkerError as exc:
                raise collector.CollectError(f"{item.nodeid}: {exc}") from None
    return result



def _outcome(reports: list[pytest.TestReport], oom: bool) -> str:
    for report in reports:
        if report.when != "call" and report.failed:
            return "error"
        if report.skipped:
            return "skipped"
        if report.when == "call" and report.failed and not oom:
            return "failed"
    return "passed"


def _is_oom(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom = getattr(torch, "OutOfMemoryError", None)
    return isinstance(oom, type) and isinstance(exc, oom)


def _violations(report: pytest.TestReport) -> bool:
    return any(
        key == RECORD_KEY and isinstance(value, dict) and bool(value.get("violations"))
        for key, value in report.user_properties
    )


class GpumemHooks:
    """The hooks that act on tests; registered per session only when --gpumem is on, so an
    ordinary run never enters them."""

    def __init__(self, state: GpumemSession, config: pytest.Config) -> None:
        self.state = state
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        """Run a marked test ourselves, holding its reports until teardown is over.

        The leak verdict needs the state after teardown (and after pytest drops the fixture
        values), yet it belongs on the call report, so a leaking test shows one ``M`` rather
        than a pass followed by a teardown error.
        """
        spec = marker_spec(item)
        if spec is None:
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        run = self.state.begin(item, spec)
        try:
            run.tracker.start()
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            self._conclude(run, reports)
        finally:
            self.state.end()
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def _snapshot_path(self, nodeid: str) -> Path:
        directory = self.state.settings.snapshot_dir
        if directory is None:
            cache = getattr(self.config, "cache", None)  # None under -p no:cacheprovider
            directory = (
                cache.mkdir("gpumem-snapshots") if cache is not None
                else Path(tempfile.mkdtemp(prefix="gpumem-"))
            )
        return _artifact_path(Path(directory), nodeid, ".pickle")

    def _write_timeline(self, run: TestRun) -> None:
        """The HTML timeline of a memory failure, or of every measured test when asked."""
        m, settings = run.measurement, self.state.settings
        if settings.timeline_dir is None or m.peak is None:
            return
        if not (m.violations or settings.timeline_all):
            return
        timeline = run.tracker.timeline()
        if timeline is None:
            self.state.notes.add(
                "no memory timeline: this torch's allocator trace has no timestamps"
            )
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
            self.state.notes.add(f"could not write memory timelines: {exc}")
            return
        m.timeline_path = str(path)

    def _conclude(self, run: TestRun, reports: list[pytest.TestReport]) -> None:
        m: TestMeasurement = run.measurement
        leak = run.tracker.finish()
        m.outcome = _outcome(reports, oom=m.oom_message is not None)
        call = next((r for r in reports if r.when == "call"), None)
        failed_memory = False
        if m.outcome == "passed" and call is not None:
            # After an OOM the traceback keeps the test's frames alive: no leak verdict then.
            m.leak = leak if m.oom_message is None else None
            failed_memory = bool(m.judge())
            if failed_memory and m.peak is not None and not m.peak.sites:
                m.peak = replace(m.peak, sites=run.tracker.explain_peak())
            if failed_memory:
                link_measurement(self.state.linker, m)
                backend = self.state.backend
                if backend is not None and backend.has_snapshots:
                    snapshot = backend.dump_snapshot(self._snapshot_path(m.nodeid))
                    m.snapshot_path = None if snapshot is None else str(snapshot)
        self._write_timeline(run)
        if failed_memory and call is not None:
            m.outcome = "memory"
            call.outcome = "failed"
            call.longrepr = memory_longrepr(
                failure_text(m, self.config.get_verbosity()),
                headline(m, with_test=False),
                call.location,
            )
        carrier = call if call is not None else reports[0]
        carrier.user_properties.append((RECORD_KEY, m.to_json()))

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        """Memory a wider-scoped fixture allocates belongs to that fixture, not the test."""
        run = self.state.current
        if run is None or fixturedef.scope == "function":
            return (yield)
        run.tracker.pause()
        try:
            return (yield)
        finally:
            run.tracker.resume()

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
        run = self.state.current
        if run is None or run.item is not pyfuncitem:
            return (yield)
        original = pyfuncitem.obj
        repeat = run.measurement.limits.repeat
        if repeat > 1:
            tracker, live = run.tracker, run.measurement.live_after_runs

            def repeated(*args: Any, **kwargs: Any) -> Any:
                result = None
                for _ in range(repeat):
                    result = original(*args, **kwargs)
                    live.append(tracker.live_bytes())
                return result

            pyfuncitem.obj = repeated
        run.tracker.body_start()
        try:
            return (yield)
        except BaseException as exc:
            if _is_oom(exc):
                run.measurement.oom_message = str(exc)
            raise
        finally:
            pyfuncitem.obj = original
            run.measurement.peak = run.tracker.body_end()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records here, so an xdist controller receives every worker's results."""
        for key, value in report.user_properties:
            if key == RECORD_KEY and isinstance(value, dict):
                self.state.add_record(value)

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        if report.when == "call" and report.failed and _violations(report):
            return "failed", "M", ("MEMORY", {"red": True})
        return None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        json_path = self.state.settings.json_path
        if json_path is not None and not hasattr(session.config, "workerinput"):
            write_json_report(json_path, self.state.records)

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        peaks = self.state.top_peaks(self.state.settings.top)
        if peaks:
            terminalreporter.section(f"gpumem: {len(peaks)} highest peaks")
            for line in self.state.summary_lines(peaks):
                terminalreporter.write_line(line)
        notes = self.state.closing_notes()
        if notes:
            terminalreporter.section("gpumem notes")
            for line in notes:
                terminalreporter.write_line(line)


def _artifact_path(directory: Path, nodeid: str, suffix: str) -> Path:
    """One file per test, named after its node id in characters every file system takes."""
    return directory / (re.sub(r"[^\w.-]+", "_", nodeid)[-150:] + suffix)


@pytest.fixture
def gpumem(request: pytest.FixtureRequest) -> GpumemProbe:
    """Measure blocks inside a test: ``with gpumem.track() as m: ...`` then ``m.peak_bytes``."""
    state = _state(request.config)
    assert state is not None
    return probe_for(state)


@pytest.fixture
def gpumem_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` this run measures: CUDA under the CUDA backend, else CPU."""
    state = _state(request.config)
    assert state is not None
    return probe_for(state).device


"""pytest hooks for per-test tensor memory budgets; the logic lives in the sibling modules.

Registered as the ``pytest11`` entry point ``gpumem``. Nothing here imports torch unless
``--gpumem`` (or ini ``gpumem = true``) is on or a ``gpumem`` fixture is requested.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from _pytest.reports import CollectReport
from _pytest.terminal import TerminalReporter

from pytest_gpumem.backends import require_torch
from pytest_gpumem.entrypoint import ENTRY_POINT, MODULE
from pytest_gpumem.fixtures import GpumemProbe, probe_for
from pytest_gpumem.json_report import write_json_report
from pytest_gpumem.leaks import frozen_heap
from pytest_gpumem.loaded_modules import remember_torch_modules, restore_torch_modules
from pytest_gpumem.marker import MARKER_HELP
from pytest_gpumem.options import add_options, read_settings, require_outputs
from pytest_gpumem.result import record_of
from pytest_gpumem.session import STATE, GpumemSession, check_markers

HOOKS_NAME = "gpumem-session"
# CI features (baselines, xdist device pinning, NVML view) live in their own plugin module.
pytest_plugins = ("pytest_gpumem.gate",)


def _state(config: pytest.Config) -> GpumemSession | None:
    return config.stash.get(STATE, None)


class _Alias:
    """Holds the plugin's other name in pytest's plugin registry; has no hooks."""


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_options(parser)
    # Loaded under one name (the "gpumem" entry point, or -p/pytest_plugins with the module
    # path), reserve the other, so that naming the plugin both ways (the installed entry
    # point and `pytest_plugins = ["pytest_gpumem.plugin"]` in a conftest) loads it once
    # instead of failing with pluggy's "Plugin already registered under a different name".
    for name in (ENTRY_POINT, MODULE):
        if pluginmanager.get_plugin(name) is None and not pluginmanager.is_blocked(name):
            pluginmanager.register(_Alias(), name)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    """A torch an earlier in-process run (pytester) imported is back before anything
    imports it again (see :mod:`pytest_gpumem.loaded_modules`)."""
    restore_torch_modules()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Refuse --gpumem without torch before any configure hook can touch torch, and an
    output file the run could not write before the run rather than after it."""
    if config.option.help or config.option.version:
        return  # pytest --help shows the options whatever their values
    settings = read_settings(config)
    if settings.enabled:
        require_torch()
        require_outputs(settings)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    state = GpumemSession(read_settings(config))
    config.stash[STATE] = state
    if state.settings.enabled:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        if cache is not None:
            state.artifact_dir = lambda: cache.mkdir("gpumem-snapshots")
        state.start_backend()  # a one-line UsageError when torch or CUDA is missing
        config.pluginmanager.register(GpumemHooks(state, config), HOOKS_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state(config)
    if state is not None:
        state.shutdown()
    remember_torch_modules()
    hooks = config.pluginmanager.get_plugin(HOOKS_NAME)
    if hooks is not None:
        config.pluginmanager.unregister(hooks)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """Check every marker once all collection hooks (conftests' too) are done: a bad one is a
    one-line collection error, wherever the marker came from."""
    yield
    bad, errors = check_markers(items)
    if not bad:
        return
    dropped = {id(item) for item in bad}
    items[:] = [item for item in items if id(item) not in dropped]
    for nodeid, message in errors:
        report = CollectReport(nodeid, "failed", message, [])
        config.hook.pytest_collectreport(report=report)


def _violations(report: pytest.TestReport) -> bool:
    record = record_of(report)
    return record is not None and bool(record.get("violations"))


class GpumemHooks:
    """The hooks that act on tests; registered per session only when --gpumem is on, so an
    ordinary run never enters them. They wrap pytest's phases and never run a test
    themselves, so every plugin that drives the protocol keeps working."""

    def __init__(self, state: GpumemSession, config: pytest.Config) -> None:
        self.state = state
        self.config = config

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Leak verdicts' full collections walk only what the tests made (``frozen_heap``);
        an xdist worker freezes its own heap, the controller, which runs no test, none."""
        if session.config.pluginmanager.has_plugin("dsession"):
            return (yield)
        with frozen_heap():
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        self.state.begin(item)
        return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        run = self.state.run_for(item)
        if run is None:
            return (yield)
        close = self.state.body(run)
        try:
            result = yield
        except BaseException as exc:
            close(exc)
            raise
        close(None)
        return result

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
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        run = self.state.run_for(item)
        if run is not None:
            self.state.on_report(run, report, self.config.get_verbosity())
            if report.when == "teardown":
                self.state.end()
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records here, so an xdist controller receives every worker's results."""
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.state.seen.add(report.nodeid)
        record = record_of(report)
        if record is not None:
            self.state.add_record(record)

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        if report.failed and report.when in ("call", "teardown") and _violations(report):
            category = "failed" if report.when == "call" else "error"
            return category, "M", ("MEMORY", {"red": True})
        return None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        json_path = self.state.settings.json_path
        if json_path is not None and not hasattr(session.config, "workerinput"):
            try:
                write_json_report(json_path, list(self.state.records.values()))
            except OSError as exc:
                self.state.notes.add(f"could not write the JSON report {json_path}: {exc}")

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        peaks = self.state.top_peaks(self.state.settings.top)
        coverage = self.state.coverage_line()
        if peaks or coverage:
            title = f"gpumem: {len(peaks)} highest peaks" if peaks else "gpumem"
            terminalreporter.section(title)
            for line in self.state.summary_lines(peaks):
                terminalreporter.write_line(line)
            if coverage:
                terminalreporter.write_line(coverage)
        notes = self.state.closing_notes()
        if notes:
            terminalreporter.section("gpumem notes")
            for line in notes:
                terminalreporter.write_line(line)


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


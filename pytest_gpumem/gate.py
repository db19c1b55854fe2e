"""The plugin as a CI memory gate: baselines, one GPU per xdist worker, the NVML view.

It also exposes the ``gpumem_batch_size`` fixture (:mod:`pytest_gpumem.batch_size`).

The plugin core (:mod:`pytest_gpumem.plugin`) measures marked tests and attaches one JSON
record per test to its report. This module adds to that record, on the process that ran
the test (an xdist worker or the only process), the worker id, the NVML reading and the
verdict against the baseline; a regression turns the report into a memory failure there.
Because everything rides on the report, a worker that crashes later loses nothing that
already finished. The controller keeps a line-per-record journal next to ``--gpumem-json``
until the final report is written, and writes the updated baseline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gpumem.baseline import (
    DEFAULT_TOLERANCE,
    BaselineEntry,
    BaselineError,
    Tolerance,
    VerdictKind,
    compare,
    load_baseline,
    parse_tolerance,
    updated_baseline,
    write_baseline,
)
from pytest_gpumem.batch_size import gpumem_batch_size  # noqa: F401 - the fixture
from pytest_gpumem.devices import (
    DeviceConfigError,
    parse_device_list,
    parse_memory_fraction,
    pick_device,
    worker_id,
)
from pytest_gpumem.nvml import NvmlReading, NvmlUnavailable, NvmlView, outside_allocator
from pytest_gpumem.options import (
    add_option,
    ini_relative,
    ini_text,
    parse_bool,
    read_settings,
    require_writable,
)
from pytest_gpumem.report import memory_longrepr
from pytest_gpumem.result import record_of
from pytest_gpumem.units import format_bytes, gib_to_bytes
from pytest_gpumem.xfail import mark_expected

GATE_NAME = "gpumem-gate"
BASELINE_VIOLATION, NVML_VIOLATION = "baseline", "nvml"


@dataclass(frozen=True)
class _Option:
    flag: str
    ini: str
    help: str
    metavar: str | None = None  # None: a switch (store_true, a bool ini key)


_OPTIONS = (
    _Option(
        "--gpumem-baseline",
        "gpumem_baseline",
        "JSON file of per-test peaks to compare against (see --gpumem-update-baseline).",
        "PATH",
    ),
    _Option(
        "--gpumem-tolerance",
        "gpumem_tolerance",
        f"allowed peak growth over the baseline: '10%', '+16MiB' or both "
        f"(the larger applies); default {DEFAULT_TOLERANCE}.",
        "TOLERANCE",
    ),
    _Option(
        "--gpumem-update-baseline",
        "gpumem_update_baseline",
        "rewrite the baseline from this run instead of failing on regressions.",
    ),
    _Option(
        "--gpumem-baseline-strict",
        "gpumem_baseline_strict",
        "fail, rather than warn, when the baseline was measured on another backend.",
    ),
    _Option(
        "--gpumem-devices",
        "gpumem_devices",
        "CUDA devices to spread xdist workers over, e.g. '0,1' (default: all visible).",
        "IDS",
    ),
    _Option(
        "--gpumem-memory-fraction",
        "gpumem_memory_fraction",
        "cap each process at this fraction of its GPU (set_per_process_memory_fraction).",
        "FRACTION",
    ),
    _Option(
        "--gpumem-nvml",
        "gpumem_nvml",
        "add the driver's (NVML) view of the process's GPU memory to every record.",
    ),
    _Option(
        "--gpumem-nvml-max-gb",
        "gpumem_nvml_max_gb",
        "fail a measured test when the NVML figure after it passes this many GiB.",
        "GIB",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    for opt in _OPTIONS:
        add_option(parser, opt.flag, opt.flag.lstrip("-").replace("-", "_"), opt.ini, opt.help,
                   metavar=opt.metavar)


def _raw(config: pytest.Config, opt: _Option) -> str | None:
    """Command line over ini; ``None`` when neither sets it."""
    cli = config.getoption(opt.flag.lstrip("-").replace("-", "_"))
    if cli is not None:
        return "true" if cli is True else str(cli)
    text = ini_text(config, opt.ini)
    return None if text is None else text.strip()


def _baseline_path(config: pytest.Config) -> Path | None:
    """The baseline file: a command-line path as given, an ini path relative to the ini
    file (so a run started from a subfolder finds the committed baseline)."""
    cli = config.getoption("gpumem_baseline")
    if cli is not None:
        return Path(str(cli)).expanduser() if str(cli).strip() else None
    text = ini_text(config, "gpumem_baseline")
    return None if text is None else ini_relative(config, Path(text.strip()).expanduser())


def _flag(text: str | None, name: str) -> bool:
    """A switch from the command line (``true``) or its ini key, where a bad word can be."""
    return False if text is None else parse_bool(f"ini option {name}", text)


@dataclass(frozen=True)
class GateSettings:
    baseline: Path | None = None
    tolerance: Tolerance = field(default_factory=lambda: parse_tolerance(DEFAULT_TOLERANCE))
    update: bool = False
    strict: bool = False
    devices: tuple[int, ...] = ()
    memory_fraction: float | None = None
    nvml: bool = False
    nvml_budget_bytes: int | None = None


def read_gate_settings(config: pytest.Config) -> GateSettings:
    """Every bad value becomes a one-line usage error."""
    raw = {opt.ini: _raw(config, opt) for opt in _OPTIONS}
    try:
        tolerance = parse_tolerance(raw["gpumem_tolerance"] or DEFAULT_TOLERANCE)
        devices = parse_device_list(raw["gpumem_devices"]) if raw["gpumem_devices"] else []
        fraction_text = raw["gpumem_memory_fraction"]
        fraction = parse_memory_fraction(fraction_text) if fraction_text else None
    except (BaselineError, DeviceConfigError) as exc:
        raise pytest.UsageError(f"pytest_gpumem: {exc}") from None
    nvml_budget = None
    if raw["gpumem_nvml_max_gb"] is not None:
        try:
            nvml_gb = float(raw["gpumem_nvml_max_gb"])
        except ValueError:
            nvml_gb = -1.0
        if not nvml_gb > 0:
            raise pytest.UsageError(
                f"--gpumem-nvml-max-gb must be a positive number of GiB, "
                f"got {raw['gpumem_nvml_max_gb']!r}"
            )
        nvml_budget = gib_to_bytes(nvml_gb)
    return GateSettings(
        baseline=_baseline_path(config),
        tolerance=tolerance,
        update=_flag(raw["gpumem_update_baseline"], "gpumem_update_baseline"),
        strict=_flag(raw["gpumem_baseline_strict"], "gpumem_baseline_strict"),
        devices=tuple(devices),
        memory_fraction=fraction,
        nvml=_flag(raw["gpumem_nvml"], "gpumem_nvml") or nvml_budget is not None,
        nvml_budget_bytes=nvml_budget,
    )


def _allocator_figures(device_index: int | None) -> tuple[int, int]:
    """(reserved, allocated) bytes of torch's caching allocator on the measured device."""
    import torch

    index = torch.cuda.current_device() if device_index is None else device_index
    return int(torch.cuda.memory_reserved(index)), int(torch.cuda.memory_allocated(index))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pin_device(config: pytest.Config, backend_choice: str, gate: GateSettings) -> int | None:
    """Make this process's current CUDA device its own, before the core picks a device."""
    if backend_choice in ("cpu", "cpu-fast"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        worker = worker_id() if _is_worker(config) else "main"
        pinning = pick_device(worker, list(gate.devices), torch.cuda.device_count())
    except DeviceConfigError as exc:
        raise pytest.UsageError(f"pytest_gpumem: {exc}") from None
    index = pinning.device_index
    if index is None:
        index = torch.cuda.current_device()
    else:
        torch.cuda.set_device(index)
    if gate.memory_fraction is not None:
        torch.cuda.set_per_process_memory_fraction(gate.memory_fraction, index)
    return int(index)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Runs before the core's configure, so the core's CUDA backend sees the pinned device."""
    settings = read_settings(config)
    gate = read_gate_settings(config)
    if not settings.enabled:
        return
    if gate.update and gate.baseline is not None and not _is_worker(config):
        require_writable(gate.baseline, "baseline")
    device_index = pin_device(config, settings.backend, gate)
    config.pluginmanager.register(Gate(config, gate, device_index), GATE_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    gate = config.pluginmanager.get_plugin(GATE_NAME)
    if isinstance(gate, Gate):
        gate.close()
        config.pluginmanager.unregister(gate)


@dataclass
class _Tally:
    compared: int = 0
    regressions: list[str] = field(default_factory=list)
    new: int = 0
    mismatched: list[str] = field(default_factory=list)


class Gate:
    """Session hooks of the CI gate; registered only when --gpumem is on."""

    def __init__(self, config: pytest.Config, settings: GateSettings, device: int | None):
        self.config = config
        self.settings = settings
        self.worker = worker_id() if _is_worker(config) else "main"
        self.device_index = device
        self.baseline: dict[str, BaselineEntry] | None = None
        if settings.baseline is not None:
            try:
                self.baseline = load_baseline(settings.baseline)
            except BaselineError as exc:
                raise pytest.UsageError(f"pytest_gpumem: {exc}") from None
        self.nvml: NvmlView | None = None
        self.nvml_problem: str | None = None
        if settings.nvml:
            self._open_nvml()
        self.filtered = False
        self.collected: set[str] = set()
        self.tally = _Tally()
        self.records: dict[str, dict[str, Any]] = {}
        self.journal: Path | None = None
        json_path = read_settings(config).json_path
        if json_path is not None and not _is_worker(config):
            journal = json_path.with_name(json_path.name + ".partial.jsonl")
            try:  # the report's folder was checked before the run (not under --help)
                journal.parent.mkdir(parents=True, exist_ok=True)
                journal.write_text("", encoding="utf-8")
                self.journal = journal
            except OSError:
                self.journal = None
        self.baseline_written: str | None = None
        self.annotated: dict[str, dict[str, Any]] = {}  # per test run, on the measuring process

    def _open_nvml(self) -> None:
        try:
            self.nvml = NvmlView.open(self.device_index or 0)
        except NvmlUnavailable as exc:
            self.nvml_problem = str(exc)

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()
            self.nvml = None
        final = read_settings(self.config).json_path
        if self.journal is not None and final is not None and final.exists():
            self.journal.unlink(missing_ok=True)  # the full report made it to disk

    # -- what the run covered ---------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected.update(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(ids)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if items:
            self.filtered = True

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.filtered = True  # tests of a module that failed to import still exist

    def _run_was_filtered(self) -> bool:
        option = vars(self.config.option)
        if self.filtered or any(option.get(name) for name in ("keyword", "markexpr", "deselect")):
            return True
        if option.get("lf") or option.get("last_failed"):
            return True
        if self.config.args_source != pytest.Config.ArgsSource.ARGS:
            return False
        roots = {Path(p).resolve() for p in self.config.getini("testpaths")}
        roots.add(self.config.rootpath.resolve())
        given = [arg.split("::", 1) for arg in self.config.args]
        return any(len(parts) > 1 or Path(parts[0]).resolve() not in roots for parts in given)

    # -- one test ---------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            self.annotated.pop(report.nodeid, None)  # a new run (or rerun) of the test
        record = record_of(report)
        if record is None:
            return
        if "worker" not in record:  # the process that measured the test sees it first
            saved = self.annotated.get(report.nodeid)
            if saved is None:  # the run's first record: read NVML, compare, maybe fail
                self._annotate(record, report)
                self.annotated[report.nodeid] = {
                    key: record[key] for key in _ANNOTATIONS if key in record
                }
            else:  # its later record (after teardown) keeps what the first one found
                _merge(record, saved)
        if not _is_worker(self.config):
            self.records[str(record["nodeid"])] = record
            if self.journal is not None:
                with self.journal.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record, sort_keys=True) + "\n")

    def _annotate(self, record: dict[str, Any], report: pytest.TestReport) -> None:
        record["worker"] = self.worker
        problems: list[tuple[str, str]] = []
        if self.nvml is not None:
            reading = self.nvml.read()
            record["nvml"] = {
                "used_bytes": reading.used_bytes,
                "total_bytes": reading.total_bytes,
                "scope": reading.scope,
                "note": reading.note,
            }
            explained = ""
            if record.get("backend") == "cuda":
                reserved, allocated = _allocator_figures(self.device_index)
                explained = outside_allocator(reading, reserved, allocated)
                record["nvml"].update(
                    torch_reserved_bytes=reserved,
                    torch_allocated_bytes=allocated,
                    outside_allocator_bytes=reading.used_bytes - reserved,
                )
            budget = self.settings.nvml_budget_bytes
            if budget is not None and reading.used_bytes > budget:
                problems.append(
                    (
                        NVML_VIOLATION,
                        f"NVML {reading.scope} memory {format_bytes(reading.used_bytes)} is over "
                        f"the budget of {format_bytes(budget)} on {self.nvml.label}"
                        + (f" ({reading.note})" if reading.note else "")
                        + (f"; {explained}" if explained else ""),
                    )
                )
        peak = record.get("peak_bytes")
        if self.baseline is not None and peak is not None:
            verdict = compare(
                self.baseline.get(str(record["nodeid"])),
                peak_bytes=int(peak),
                backend=str(record["backend"]),
                device=str(record["device"]),
                tolerance=self.settings.tolerance,
                strict_backend=self.settings.strict,
            )
            entry = self.baseline.get(str(record["nodeid"]))
            record["baseline"] = {
                "verdict": verdict.kind.value,
                "message": verdict.message,
                "peak_bytes": None if entry is None else entry.peak_bytes,
            }
            if verdict.fails and not self.settings.update:
                problems.append((BASELINE_VIOLATION, verdict.message))
        if problems and record.get("outcome") in ("passed", "memory"):
            self._fail(record, report, problems)

    def _fail(
        self, record: dict[str, Any], report: pytest.TestReport, problems: list[tuple[str, str]]
    ) -> None:
        messages = [message for _, message in problems]
        if record.get("outcome") == "memory" and report.longrepr is not None:
            messages.append(str(report.longrepr).rstrip("\n"))
        record.setdefault("violations", []).extend(kind for kind, _ in problems)
        reason = getattr(report, "wasxfail", None)
        if report.passed and isinstance(reason, str):  # an xfail test's XPASS: now its XFAIL
            record["outcome"] = "skipped"
            mark_expected(report, reason)
        else:
            record["outcome"] = "memory"
            report.outcome = "failed"
        if self.config.get_verbosity() < 0:
            # -q: one line, as the core's own memory failures; pytest names the test.
            summary = "; ".join(m.splitlines()[0] for m in messages)
            report.longrepr = memory_longrepr(summary, summary, report.location)
        else:
            report.longrepr = memory_longrepr(
                "\n".join(messages), messages[0], report.location
            )

    # -- end of the run ---------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _is_worker(self.config):
            return
        for record in self.records.values():
            self._count(record)
        if self.settings.update and self.settings.baseline is not None:
            try:
                self._write_baseline()
            except OSError as exc:
                self.baseline_written = f"could not write {self.settings.baseline}: {exc}"

    def _count(self, record: dict[str, Any]) -> None:
        verdict = (record.get("baseline") or {}).get("verdict")
        if verdict is None:
            return
        tally = self.tally
        if verdict == VerdictKind.NEW.value:
            tally.new += 1
        elif verdict == VerdictKind.MISMATCH.value:
            tally.mismatched.append(str(record["nodeid"]))
        else:
            tally.compared += 1
            if verdict == VerdictKind.REGRESSION.value:
                tally.regressions.append(str(record["nodeid"]))

    def _write_baseline(self) -> None:
        path = self.settings.baseline
        assert path is not None
        measured = {
            nodeid: BaselineEntry(
                peak_bytes=int(record["peak_bytes"]),
                leaked_bytes=int(record.get("leaked_bytes") or 0),
                backend=str(record["backend"]),
                device=str(record["device"]),
            )
            for nodeid, record in self.records.items()
            if record.get("peak_bytes") is not None and record.get("outcome") in _KEEP
        }
        old = self.baseline or {}
        existing = None if self._run_was_filtered() else self.collected
        new = updated_baseline(old, measured, existing_ids=existing)
        write_baseline(path, new)
        dropped = len(set(old) - set(new))
        added = len(set(new) - set(old))
        changed = sum(1 for k, v in measured.items() if k in old and old[k] != v)
        self.baseline_written = (
            f"wrote {path}: {len(new)} entries ({added} new, {changed} changed, "
            f"{dropped} dropped{'' if existing is not None else '; filtered run, none dropped'})"
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = self._summary_lines()
        if not lines:
            return
        terminalreporter.section("gpumem gate")
        for line in lines:
            terminalreporter.write_line(line)

    def _summary_lines(self) -> list[str]:
        lines: list[str] = []
        if self.nvml_problem is not None:
            lines.append(f"NVML view off: {self.nvml_problem}")
        notes = sorted(
            {str(r["nvml"]["note"]) for r in self.records.values() if r.get("nvml", {}).get("note")}
        )
        lines.extend(f"NVML: {note}" for note in notes)
        explained = [
            r for r in self.records.values() if "torch_reserved_bytes" in r.get("nvml", {})
        ]
        if explained:
            top = max(explained, key=lambda r: (int(r["nvml"]["used_bytes"]), str(r["nodeid"])))
            nvml = top["nvml"]
            reading = NvmlReading(int(nvml["used_bytes"]), int(nvml["total_bytes"]), nvml["scope"])
            lines.append(
                f"NVML, highest after {top['nodeid']} ({top.get('worker')}): "
                + outside_allocator(
                    reading, int(nvml["torch_reserved_bytes"]), int(nvml["torch_allocated_bytes"])
                )
            )
        placement = sorted(
            {(str(r.get("worker")), str(r.get("device"))) for r in self.records.values()}
        )
        if len(placement) > 1 or any(worker != "main" for worker, _ in placement):
            lines.append(
                "workers: " + ", ".join(f"{worker} on {device}" for worker, device in placement)
            )
        if self.settings.baseline is not None:
            if self.baseline is None and not self.settings.update:
                lines.append(
                    f"no baseline at {self.settings.baseline} yet; "
                    "create it with --gpumem-update-baseline"
                )
            tally = self.tally
            if self.baseline is not None:
                lines.append(
                    f"baseline {self.settings.baseline}: {tally.compared} compared, "
                    f"{len(tally.regressions)} over tolerance "
                    f"{self.settings.tolerance.describe()}, {tally.new} without an entry"
                )
            for nodeid in tally.mismatched:
                lines.append(f"not compared (other backend or device): {nodeid}")
            if self.settings.update and tally.regressions:
                lines.append(
                    "accepted as the new baseline: " + ", ".join(sorted(tally.regressions))
                )
        if self.baseline_written is not None:
            lines.append(self.baseline_written)
        return lines


_KEEP = ("passed", "memory")  # measured tests; a test that failed on its own is not judged
_ANNOTATIONS = ("worker", "nvml", "baseline", "outcome", "violations")


def _merge(record: dict[str, Any], saved: dict[str, Any]) -> None:
    """Carry the gate's findings from a test's first record onto its later one."""
    gate_failed = saved.get("outcome") == "memory"
    for key in ("worker", "nvml", "baseline"):
        if key in saved:
            record[key] = saved[key]
    if gate_failed:
        record["outcome"] = "memory"
        kinds = [k for k in saved.get("violations", []) if k not in record["violations"]]
        record["violations"] = [*record["violations"], *kinds]

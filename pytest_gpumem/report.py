"""Failure text for a broken memory limit, as long as the verbosity asks for.

``-q``: one line with the test, the measured value, the limit, backend and device.
Default: that line plus the largest allocation sites with their sizes.
``-vv``: every site with its user call stack, and the backend's context counters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from _pytest._code.code import ReprEntryNative, ReprExceptionInfo, ReprFileLocation, ReprTraceback

from pytest_gpumem.backends.base import Site
from pytest_gpumem.holders import NOT_HELD
from pytest_gpumem.result import LEAK, OOM, PEAK, TestMeasurement
from pytest_gpumem.units import format_apart, format_bytes

if TYPE_CHECKING:
    from pytest_gpumem.linked import LintFinding

DEFAULT_SITES = 5
VIEWER = "https://pytorch.org/memory_viz"


def headline(m: TestMeasurement, found: Sequence[str] | None = None) -> str:
    """The one-line verdict on ``found`` (the test's violations found in one phase; all of
    them by default); pytest's short summary shows its start."""
    violations = m.violations if found is None else found
    parts: list[str] = []
    if OOM in violations:
        first = (m.oom_message or "").strip().splitlines() or [""]
        parts.append(f"torch.OutOfMemoryError inside the test ({first[0][:120]})")
    if PEAK in violations and m.limits.budget_bytes is not None and m.peak_bytes is not None:
        peak, budget = format_apart(m.peak_bytes, m.limits.budget_bytes)
        parts.append(f"peak {peak} exceeds budget {m.limits.budget_text} ({budget})")
    if LEAK in violations:
        leaked, allowed = format_apart(m.leaked_bytes or 0, m.limits.max_leak_bytes)
        tolerance = m.limits.max_leak_text
        if m.limits.max_leak_bytes:
            tolerance += f", {allowed}"
        if m.limits.repeat > 1:
            parts.append(f"live tensor memory grew by {leaked} over {m.limits.repeat} runs, "
                         f"more than {tolerance} on every run after the first")
        else:
            named = [h for h in m.holders if h != NOT_HELD]
            held = f"; held by {named[0]}" if len(named) == 1 else ""
            parts.append(f"leaked {leaked} still alive after teardown ({tolerance}){held}")
    return f"{'; '.join(parts)} [backend {m.backend}, device {m.device}]"


def _where(site: Site, full: bool) -> list[str]:
    if not site.frames:
        return ["(no user frame: allocated inside a library or another thread)"]
    frames = site.frames if full else site.frames[:1]
    return [f"{_relative(f)}:{line} in {fn}" for f, line, fn in frames]


def _relative(file: str) -> str:
    return os.path.relpath(file) if os.path.isabs(file) else file


def _sites(title: str, sites: tuple[Site, ...], verbosity: int,
           links: Mapping[int, list[LintFinding]] | None = None) -> list[str]:
    if not sites:
        return []
    full = verbosity >= 2
    shown = sites if full else sites[:DEFAULT_SITES]
    lines = [title]
    for index, site in enumerate(shown):
        where = _where(site, full)
        plural = "s" if site.count != 1 else ""
        lines.append(f"  {format_bytes(site.nbytes):>12}  {site.count} storage{plural}  {where[0]}")
        lines.extend(f"{'':>14}  called from {w}" for w in where[1:])
        # memlint's findings in the functions of this site: the static reason for the memory.
        lines.extend(f"{'':>14}  \u2190 {f.code} at {_relative(f.file)}:{f.line}: {f.message} "
                     f"(memlint rule {f.code})" for f in (links or {}).get(index, []))
    if len(sites) > len(shown):
        lines.append(f"  ... {len(sites) - len(shown)} more sites (-vv shows all)")
    return lines


def failure_text(m: TestMeasurement, verbosity: int, found: Sequence[str] | None = None) -> str:
    """The failure section for the violations ``found`` in one phase (all by default): a
    peak over budget fails the call and a leak the teardown, each with its own text."""
    violations = m.violations if found is None else found
    if verbosity < 0:
        # pytest names the test above this text and again in the short summary.
        return headline(m, violations)
    # pytest prints the test's name above this text, so it is not repeated here.
    lines = [headline(m, violations), f"measured by: {m.label}"]
    peak, leak = m.peak, m.leak
    if peak is not None:
        workspaces = peak.context.get("cublas_workspace_bytes", 0)
        of_which = (f" ({format_bytes(workspaces)} of it cuBLAS workspaces, set up before "
                    "every test)" if workspaces else "")
        lines.append(f"peak above the {format_bytes(peak.baseline_bytes)} allocated when the "
                     f"test body started{of_which}: {format_bytes(peak.peak_bytes)}")
        if PEAK in violations or OOM in violations or verbosity >= 2:
            lines += _sites("largest allocations alive at the peak:", peak.sites, verbosity,
                            m.peak_links)
    if m.limits.repeat > 1 and m.live_after_runs:
        runs = ", ".join(format_bytes(b) for b in m.live_after_runs)
        lines.append(f"live tensor memory after each of {len(m.live_after_runs)} runs: {runs} "
                     "(the first run is a warm-up)")
    if leak is not None and (LEAK in violations or verbosity >= 2) and leak.storages:
        plural = "s" if leak.storages != 1 else ""
        title = (f"made after the first run and still alive ({leak.storages} storage{plural}):"
                 if m.limits.repeat > 1 else
                 f"still alive after teardown ({leak.storages} storage{plural}):")
        lines += _sites(title, leak.sites, verbosity, m.leak_links)
    if m.holders and LEAK in violations:
        lines.append("kept alive by:" if len(m.holders) > 1 else f"kept alive by: {m.holders[0]}")
        if len(m.holders) > 1:
            lines.extend(f"  {holder}" for holder in m.holders)
    if leak is not None and leak.graph_tensors:
        lines.append(
            f"{leak.graph_tensors} surviving tensor(s) still hold grad_fn, so an autograd graph "
            "and its saved activations stay alive: keep loss.item() or tensor.detach() "
            "instead of the tensor"
        )
    lines += m.lint_problems
    if verbosity >= 2 and peak is not None and peak.context:
        lines.append("context: " + ", ".join(f"{k}={v}" for k, v in sorted(peak.context.items())))
    if m.timeline_path:
        lines.append(f"memory timeline: {m.timeline_path}")
    if m.snapshot_path:
        lines.append(f"allocation history: {m.snapshot_path}")
        lines.append(f"  open it by dropping the file on {VIEWER}, or run: python -m "
                     f"torch.cuda._memory_viz trace_plot {m.snapshot_path} -o trace.html")
    return "\n".join(lines)


def memory_longrepr(
    text: str, summary: str, location: tuple[str, int | None, str]
) -> ReprExceptionInfo:
    """The failure as pytest shows an exception: ``text`` in the failures section, and only
    the one-line ``summary`` in the short test summary and junitxml's ``message``. A plain
    string would be printed whole in the short summary under -vv and on CI. Built from
    pytest's own serialisable parts, so it travels from xdist workers unchanged."""
    path, lineno, _ = location
    return ReprExceptionInfo(
        reprtraceback=ReprTraceback([ReprEntryNative([text.rstrip("\n") + "\n"])], None, "native"),
        reprcrash=ReprFileLocation(path, (lineno or 0) + 1, summary.splitlines()[0]),
    )

"""One marked test's measurement, the verdict on it, and its JSON form.

The record is built where the test ran (an xdist worker or the only process) and travels
on the test report as plain JSON data, so the controller never re-measures anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpumem.backends.base import LeakResult, PeakResult, Site
from pytest_gpumem.leaks import growth_per_run, repeat_leaks
from pytest_gpumem.options import Limits

if TYPE_CHECKING:
    from pytest_gpumem.linked import LintFinding

PEAK, LEAK, OOM = "peak", "leak", "oom"
# The report attribute carrying the record. An attribute, not a ``user_properties`` entry,
# which junitxml would print into every <testcase> as a Python dict: pytest serialises a
# report's attributes for xdist (``TestReport(**extra)``), so it reaches the controller.
RECORD_ATTR = "gpumem_record"
SITES_IN_JSON = 10


@dataclass
class TestMeasurement:
    """Everything measured for one test; ``violations`` is filled by :meth:`judge`."""

    __test__ = False

    nodeid: str
    backend: str
    device: str
    label: str
    limits: Limits
    peak: PeakResult | None = None
    leak: LeakResult | None = None
    live_after_runs: list[int] = field(default_factory=list)
    oom_message: str | None = None
    violations: list[str] = field(default_factory=list)
    snapshot_path: str | None = None
    timeline_path: str | None = None
    outcome: str = "passed"
    holders: list[str] = field(default_factory=list)  # what keeps the survivors alive
    # memlint's findings in the functions of each site (by index), for a memory failure.
    peak_links: dict[int, list[LintFinding]] = field(default_factory=dict)
    leak_links: dict[int, list[LintFinding]] = field(default_factory=dict)
    lint_problems: list[str] = field(default_factory=list)
    not_measured: str | None = None  # why the figures were dropped (no verdict on them)

    @property
    def peak_bytes(self) -> int | None:
        return None if self.peak is None else self.peak.peak_bytes

    @property
    def leaked_bytes(self) -> int | None:
        if self.limits.repeat > 1 and len(self.live_after_runs) > 1:
            return max(0, self.live_after_runs[-1] - self.live_after_runs[0])
        return None if self.leak is None else self.leak.leaked_bytes

    def judge_body(self) -> list[str]:
        """The limits the body broke: out of memory, the peak budget, growth on every
        repeat. Only asked of a test whose call otherwise passed (or ran out of memory)."""
        found: list[str] = []
        if self.oom_message is not None:
            found.append(OOM)
        budget = self.limits.budget_bytes
        if budget is not None and self.peak_bytes is not None and self.peak_bytes > budget:
            found.append(PEAK)
        if self.limits.repeat > 1 and repeat_leaks(
            self.live_after_runs, self.limits.max_leak_bytes
        ):
            found.append(LEAK)
        self.violations.extend(found)
        return found

    def judge_leak(self) -> list[str]:
        """After teardown: whether the test left more than its tolerance alive."""
        leak = self.leak
        # After an OOM the traceback keeps the test's frames alive: no leak verdict then.
        if self.oom_message is None and leak is not None and (
            leak.leaked_bytes > self.limits.max_leak_bytes
        ):
            self.violations.append(LEAK)
            return [LEAK]
        return []

    def to_json(self) -> dict[str, Any]:
        peak, leak = self.peak, self.leak
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "backend": self.backend,
            "device": self.device,
            "measurement": self.label,
            "peak_bytes": self.peak_bytes,
            "leaked_bytes": self.leaked_bytes,
            "budget_bytes": self.limits.budget_bytes,
            "budget": self.limits.budget_text,
            "max_leak_bytes": self.limits.max_leak_bytes,
            "max_leak": self.limits.max_leak_text,
            "leak_holders": list(self.holders),
            "repeat": self.limits.repeat,
            "violations": list(self.violations),
            "baseline_bytes": None if peak is None else peak.baseline_bytes,
            "context": {} if peak is None else dict(peak.context),
            "peak_sites": [] if peak is None else _sites(peak.sites, self.peak_links),
            "leak_sites": [] if leak is None else _sites(leak.sites, self.leak_links),
            "leaked_storages": None if leak is None else leak.storages,
            "graph_tensors": None if leak is None else leak.graph_tensors,
            "growth_per_run_bytes": growth_per_run(self.live_after_runs),
            "oom_message": self.oom_message,
            "snapshot": self.snapshot_path,
            "timeline": self.timeline_path,
            "memlint_problems": list(self.lint_problems),
            "not_measured": self.not_measured,
        }


def _sites(sites: tuple[Site, ...], links: dict[int, list[LintFinding]]) -> list[dict[str, Any]]:
    """Sites as JSON; a linked site also names memlint's findings (site -> rule codes)."""
    out: list[dict[str, Any]] = []
    for index, site in enumerate(sites[:SITES_IN_JSON]):
        data = site.to_json()
        if index in links:
            data["memlint"] = [f.to_json() for f in links[index]]
        out.append(data)
    return out



def attach_record(report: pytest.TestReport, record: dict[str, Any]) -> None:
    setattr(report, RECORD_ATTR, record)


def record_of(report: pytest.TestReport) -> dict[str, Any] | None:
    """The record a measured test's report carries (also after xdist), else None."""
    value = getattr(report, RECORD_ATTR, None)
    return value if isinstance(value, dict) else None

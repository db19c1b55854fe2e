"""Memory timeline: event parsing and the self-contained HTML page."""

from __future__ import annotations

import re

from pytest_gpumem.timeline import (
    Timeline,
    _downsample,
    render_html,
    timeline_from_cuda_trace,
    timeline_from_deltas,
)

MiB = 2**20


def test_deltas_accumulate() -> None:
    timeline = timeline_from_deltas([4 * MiB, 8 * MiB, -4 * MiB, 1 * MiB, -9 * MiB])
    assert list(timeline.allocated) == [0, 4 * MiB, 12 * MiB, 8 * MiB, 9 * MiB, 0]
    assert timeline.peak == 12 * MiB
    assert list(timeline.reserved) == []


def test_cuda_trace_tracks_blocks_and_segments() -> None:
    trace = [
        {"action": "segment_alloc", "size": 20 * MiB},
        {"action": "alloc", "size": 2 * MiB},
        {"action": "alloc", "size": 6 * MiB},
        {"action": "free_requested", "size": 2 * MiB},  # not freed until completed
        {"action": "snapshot", "size": 0},
        {"action": "free_completed", "size": 2 * MiB},
        {"action": "free_completed", "size": 6 * MiB},
        {"action": "segment_free", "size": 20 * MiB},
    ]
    timeline = timeline_from_cuda_trace(trace)
    assert list(timeline.allocated) == [0, 0, 2 * MiB, 8 * MiB, 6 * MiB, 0, 0]
    assert list(timeline.reserved) == [0, 20 * MiB, 20 * MiB, 20 * MiB, 20 * MiB, 20 * MiB, 0]


def test_downsampling_keeps_extremes() -> None:
    values = [i % 97 for i in range(100_000)]
    values[77_777] = 10_000
    points = _downsample(values, limit=200)
    assert len(points) <= 400
    assert max(v for _, v in points) == 10_000
    assert min(v for _, v in points) == 0
    assert [i for i, _ in points] == sorted(i for i, _ in points)


def test_html_is_self_contained_and_labelled() -> None:
    timeline = Timeline([0, 30 * MiB, 50 * MiB, 10 * MiB], [0, 64 * MiB, 64 * MiB, 64 * MiB])
    page = render_html(
        timeline, nodeid="t.py::test_<x>", backend="cuda", device="cuda:1", budget_bytes=40 * MiB
    )
    assert "<script" not in page
    assert re.findall(r"(?:src|href)=", page) == []
    assert "t.py::test_&lt;x&gt;" in page and "test_<x>" not in page
    assert "budget 40.00 MiB" in page
    assert "peak 50.00 MiB" in page
    assert "reserved peak" in page and "64.00 MiB" in page
    assert page.count("<polyline") == 2  # allocated and reserved


def test_budget_line_sits_above_a_peak_that_fits() -> None:
    timeline = timeline_from_deltas([10 * MiB, -10 * MiB])
    page = render_html(timeline, nodeid="t", backend="cpu", device="cpu", budget_bytes=20 * MiB)
    budget_y = float(_attribute(page, r'y1="([\d.]+)" y2="[\d.]+" stroke="#e15759"'))
    peak_y = float(_attribute(page, r'<circle cx="[\d.]+" cy="([\d.]+)"'))
    assert budget_y < peak_y  # SVG y grows downwards: the budget line is higher
    assert "an estimate" in page and page.count("<polyline") == 1


def _attribute(page: str, pattern: str) -> str:
    match = re.search(pattern, page)
    assert match is not None
    return match[1]

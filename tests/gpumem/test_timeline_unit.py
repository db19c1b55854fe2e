"""Memory timeline: event parsing and the self-contained HTML page."""

from __future__ import annotations

import re

from pytest_gpumem.timeline import (
    Timeline,
    _downsample,
    cuda_test_timeline,
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


def test_cuda_test_timeline_keeps_the_test_s_entries_anchored_at_the_end() -> None:
    trace = [
        {"action": "alloc", "size": 64 * MiB, "time_us": 90},  # the previous test's
        {"action": "alloc", "size": 2 * MiB, "time_us": 100},
        {"action": "segment_alloc", "size": 20 * MiB, "time_us": 110},
        {"action": "alloc", "size": 8 * MiB, "time_us": 120},
        {"action": "free_completed", "size": 8 * MiB, "time_us": 130},
        {"action": "free_requested", "size": 2 * MiB, "time_us": 140},
    ]
    timeline = cuda_test_timeline(
        trace,
        start_us=100,
        allocated_end=70 * MiB,
        reserved_end=100 * MiB,
        body_start_bytes=66 * MiB,
        marks_us=[(115, "body starts"), (135, "body ends")],
    )
    assert timeline is not None
    assert list(timeline.allocated) == [68 * MiB, 70 * MiB, 70 * MiB, 78 * MiB, 70 * MiB]
    assert list(timeline.reserved) == [80 * MiB, 80 * MiB, 100 * MiB, 100 * MiB, 100 * MiB]
    assert list(timeline.marks) == [(2, "body starts"), (4, "body ends")]
    assert timeline.body_start_bytes == 66 * MiB


def test_cuda_trace_without_times_gives_no_timeline() -> None:
    trace = [{"action": "alloc", "size": MiB}]
    assert cuda_test_timeline(
        trace, start_us=0, allocated_end=MiB, reserved_end=2 * MiB, body_start_bytes=0
    ) is None


def test_budget_line_counts_from_body_start_and_marks_are_drawn() -> None:
    timeline = Timeline(
        [0, 10 * MiB, 30 * MiB, 10 * MiB], events=[0, 5, 9, 12], body_start_bytes=10 * MiB,
        marks=[(5, "body starts"), (9, "body ends")],
    )
    page = render_html(timeline, nodeid="t", backend="cpu", device="cpu", budget_bytes=15 * MiB)
    assert "budget 15.00 MiB above the 10.00 MiB at body start" in page
    assert "peak 30.00 MiB (20.00 MiB above body start)" in page
    assert ">body starts</text>" in page and ">body ends</text>" in page
    budget_y = float(_attribute(page, r'y1="([\d.]+)" y2="[\d.]+" stroke="#e15759"'))
    zero_y = float(_attribute(page, r'y1="([\d.]+)" y2="[\d.]+" stroke="#e4e4e4"'))
    ten_mib_y = zero_y - (zero_y - budget_y) * 10 / 25  # the budget sits at 25 MiB
    assert f"{ten_mib_y:.1f}" in page  # the curve's 10 MiB level on the same axis


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

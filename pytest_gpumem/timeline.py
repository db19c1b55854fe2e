"""A self-contained HTML memory timeline of one test: allocated (and reserved) over time.

People read a plot faster than a table of numbers. The page is a single file with an inline
SVG and no scripts or external assets, so it can be attached as a CI artifact and opened
offline. Values are bytes above what was allocated before the test, the same reference
the budget uses, so the budget is a horizontal line on the same axis.
"""

from __future__ import annotations

import bisect
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpumem.units import format_bytes

_WIDTH, _HEIGHT = 820, 380
# Title, legend and the body's start/end labels sit above the plot, outside it.
_LEFT, _RIGHT, _TOP, _BOTTOM = 78, 24, 62, 46
_LEGEND_Y = 36
_MAX_POINTS = 1500
_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30))
# A white outline under label text keeps it readable where it crosses a line of the plot.
_HALO = 'stroke="white" stroke-width="4" paint-order="stroke"'


@dataclass(frozen=True)
class Timeline:
    """Memory after each allocator event; ``reserved`` is empty where the backend has none.

    ``events`` numbers the points along the x axis (event order; gaps where a long history
    was thinned out), ``body_start_bytes`` is what was allocated when the test body began
    (the budget counts from there) and ``marks`` labels event numbers, such as the body's
    start and end.
    """

    allocated: Sequence[int]
    reserved: Sequence[int] = ()
    events: Sequence[int] = ()
    body_start_bytes: int = 0
    marks: Sequence[tuple[int, str]] = ()

    @property
    def peak(self) -> int:
        return max(self.allocated, default=0)

    @property
    def xs(self) -> Sequence[int]:
        return self.events if self.events else range(len(self.allocated))


def timeline_from_deltas(deltas: Iterable[int]) -> Timeline:
    """From signed allocation sizes in event order."""
    current = 0
    allocated = [0]
    for delta in deltas:
        current += delta
        allocated.append(current)
    return Timeline(allocated)


CUDA_CHANGES = {
    "alloc": (1, 0),
    "free_completed": (-1, 0),
    "segment_alloc": (0, 1),
    "segment_map": (0, 1),
    "segment_free": (0, -1),
    "segment_unmap": (0, -1),
}


def timeline_from_cuda_trace(
    trace: Iterable[Mapping[str, Any]], *, allocated0: int = 0, reserved0: int = 0
) -> Timeline:
    """From one device's entries of ``torch.cuda.memory._snapshot()["device_traces"]``,
    starting from the allocated and reserved bytes before the first entry.

    Blocks count as allocated from ``alloc`` until ``free_completed``; segments count as
    reserved from ``segment_alloc`` until ``segment_free``. Other actions (``oom``,
    ``snapshot``, ``free_requested``) do not change either figure.
    """
    allocated_now, reserved_now = allocated0, reserved0
    allocated, reserved = [allocated0], [reserved0]
    for entry in trace:
        change = CUDA_CHANGES.get(str(entry.get("action")))
        if change is None:
            continue
        size = int(entry.get("size", 0))
        allocated_now += change[0] * size
        reserved_now += change[1] * size
        allocated.append(allocated_now)
        reserved.append(reserved_now)
    return Timeline(allocated, reserved)


def cuda_test_timeline(
    trace: Sequence[Mapping[str, Any]],
    *,
    start_us: int,
    allocated_end: int,
    reserved_end: int,
    body_start_bytes: int,
    marks_us: Sequence[tuple[int, str]] = (),
) -> Timeline | None:
    """The part of a device trace recorded since ``start_us`` (Unix microseconds, the clock
    of the entries' ``time_us``), anchored so that it ends at the current allocated and
    reserved bytes; anchoring at the end stays right when the trace's ring buffer has
    already dropped the test's first events. ``None`` when the entries carry no times.
    """
    if trace and "time_us" not in trace[-1]:
        return None
    entries = [
        e for e in trace
        if str(e.get("action")) in CUDA_CHANGES and int(e.get("time_us", 0)) >= start_us
    ]
    relative = timeline_from_cuda_trace(entries)
    shift_a = allocated_end - relative.allocated[-1]
    shift_r = reserved_end - relative.reserved[-1]
    times = [int(e["time_us"]) for e in entries]
    return Timeline(
        allocated=[v + shift_a for v in relative.allocated],
        reserved=[v + shift_r for v in relative.reserved],
        body_start_bytes=body_start_bytes,
        marks=tuple((bisect.bisect_left(times, t), label) for t, label in marks_us),
    )


def _downsample(
    values: Sequence[int], xs: Sequence[int] | None = None, limit: int = _MAX_POINTS
) -> list[tuple[float, int]]:
    """Keep each bucket's minimum and maximum, so no peak disappears from the picture."""
    at = range(len(values)) if xs is None else xs
    if len(values) <= limit:
        return [(float(at[i]), v) for i, v in enumerate(values)]
    bucket = math.ceil(len(values) / (limit // 2))
    points: list[tuple[float, int]] = []
    for start in range(0, len(values), bucket):
        chunk = values[start : start + bucket]
        low = min(range(len(chunk)), key=chunk.__getitem__)
        high = max(range(len(chunk)), key=chunk.__getitem__)
        for offset in sorted({low, high}):
            points.append((float(at[start + offset]), chunk[offset]))
    return points


def _axis_unit(top: int) -> tuple[str, int]:
    name, size = _UNITS[0]
    for candidate, candidate_size in _UNITS:
        if top >= candidate_size:
            name, size = candidate, candidate_size
    return name, size


def _nice_step(span: float, target_ticks: int = 5) -> float:
    raw = span / target_ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _legend(x: float, colour: str, name: str, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (
        f'<line x1="{x:.1f}" x2="{x + 18:.1f}" y1="{_LEGEND_Y - 4}" y2="{_LEGEND_Y - 4}" '
        f'stroke="{colour}" stroke-width="3"{dash}/>'
        f'<text x="{x + 22:.1f}" y="{_LEGEND_Y}">{html.escape(name)}</text>'
    )


def render_svg(timeline: Timeline, *, budget_bytes: int | None = None, title: str = "") -> str:
    """The plot; the budget line sits ``budget_bytes`` above the allocation at body start."""
    budget_level = None if not budget_bytes else timeline.body_start_bytes + budget_bytes
    values = list(timeline.allocated) + list(timeline.reserved)
    low = min([0, *values])
    high = max([1, *values, *([budget_level] if budget_level is not None else [])])
    high = int(high * 1.1) + 1
    unit, unit_size = _axis_unit(high)
    step = _nice_step((high - low) / unit_size) * unit_size
    xs = timeline.xs
    first = xs[0] if len(xs) else 0
    last = max(xs[-1] if len(xs) else 0, first + 1)
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(event: float) -> float:
        return _LEFT + plot_w * (event - first) / (last - first)

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - (value - low) / (high - low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="white"/>',
        f'<text x="{_LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    tick = math.ceil(low / step) * step
    while tick <= high:
        ty = y(tick)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}" '
            'stroke="#e4e4e4"/>'
            f'<text x="{_LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">'
            f"{tick / unit_size:g} {unit}</text>"
        )
        tick += step
    x_step = max(1, int(_nice_step(last - first)))
    for event in range(math.ceil(first / x_step) * x_step, last + 1, x_step):
        parts.append(
            f'<text x="{x(event):.1f}" y="{_HEIGHT - _BOTTOM + 16}" text-anchor="middle">'
            f"{event}</text>"
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 8}" text-anchor="middle" '
        'fill="#555">allocator events (allocations and frees, in order)</text>'
    )
    for i, (event, label) in enumerate(timeline.marks):
        mx = x(event)
        # The first label goes left of its line and the last one right, room permitting,
        # so a short body's two labels do not run into each other.
        left_side = mx - _LEFT > 80 if i == 0 else _WIDTH - _RIGHT - mx < 80
        lx, anchor = (mx - 3, "end") if left_side else (mx + 3, "start")
        parts.append(
            f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{_TOP - 14}" y2="{_TOP + plot_h}" '
            'stroke="#999" stroke-dasharray="2 3"/>'
            f'<text x="{lx:.1f}" y="{_TOP - 5}" fill="#666" '
            f'text-anchor="{anchor}">{html.escape(label)}</text>'
        )
    parts.append(
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#888"/>'
    )
    legend_x = float(_LEFT)
    series = [
        ("reserved", timeline.reserved, "#f28e2b"),
        ("allocated", timeline.allocated, "#4e79a7"),
    ]
    for name, values_of, colour in series:
        if not values_of:
            continue
        step_path = _step_points(_downsample(values_of, xs), x, y)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{step_path}"/>'
        )
        parts.append(_legend(legend_x, colour, name))
        legend_x += 100
    peak_x: float | None = None
    if timeline.allocated:
        peak_index = max(range(len(timeline.allocated)), key=timeline.allocated.__getitem__)
        peak_x, py = x(xs[peak_index]), y(timeline.peak)
        anchor = "end" if peak_x > _LEFT + plot_w * 0.7 else "start"
        shift = -8 if anchor == "end" else 8
        above_base = timeline.peak - timeline.body_start_bytes
        label = f"peak {format_bytes(timeline.peak)}"
        if timeline.body_start_bytes:
            label += f" ({format_bytes(above_base)} above body start)"
        # Above the dot nothing of the allocated curve can be in the way; below it only when
        # the peak touches the top of the plot.
        label_y = py - 8 if py - 8 > _TOP + 14 else py + 16
        parts.append(
            f'<circle cx="{peak_x:.1f}" cy="{py:.1f}" r="4" fill="#4e79a7"/>'
            f'<text x="{peak_x + shift:.1f}" y="{label_y:.1f}" text-anchor="{anchor}" {_HALO}>'
            f"{html.escape(label)}</text>"
        )
    if budget_level is not None and budget_bytes:
        by = y(budget_level)
        base = timeline.body_start_bytes
        above = f" above the {format_bytes(base)} at body start" if base else ""
        # The label goes to the side away from the peak's, so the two never overlap.
        left = peak_x is not None and peak_x > _LEFT + plot_w / 2
        lx, anchor = (_LEFT + 6, "start") if left else (_WIDTH - _RIGHT - 6, "end")
        ly = by - 5 if by - _TOP > 18 else by + 15
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{by:.1f}" y2="{by:.1f}" '
            'stroke="#e15759" stroke-width="2" stroke-dasharray="6 4"/>'
            f'<text x="{lx}" y="{ly:.1f}" text-anchor="{anchor}" {_HALO} '
            f'fill="#e15759">budget {html.escape(format_bytes(budget_bytes) + above)}</text>'
        )
        parts.append(_legend(legend_x, "#e15759", "budget", dashed=True))
    parts.append("</svg>")
    return "\n".join(parts)


def _step_points(
    points: list[tuple[float, int]], x: Callable[[float], float], y: Callable[[float], float]
) -> str:
    """A staircase: memory holds its value until the next event changes it."""
    coords: list[str] = []
    previous: int | None = None
    for index, value in points:
        if previous is not None:
            coords.append(f"{x(index):.1f},{y(previous):.1f}")
        coords.append(f"{x(index):.1f},{y(value):.1f}")
        previous = value
    return " ".join(coords)


def render_html(
    timeline: Timeline,
    *,
    nodeid: str,
    backend: str,
    device: str,
    budget_bytes: int | None = None,
    measured_by: str = "",
) -> str:
    base = timeline.body_start_bytes
    rows = [
        ("test", nodeid),
        ("backend", f"{backend} ({device})" + (", an estimate" if backend == "cpu" else "")),
        ("measured by", measured_by),
        ("allocated when the body started", format_bytes(base)),
        ("peak above that", format_bytes(max(0, timeline.peak - base))),
        ("budget", format_bytes(budget_bytes) if budget_bytes else "none"),
        ("allocated at the end", format_bytes(timeline.allocated[-1] if timeline.allocated else 0)),
    ]
    if timeline.reserved:
        rows.append(("reserved peak", format_bytes(max(timeline.reserved))))
    table = "\n".join(
        f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>"
        for key, value in rows
        if value
    )
    svg = render_svg(timeline, budget_bytes=budget_bytes, title=nodeid)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>memory timeline: {html.escape(nodeid)}</title>\n"
        "<style>body{font-family:sans-serif;margin:16px}th{text-align:left;padding-right:12px}"
        "</style></head><body>\n"
        f"{svg}\n<table>\n{table}\n</table>\n</body></html>\n"
    )

"""A self-contained HTML memory timeline of one test: allocated (and reserved) over time.

People read a plot faster than a table of numbers. The page is a single file with an inline
SVG and no scripts or external assets, so it can be attached as a CI artifact and opened
offline. Values are bytes above what was allocated before the test, the same reference
the budget uses, so the budget is a horizontal line on the same axis.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpumem.units import format_bytes

_WIDTH, _HEIGHT = 820, 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 78, 24, 40, 46
_MAX_POINTS = 1500
_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30))


@dataclass(frozen=True)
class Timeline:
    """Memory after each allocator event; ``reserved`` is empty where the backend has none."""

    allocated: Sequence[int]
    reserved: Sequence[int] = ()

    @property
    def peak(self) -> int:
        return max(self.allocated, default=0)


def timeline_from_deltas(deltas: Iterable[int]) -> Timeline:
    """From signed allocation sizes in event order (the CPU tracker's own events)."""
    current = 0
    allocated = [0]
    for delta in deltas:
        current += delta
        allocated.append(current)
    return Timeline(allocated)


def timeline_from_cuda_trace(trace: Iterable[Mapping[str, Any]]) -> Timeline:
    """From one device's entries of ``torch.cuda.memory._snapshot()["device_traces"]``.

    Blocks count as allocated from ``alloc`` until ``free_completed``; segments count as
    reserved from ``segment_alloc`` until ``segment_free``. Other actions (``oom``,
    ``snapshot``, ``free_requested``) do not change either figure.
    """
    allocated_now = reserved_now = 0
    allocated, reserved = [0], [0]
    changes = {
        "alloc": (1, 0),
        "free_completed": (-1, 0),
        "segment_alloc": (0, 1),
        "segment_map": (0, 1),
        "segment_free": (0, -1),
        "segment_unmap": (0, -1),
    }
    for entry in trace:
        change = changes.get(str(entry.get("action")))
        if change is None:
            continue
        size = int(entry.get("size", 0))
        allocated_now += change[0] * size
        reserved_now += change[1] * size
        allocated.append(allocated_now)
        reserved.append(reserved_now)
    return Timeline(allocated, reserved)


def _downsample(values: Sequence[int], limit: int = _MAX_POINTS) -> list[tuple[float, int]]:
    """Keep each bucket's minimum and maximum, so no peak disappears from the picture."""
    if len(values) <= limit:
        return [(float(i), v) for i, v in enumerate(values)]
    bucket = math.ceil(len(values) / (limit // 2))
    points: list[tuple[float, int]] = []
    for start in range(0, len(values), bucket):
        chunk = values[start : start + bucket]
        low = min(range(len(chunk)), key=chunk.__getitem__)
        high = max(range(len(chunk)), key=chunk.__getitem__)
        for offset in sorted({low, high}):
            points.append((float(start + offset), chunk[offset]))
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


def render_svg(timeline: Timeline, *, budget_bytes: int | None = None, title: str = "") -> str:
    values = list(timeline.allocated) + list(timeline.reserved)
    low = min([0, *values])
    high = max([1, *values, *([budget_bytes] if budget_bytes else [])])
    high = int(high * 1.08) + 1
    unit, unit_size = _axis_unit(high)
    step = _nice_step((high - low) / unit_size) * unit_size
    count = max(len(timeline.allocated), len(timeline.reserved), 2) - 1
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(index: float) -> float:
        return _LEFT + plot_w * index / count

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - (value - low) / (high - low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="white"/>',
        f'<text x="{_LEFT}" y="22" font-size="14" font-weight="bold">{html.escape(title)}</text>',
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
    x_step = max(1, int(_nice_step(count)))
    for index in range(0, count + 1, x_step):
        parts.append(
            f'<text x="{x(index):.1f}" y="{_HEIGHT - _BOTTOM + 16}" text-anchor="middle">'
            f"{index}</text>"
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 8}" text-anchor="middle" '
        'fill="#555">allocator events (allocations and frees, in order)</text>'
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#888"/>'
    )
    series = [
        ("reserved", timeline.reserved, "#f28e2b"),
        ("allocated", timeline.allocated, "#4e79a7"),
    ]
    legend_x = _WIDTH - _RIGHT - 250
    for name, values_of, colour in series:
        if not values_of:
            continue
        step_path = _step_points(_downsample(values_of), x, y)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{step_path}"/>'
        )
        parts.append(
            f'<line x1="{legend_x}" x2="{legend_x + 18}" y1="{_TOP - 12}" y2="{_TOP - 12}" '
            f'stroke="{colour}" stroke-width="3"/>'
            f'<text x="{legend_x + 22}" y="{_TOP - 8}">{name}</text>'
        )
        legend_x += 90
    if budget_bytes:
        by = y(budget_bytes)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{by:.1f}" y2="{by:.1f}" '
            'stroke="#e15759" stroke-width="2" stroke-dasharray="6 4"/>'
            f'<text x="{_LEFT + 6}" y="{by - 5:.1f}" '
            f'fill="#e15759">budget {html.escape(format_bytes(budget_bytes))}</text>'
        )
    if timeline.allocated:
        peak_index = max(range(len(timeline.allocated)), key=timeline.allocated.__getitem__)
        px, py = x(peak_index), y(timeline.peak)
        anchor = "end" if px > _LEFT + plot_w * 0.7 else "start"
        shift = -8 if anchor == "end" else 8
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#4e79a7"/>'
            f'<text x="{px + shift:.1f}" y="{py - 8:.1f}" text-anchor="{anchor}">'
            f"peak {html.escape(format_bytes(timeline.peak))}</text>"
        )
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
) -> str:
    rows = [
        ("test", nodeid),
        ("backend", f"{backend} ({device})" + (", an estimate" if backend == "cpu" else "")),
        ("peak above pre-test allocation", format_bytes(timeline.peak)),
        ("budget", format_bytes(budget_bytes) if budget_bytes else "none"),
        ("end of test", format_bytes(timeline.allocated[-1] if timeline.allocated else 0)),
    ]
    if timeline.reserved:
        rows.append(("reserved peak", format_bytes(max(timeline.reserved))))
    table = "\n".join(
        f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>" for key, value in rows
    )
    svg = render_svg(timeline, budget_bytes=budget_bytes, title=nodeid)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>memory timeline: {html.escape(nodeid)}</title>\n"
        "<style>body{font-family:sans-serif;margin:16px}th{text-align:left;padding-right:12px}"
        "</style></head><body>\n"
        f"{svg}\n<table>\n{table}\n</table>\n</body></html>\n"
    )

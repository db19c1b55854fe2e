"""Baseline file format, tolerance parsing, comparison and update rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpumem.baseline import (
    BaselineEntry,
    BaselineError,
    Tolerance,
    VerdictKind,
    compare,
    dump_baseline,
    load_baseline,
    parse_baseline,
    parse_tolerance,
    updated_baseline,
    write_baseline,
)

CUDA = BaselineEntry(peak_bytes=100 * 2**20, leaked_bytes=0, backend="cuda", device="cuda:0")
CPU = BaselineEntry(peak_bytes=4096, leaked_bytes=512, backend="cpu", device="cpu")


@pytest.mark.parametrize(
    ("text", "relative", "absolute"),
    [
        ("10%", 0.10, 0),
        ("+16MiB", 0.0, 16 * 2**20),
        ("16MiB", 0.0, 16 * 2**20),
        ("10%,+16MiB", 0.10, 16 * 2**20),
        ("+16MiB, 2.5%", 0.025, 16 * 2**20),
        ("+1.5GiB", 0.0, 3 * 2**29),
        ("+100MB", 0.0, 100 * 2**20),
        ("+512", 0.0, 512),
        ("512", 0.0, 512),
        ("0%", 0.0, 0),
    ],
)
def test_parse_tolerance(text: str, relative: float, absolute: int) -> None:
    assert parse_tolerance(text) == Tolerance(relative=relative, absolute_bytes=absolute)


@pytest.mark.parametrize("text", ["", "ten%", "+16 parsecs", "10%,20%", "1MiB,2MiB", "5%,", "-5%"])
def test_bad_tolerance_is_one_line_error(text: str) -> None:
    with pytest.raises(BaselineError) as info:
        parse_tolerance(text)
    assert "\n" not in str(info.value)


def test_tolerance_takes_the_larger_slack() -> None:
    tol = parse_tolerance("10%,+1MiB")
    assert tol.allowed(1000) == 1000 + 2**20  # absolute dominates small tests
    assert tol.allowed(100 * 2**20) == 110 * 2**20  # relative dominates large ones


def test_dump_is_sorted_stable_and_ends_with_newline(tmp_path: Path) -> None:
    entries = {"tests/b.py::t": CPU, "tests/a.py::t": CUDA}
    text = dump_baseline(entries)
    assert text.endswith("}\n")
    data = json.loads(text)
    assert list(data["tests"]) == ["tests/a.py::t", "tests/b.py::t"]
    assert list(data["tests"]["tests/a.py::t"]) == sorted(data["tests"]["tests/a.py::t"])
    path = tmp_path / "sub" / "baseline.json"
    write_baseline(path, entries)
    assert path.read_text() == text
    assert load_baseline(path) == entries
    write_baseline(path, dict(reversed(list(entries.items()))))
    assert path.read_text() == text  # insertion order never changes the bytes
    assert [p.name for p in path.parent.iterdir()] == ["baseline.json"]  # no temp files left


def test_missing_file_is_none(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "nope.json") is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{", "not valid JSON"),
        ("[]", '"tests"'),
        ('{"format": 9, "tests": {}}', "format 9"),
        ('{"tests": {"t": {"backend": "cpu"}}}', "lacks 'peak_bytes'"),
        ('{"tests": {"t": {"peak_bytes": -1, "backend": "cpu"}}}', "non-negative"),
        ('{"tests": {"t": 3}}', "not an object"),
    ],
)
def test_malformed_baseline(text: str, needle: str) -> None:
    with pytest.raises(BaselineError, match=needle):
        parse_baseline(text)


def _cmp(entry: BaselineEntry | None, peak: int, **kw: object) -> VerdictKind:
    backend = str(kw.get("backend", "cuda"))
    device = str(kw.get("device", "cuda:0"))
    strict = bool(kw.get("strict", False))
    verdict = compare(
        entry,
        peak_bytes=peak,
        backend=backend,
        device=device,
        tolerance=parse_tolerance("10%,+1MiB"),
        strict_backend=strict,
    )
    return verdict.kind


def test_compare_within_and_beyond_tolerance() -> None:
    assert _cmp(CUDA, 110 * 2**20) is VerdictKind.OK
    assert _cmp(CUDA, 110 * 2**20 + 1) is VerdictKind.REGRESSION
    assert _cmp(CUDA, 10) is VerdictKind.OK  # shrinking is never a regression
    assert _cmp(None, 10**12) is VerdictKind.NEW


def test_compare_message_names_numbers() -> None:
    verdict = compare(
        CUDA,
        peak_bytes=200 * 2**20,
        backend="cuda",
        device="cuda:0",
        tolerance=Tolerance(relative=0.1),
    )
    assert verdict.fails
    assert "peak 200.00 MiB grew +100.0% over the baseline 100.00 MiB" in verdict.message
    assert "allowed up to 110.00 MiB with tolerance 10%" in verdict.message
    assert parse_tolerance("10%,+16MiB").describe() == "10%,+16.00MiB"


def test_other_gpu_index_is_comparable_other_backend_is_not() -> None:
    assert _cmp(CUDA, 300 * 2**20, device="cuda:3") is VerdictKind.REGRESSION
    assert _cmp(CUDA, 300 * 2**20, backend="cpu", device="cpu") is VerdictKind.MISMATCH
    strict = _cmp(CUDA, 1, backend="cpu", device="cpu", strict=True)
    assert strict is VerdictKind.REGRESSION


def test_update_keeps_unrun_and_drops_gone_only_when_unfiltered() -> None:
    old = {"a": CUDA, "b": CUDA, "gone": CPU}
    new_a = BaselineEntry(peak_bytes=1, leaked_bytes=0, backend="cuda", device="cuda:1")
    filtered = updated_baseline(old, {"a": new_a}, existing_ids=None)
    assert filtered == {"a": new_a, "b": CUDA, "gone": CPU}
    full = updated_baseline(old, {"a": new_a, "c": CPU}, existing_ids={"a", "b", "c"})
    assert full == {"a": new_a, "b": CUDA, "c": CPU}

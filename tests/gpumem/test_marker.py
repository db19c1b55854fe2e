"""The gpu_mem marker's arguments: checked at collection, merged from module to function."""

from __future__ import annotations

import pytest

from pytest_gpumem.marker import Amount, MarkerError, parse_marker_kwargs
from tests.gpumem.conftest import RunGpumem


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {"max_mb": 3}, "unknown argument(s) max_mb"),
        ((1.0,), {}, "keyword arguments only"),
        ((), {"max_gb": 0}, "max_gb=0) must be greater than zero"),
        ((), {"max_gb": -2.5}, "max_gb=-2.5) must be greater than zero"),
        ((), {"max_gb": "1GB"}, "max_gb=...) must be a number, got '1GB'"),
        ((), {"max_gb": True}, "must be a number, got True"),
        ((), {"max_gb": float("nan")}, "must be a number"),
        ((), {"max_leak_mb": -1}, "max_leak_mb=-1) must be zero or more"),
        ((), {"repeat": 0}, "repeat=0) must be a whole number, 1 or more"),
        ((), {"repeat": 2.5}, "repeat=2.5) must be a whole number"),
    ],
)
def test_bad_arguments(args: tuple[object, ...], kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(MarkerError) as info:
        parse_marker_kwargs(args, kwargs)
    assert message in str(info.value)


def test_good_arguments() -> None:
    assert parse_marker_kwargs((), {"max_gb": 2, "max_leak_mb": 0, "repeat": 3}) == {
        "budget": Amount(2 * 2**30, "max_gb=2"),
        "max_leak": Amount(0, "max_leak_mb=0"),
        "repeat": 3,
    }
    assert parse_marker_kwargs((), {"max_gb": None}) == {}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max": "512 MiB"}, {"budget": Amount(512 * 2**20, "max='512 MiB'")}),
        ({"max": "1.5GB"}, {"budget": Amount(3 * 2**29, "max='1.5GB'")}),  # GB is binary
        ({"max": "24 MB"}, {"budget": Amount(24 * 2**20, "max='24 MB'")}),
        ({"max_leak": "1 KiB"}, {"max_leak": Amount(1024, "max_leak='1 KiB'")}),
        ({"max_leak": "0"}, {"max_leak": Amount(0, "max_leak='0'")}),
    ],
)
def test_size_strings(kwargs: dict[str, object], expected: dict[str, object]) -> None:
    assert parse_marker_kwargs((), kwargs) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max": "lots"}, "gpu_mem(max=...): cannot read size 'lots'"),
        ({"max": 512}, "gpu_mem(max=...) must be a size string"),
        ({"max": "0 MiB"}, "gpu_mem(max='0 MiB') must be greater than zero"),
        ({"max": "1 GiB", "max_gb": 1}, "gpu_mem takes max=... or max_gb=..., not both"),
        ({"max_leak": "-1 MiB"}, "cannot read size '-1 MiB'"),
    ],
)
def test_bad_size_strings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(MarkerError) as info:
        parse_marker_kwargs((), kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("flags", [[], ["--gpumem"]])
def test_bad_marker_is_a_collection_error(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, flags: list[str]
) -> None:
    pytester.makepyfile(test_bad="""
import pytest

@pytest.mark.gpu_mem(max_gb=-1)
def test_negative():
    pass

def test_other():
    pass
""")
    result = run_gpumem(*flags)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_bad.py*",
        "test_bad.py::test_negative: gpu_mem(max_gb=-1) must be greater than zero",
    ])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_closest_marker_wins_per_argument(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile("""
import pytest
import torch

pytestmark = pytest.mark.gpu_mem(max_gb=0.001, max_leak_mb=1)
KEPT = []

class TestGroup:
    pytestmark = pytest.mark.gpu_mem(max_gb=0.01)

    def test_class_budget(self):
        KEPT.append(torch.zeros(1024, 1024))  # 4 MiB peak and leak: leak over 1 MiB

    @pytest.mark.gpu_mem(max_leak_mb=5)
    def test_own_tolerance(self):
        KEPT.append(torch.zeros(1024, 1024))

def test_module_budget():
    a = torch.zeros(1024, 1024)  # 4 MiB > 1.02 MiB
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines_random([
        "leaked 4.00 MiB still alive after teardown (max_leak_mb=1, 1.00 MiB)*",
        "peak 4.00 MiB exceeds budget max_gb=0.001 (1.02 MiB)*",
        "MEMORY *test_class_budget*",
        "MEMORY *test_module_budget*",
    ])


def test_any_real_number_is_taken_and_echoed_plainly() -> None:
    """Budgets computed with fractions, decimals or numpy scalars (float32 is no float)."""
    from decimal import Decimal
    from fractions import Fraction

    parsed = parse_marker_kwargs((), {"max_gb": Fraction(1, 2), "max_leak_mb": Decimal("1.5")})
    assert parsed == {
        "budget": Amount(2**29, "max_gb=0.5"),
        "max_leak": Amount(3 * 2**19, "max_leak_mb=1.5"),
    }


def test_a_size_string_in_a_float_argument_says_where_it_goes() -> None:
    with pytest.raises(MarkerError, match=r"a size string goes in max=\.\.\., e\.g\. max='512"):
        parse_marker_kwargs((), {"max_gb": "512 MiB"})
    with pytest.raises(MarkerError, match=r"goes in max_leak=\.\.\."):
        parse_marker_kwargs((), {"max_leak_mb": "1 MiB"})


def test_a_number_written_as_text_is_taken() -> None:
    """As pytest-timeout's ``timeout("5")``: ``max_gb="0.5"`` is 0.5 GiB, echoed as a number;
    text that is no plain number (``'1GB'``) stays an error that names ``max=``."""
    assert parse_marker_kwargs((), {"max_gb": "0.5", "max_leak_mb": " 2 ", "repeat": "3"}) == {
        "budget": Amount(2**29, "max_gb=0.5"),
        "max_leak": Amount(2 * 2**20, "max_leak_mb=2.0"),
        "repeat": 3,
    }
    with pytest.raises(MarkerError, match=r"repeat='2\.5'\) must be a whole number"):
        parse_marker_kwargs((), {"repeat": "2.5"})
    with pytest.raises(MarkerError, match=r"max_gb=-1\.0\) must be greater than zero"):
        parse_marker_kwargs((), {"max_gb": "-1"})
    with pytest.raises(MarkerError, match="must be a number"):
        parse_marker_kwargs((), {"max_gb": "nan"})


def test_one_wrong_marker_is_one_collection_error(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Named where it was written: a module's pytestmark fails the module once (it was one
    error per test), a parametrised function's decorator once for all its parameter sets."""
    pytester.makepyfile(test_module_mark="""
import pytest

pytestmark = pytest.mark.gpu_mem(max_gb=0)

def test_one():
    pass

def test_two():
    pass
""", test_kinds="""
import pytest

@pytest.mark.gpu_mem(max_gb=1)
class TestGroup:
    @pytest.mark.gpu_mem(repeat=0)
    def test_method(self):
        pass

    def test_fine(self):
        pass

@pytest.mark.gpu_mem(max_leak_mb=-1)
@pytest.mark.parametrize("n", [1, 2])
def test_decorated(n):
    pass

@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.gpu_mem(max="x"))])
def test_param_mark(n):
    pass
""")
    result = run_gpumem("--gpumem", "--continue-on-collection-errors")
    result.assert_outcomes(passed=2, errors=4)
    result.stdout.fnmatch_lines_random([
        "test_module_mark.py: gpu_mem(max_gb=0) must be greater than zero",
        "test_kinds.py::TestGroup::test_method: gpu_mem(repeat=0) must be *",
        "test_kinds.py::test_decorated: gpu_mem(max_leak_mb=-1) must be zero or more",
        "test_kinds.py::test_param_mark[[]2]: gpu_mem(max=...): cannot read size 'x'*",
        "ERROR test_module_mark.py - *",
        "ERROR test_kinds.py::test_decorated - *",
    ])

"""Real pytest sessions with the NVML column, against a fake ``pynvml`` module."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gpumem import fake_pynvml

pytest.importorskip("torch")

GiB = 2**30
SUITE = """
import pytest

@pytest.mark.gpu_mem(max_gb=1)
def test_one():
    pass
"""


@pytest.fixture
def session(
    run_gpumem: Callable[..., pytest.RunResult],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., tuple[pytest.RunResult, dict[str, Any]]]:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    pytester.makepyfile(test_suite=SUITE)
    report: Path = pytester.path / "gpumem.json"

    def run(state: dict[str, Any], *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
        monkeypatch.setenv("FAKE_PYNVML", json.dumps(state))
        result = run_gpumem(
            "--gpumem", "--gpumem-backend=cpu", "--gpumem-nvml", f"--gpumem-json={report}", *args
        )
        return result, json.loads(report.read_text())["tests"][0]

    return run


def gpu(processes: Any, used: int = 5 * GiB) -> dict[str, Any]:
    return {"devices": [{"uuid": "GPU-x", "total": 16 * GiB, "used": used, "processes": processes}]}


def test_per_process_reading(session: Any) -> None:
    result, record = session(gpu([["self", 3 * GiB], [1, GiB]]))
    result.assert_outcomes(passed=1)
    assert record["nvml"] == {
        "used_bytes": 3 * GiB,
        "total_bytes": 16 * GiB,
        "scope": "process",
        "note": "",
    }


def test_container_host_pids_fall_back_and_say_so(session: Any) -> None:
    result, record = session(gpu([[123456, 2 * GiB]]))
    result.assert_outcomes(passed=1)
    assert (record["nvml"]["used_bytes"], record["nvml"]["scope"]) == (5 * GiB, "device")
    result.stdout.fnmatch_lines(["*NVML: device-wide used memory*host PIDs*"])


def test_whole_process_budget(session: Any) -> None:
    result, record = session(gpu([["self", 15 * GiB]]), "--gpumem-nvml-max-gb=14")
    result.assert_outcomes(failed=1)
    assert record["outcome"] == "memory" and "nvml" in record["violations"]
    result.stdout.fnmatch_lines(["*NVML process memory 15.00 GiB is over the budget of 14.00 GiB*"])


def test_missing_driver_is_one_line(session: Any) -> None:
    result, record = session({"library": False})
    result.assert_outcomes(passed=1)
    assert "nvml" not in record
    result.stdout.fnmatch_lines(["*NVML view off: NVML is not usable here (NVML Shared Library*"])
    assert "Traceback" not in result.stdout.str()


def test_missing_library_is_one_line(session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result, _ = session({})
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*NVML view off: *pip install nvidia-ml-py*"])

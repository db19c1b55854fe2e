"""Real pytest sessions: baseline create, compare, regression, update and filtered runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

Run = Callable[..., pytest.RunResult]

SUITE = """
import os
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=1)
def test_grows():
    torch.empty(int(os.environ["GROWS_BYTES"]), dtype=torch.uint8)

@pytest.mark.gpu_mem(max_gb=1)
def test_steady():
    torch.empty(4096, dtype=torch.uint8)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GROWS_BYTES", str(2**20))
    pytester.makepyfile(test_model=SUITE)
    return pytester.path / "baseline.json"


def entries(path: Path) -> dict[str, dict[str, object]]:
    data: dict[str, dict[str, object]] = json.loads(path.read_text())["tests"]
    return data


def test_create_compare_regress_update(
    run_gpumem: Run, suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = ("--gpumem", "--gpumem-backend=cpu", f"--gpumem-baseline={suite}")
    first = run_gpumem(*gate, "--gpumem-update-baseline")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*wrote*baseline.json: 2 entries (2 new, 0 changed, 0 dropped)*"])
    assert entries(suite)["test_model.py::test_grows"] == {
        "backend": "cpu",
        "device": "cpu",
        "leaked_bytes": 0,
        "peak_bytes": 2**20,
    }
    assert suite.read_text().endswith("}\n")

    run_gpumem(*gate).assert_outcomes(passed=2)

    monkeypatch.setenv("GROWS_BYTES", str(2**20 + 2**19))  # +50%, but only +512 KiB
    within = run_gpumem(*gate)
    within.assert_outcomes(passed=2)  # the default tolerance's +1MiB absolute slack covers it

    monkeypatch.setenv("GROWS_BYTES", str(3 * 2**20))  # +2 MiB, beyond both slacks
    regressed = run_gpumem(*gate, "-q")
    regressed.assert_outcomes(failed=1, passed=1)
    regressed.stdout.fnmatch_lines(
        [
            "memory regression: peak 3.00 MiB grew +200.0% over the baseline 1.00 MiB*",
            "*1 over tolerance*",
            "MEMORY test_model.py::test_grows - memory regression: peak 3.00 MiB*",
        ]
    )
    regressed.stdout.no_fnmatch_line("*test_grows: *")  # named by pytest, not again by us

    tight = run_gpumem(*gate, "--gpumem-tolerance=250%")
    tight.assert_outcomes(passed=2)

    updated = run_gpumem(*gate, "--gpumem-update-baseline")
    updated.assert_outcomes(passed=2)  # updating accepts the new numbers
    updated.stdout.fnmatch_lines(["*2 entries (0 new, 1 changed, 0 dropped)*"])
    assert entries(suite)["test_model.py::test_grows"]["peak_bytes"] == 3 * 2**20
    run_gpumem(*gate).assert_outcomes(passed=2)


def test_filtered_runs_keep_entries_unfiltered_runs_drop_gone_tests(
    run_gpumem: Run, suite: Path, pytester: pytest.Pytester
) -> None:
    gate = ("--gpumem", "--gpumem-backend=cpu", f"--gpumem-baseline={suite}")
    run_gpumem(*gate, "--gpumem-update-baseline").assert_outcomes(passed=2)
    # A test that no longer exists, left over from an older version of the suite.
    data = json.loads(suite.read_text())
    data["tests"]["test_model.py::test_removed"] = dict(data["tests"]["test_model.py::test_steady"])
    suite.write_text(json.dumps(data))

    for filtered in (["-k", "steady"], ["-m", "gpu_mem"], ["test_model.py::test_steady"]):
        result = run_gpumem(*gate, "--gpumem-update-baseline", *filtered)
        result.stdout.fnmatch_lines(["*filtered run, none dropped*"])
        assert set(entries(suite)) == {
            "test_model.py::test_grows",
            "test_model.py::test_steady",
            "test_model.py::test_removed",
        }

    full = run_gpumem(*gate, "--gpumem-update-baseline")
    full.stdout.fnmatch_lines(["*2 entries (0 new, 0 changed, 1 dropped)*"])
    assert set(entries(suite)) == {"test_model.py::test_grows", "test_model.py::test_steady"}

    pytester.makepyfile(test_broken="import nonexistent_module_for_gpumem\n")
    broken = run_gpumem(*gate, "--gpumem-update-baseline")
    broken.stdout.fnmatch_lines(["*filtered run, none dropped*"])


def test_other_backend_warns_unless_strict(run_gpumem: Run, suite: Path) -> None:
    suite.write_text(
        json.dumps(
            {
                "tests": {
                    "test_model.py::test_steady": {
                        "backend": "cuda",
                        "device": "cuda:0",
                        "leaked_bytes": 0,
                        "peak_bytes": 1,
                    }
                }
            }
        )
    )
    gate = ("--gpumem", "--gpumem-backend=cpu", f"--gpumem-baseline={suite}")
    lenient = run_gpumem(*gate)
    lenient.assert_outcomes(passed=2)
    lenient.stdout.fnmatch_lines(["*not compared (other backend or device): *test_steady*"])
    strict = run_gpumem(*gate, "--gpumem-baseline-strict")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["*baseline was measured on cuda cuda:0, this run on cpu cpu*"])


def test_ini_keys_and_bad_input(run_gpumem: Run, suite: Path, pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\ngpumem = true\ngpumem_backend = cpu\ngpumem_baseline = {suite}\n"
        "gpumem_update_baseline = true\n"
    )
    run_gpumem().stdout.fnmatch_lines(["*wrote*baseline.json: 2 entries*"])
    bad = run_gpumem("--gpumem-tolerance=lots")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*cannot read tolerance part 'lots'*"])
    assert "Traceback" not in bad.stderr.str()
    suite.write_text("{not json")
    broken = run_gpumem()
    assert broken.ret == pytest.ExitCode.USAGE_ERROR
    broken.stderr.fnmatch_lines(["*baseline.json is not valid JSON*"])

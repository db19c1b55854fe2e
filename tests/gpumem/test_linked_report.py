"""The two tools joined, on the example project in examples/gpumem/linked: the plugin catches
a leaking training step on CPU and names memlint's MEM001 at the line that keeps the loss;
memlint reads the plugin's JSON report back and marks that finding with the bytes; after
``memlint --fix`` the test passes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memlint.cli import main as memlint
from pytest_gpumem.backends.base import Site
from pytest_gpumem.linked import Linker
from tests.gpumem.conftest import RunGpumem, plugin_args

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpumem" / "linked"


def _warm_up_optimizer() -> None:
    """An optimizer step imports torch modules lazily, some of which cannot be imported twice;
    in-process pytester runs forget what they imported, so import them once, out here."""
    import torch

    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    weight.sum().backward()
    optimizer.step()


_warm_up_optimizer()


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    for name in ("train.py", "test_train.py"):
        shutil.copyfile(EXAMPLE / name, pytester.path / name)
    return pytester.path


def test_leak_names_the_memlint_rule_and_the_fixed_step_passes(
        project: Path, run_gpumem: RunGpumem, capsys: pytest.CaptureFixture[str]) -> None:
    keeps = _line_of(project / "train.py", "history.append(loss)")
    result = run_gpumem("--gpumem", "--gpumem-json=report.json")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*leaked * still alive after teardown*",
        "still alive after teardown (*",
        f"  * train.py:{keeps - 2} in train",
        f"  * \u2190 MEM001 at train.py:{keeps}: `loss` still carries its autograd graph*"
        "(memlint rule MEM001)",
    ])
    (test,) = json.loads((project / "report.json").read_text())["tests"]
    linked = [f for site in test["leak_sites"] for f in site.get("memlint", [])]
    assert {(Path(f["file"]).name, f["line"], f["code"]) for f in linked} == {
        ("train.py", keeps, "MEM001")}
    assert test["memlint_problems"] == []

    # The other direction, from the report the plugin just wrote.
    capsys.readouterr()
    old = Path.cwd()
    os.chdir(project)
    try:
        assert memlint(["--no-cache", "--gpumem-report", "report.json", "train.py"]) == 1
        text = capsys.readouterr().out.splitlines()[0]
        assert text.startswith(f"train.py:{keeps}:9: MEM001 ")
        assert text.endswith(f" [measured in this function: {_leaked(test)} leaked, "
                             f"{_peak(test)} at peak in 1 test]")
        assert memlint(["--no-cache", "--gpumem-report", "report.json",
                        "--output-format", "json", "train.py"]) == 1
        (finding,) = json.loads(capsys.readouterr().out)
        assert finding["measured"]["leaked_bytes"] == sum(
            s["bytes"] for s in test["leak_sites"]
            if any(f["function"] == "train" for f in s["frames"]))
        # The fix memlint offers is the fix the measurement asks for.
        assert memlint(["--no-cache", "--fix", "--unsafe-fixes", "train.py"]) == 0
    finally:
        os.chdir(old)
    assert "history.append(loss.detach())" in (project / "train.py").read_text()
    run_gpumem("--gpumem").assert_outcomes(passed=1)


def _leaked(test: dict[str, object]) -> str:
    from pytest_gpumem.units import format_bytes

    sites = test["leak_sites"]
    assert isinstance(sites, list)
    return format_bytes(sum(s["bytes"] for s in sites
                            if any(f["function"] == "train" for f in s["frames"])))


def _peak(test: dict[str, object]) -> str:
    from pytest_gpumem.units import format_bytes

    sites = test["peak_sites"]
    assert isinstance(sites, list)
    return format_bytes(sum(s["bytes"] for s in sites
                            if any(f["function"] == "train" for f in s["frames"])))


def test_sort_measured_puts_findings_with_memory_first(
        project: Path, run_gpumem: RunGpumem, capsys: pytest.CaptureFixture[str]) -> None:
    run_gpumem("--gpumem", "--gpumem-json=report.json").assert_outcomes(passed=1, errors=1)
    capsys.readouterr()
    (project / "a_first.py").write_text("import torch\nmask = torch.zeros(4).cuda()\n")
    old = Path.cwd()
    os.chdir(project)
    try:
        memlint(["--no-cache", "--gpumem-report", "report.json", "."])
        default = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()[:2]]
        memlint(["--no-cache", "--gpumem-report", "report.json", "--sort=measured", "."])
        measured = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()[:2]]
        assert memlint(["--sort=measured", "."]) == 2
        assert "--sort=measured needs --gpumem-report" in capsys.readouterr().err
        (project / "bad.json").write_text("[1, 2]")
        assert memlint(["--gpumem-report", "bad.json", "."]) == 2
        assert capsys.readouterr().err == (
            "memlint: error: bad.json is not a pytest-gpumem JSON report (--gpumem-json)\n")
    finally:
        os.chdir(old)
    assert default == ["a_first.py", "train.py"]
    assert measured == ["train.py", "a_first.py"]


def test_a_lint_problem_is_one_line_and_the_report_goes_on(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def step(:\n    pass\n")
    fine = tmp_path / "fine.py"
    fine.write_text("def step(model, x):\n    return model(x)\n")
    linker = Linker()
    found, problems = linker.findings(Site(((str(broken), 1, "step"), (str(fine), 2, "step")),
                                           100, 1))
    assert found == []
    assert len(problems) == 1 and problems[0].startswith(
        f"memlint could not lint {os.path.relpath(broken)}: cannot parse")


def test_without_libcst_the_failure_report_says_so_in_one_line(
        project: Path, pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['libcst'] = None  # not installed\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*still alive after teardown*",
                                 "memlint findings not linked: *libcst*"])
    assert "Traceback" not in result.stdout.str()


def test_a_peak_failure_names_the_rules_of_the_allocating_function(
        pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(buffers="""
import torch


def scratch(device):
    a = torch.zeros(1024, 1024).to(device)
    return a + 1
""", test_peak="""
import pytest

from buffers import scratch


@pytest.mark.gpu_mem(max_gb=0.001)
def test_scratch(gpumem_device):
    assert scratch(gpumem_device).shape == (1024, 1024)
""")
    result = run_gpumem("--gpumem", "--gpumem-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "largest allocations alive at the peak:",
        "  * buffers.py:5 in scratch",
        "  * \u2190 MEM010 at buffers.py:5: tensor is created on the CPU and then copied*",
    ])
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert {f["code"] for s in test["peak_sites"] for f in s.get("memlint", [])} == {"MEM010"}


def test_worked_example_runs_from_the_repository_root(
        pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    """docs/plugin.md's `pytest examples/gpumem --gpumem`, under this repository's pytest
    configuration (importlib imports, which put no test folder on sys.path)."""
    shutil.copytree(EXAMPLE.parent, pytester.path / "examples" / "gpumem",
                    ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = run_gpumem("examples/gpumem", "--gpumem")
    result.assert_outcomes(passed=5, errors=2)
    result.stdout.fnmatch_lines_random([
        "examples/gpumem/linked/test_train.py .M*",
        "examples/gpumem/test_training_step.py ...M.*",
    ])

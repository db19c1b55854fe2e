"""Option precedence (marker, then command line, then ini) and one-line errors."""

from __future__ import annotations

import json

import pytest

from pytest_gpumem.entrypoint import plugin_args
from tests.gpumem.conftest import RunGpumem

FOUR_MIB_TEST = """
import pytest
import torch

@pytest.mark.gpu_mem{args}
def test_four_mib():
    a = torch.zeros(1024, 1024)  # 4 MiB = 0.0039 GiB
"""


@pytest.mark.parametrize(
    ("ini", "cli", "marker", "passes"),
    [
        ("0.001", None, "", False),  # ini alone applies
        ("0.01", None, "", True),
        ("0.001", "0.01", "", True),  # command line beats ini
        ("0.01", "0.001", "", False),
        ("0.01", "0.001", "(max_gb=0.01)", True),  # marker beats command line
        ("0.001", "0.01", "(max_gb=0.001)", False),
        (None, None, "", True),  # no budget anywhere: measured, not enforced
    ],
)
def test_budget_precedence(
    pytester: pytest.Pytester,
    run_gpumem: RunGpumem,
    ini: str | None,
    cli: str | None,
    marker: str,
    passes: bool,
) -> None:
    lines = ["[pytest]", "gpumem = true"]
    if ini is not None:
        lines.append(f"gpumem_max_gb = {ini}")
    pytester.makeini("\n".join(lines))
    pytester.makepyfile(FOUR_MIB_TEST.format(args=marker))
    args = [] if cli is None else [f"--gpumem-max-gb={cli}"]
    result = run_gpumem(*args)
    result.assert_outcomes(passed=1) if passes else result.assert_outcomes(failed=1)


def test_leak_tolerance_precedence(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makeini("[pytest]\ngpumem = true\ngpumem_max_leak_mb = 1\n")
    pytester.makepyfile("""
import pytest
import torch
KEPT = []

@pytest.mark.gpu_mem
def test_ini_tolerates():
    KEPT.append(torch.ones(1024))

@pytest.mark.gpu_mem(max_leak_mb=0)
def test_marker_forbids():
    KEPT.append(torch.ones(1024))
""")
    result = run_gpumem()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["MEMORY *test_marker_forbids*"])
    strict = run_gpumem("--gpumem-max-leak-mb=0")
    strict.assert_outcomes(passed=2, errors=2)


def test_every_ini_key_is_honoured(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makefile(".toml", pyproject="""
[tool.pytest.ini_options]
gpumem = true
gpumem_backend = "cpu"
gpumem_max_gb = 0.5
gpumem_max_leak_mb = 0.5
gpumem_json = "from-ini.json"
gpumem_round = 512
gpumem_top = 1
gpumem_snapshot_dir = "snapshots"
gpumem_timeline_dir = "timelines"
gpumem_timeline = "all"
""")
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem
def test_a():
    a = torch.zeros(3)

@pytest.mark.gpu_mem
def test_b():
    b = torch.zeros(300)
""")
    result = run_gpumem()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*gpumem: 1 highest peaks*", "*1.50 KiB*test_b*"])
    result.stdout.no_fnmatch_line("*::test_a*")
    records = json.loads((pytester.path / "from-ini.json").read_text())["tests"]
    assert [r["peak_bytes"] for r in records] == [512, 1536]
    assert {r["budget_bytes"] for r in records} == {2**29}
    assert {r["max_leak_bytes"] for r in records} == {2**19}
    assert {r["backend"] for r in records} == {"cpu"}
    assert sorted(p.name for p in (pytester.path / "timelines").iterdir()) == [
        "test_every_ini_key_is_honoured.py_test_a.html",
        "test_every_ini_key_is_honoured.py_test_b.html",
    ]
    result.stdout.fnmatch_lines(["--gpumem-snapshot-dir: no snapshots written*"])


@pytest.mark.skipif(
    int(pytest.__version__.split(".")[0]) < 9, reason="[tool.pytest] is pytest 9's native table"
)
def test_native_toml_table_takes_numbers_and_strings(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """pytest 9's ``[tool.pytest]`` keeps TOML types: ``gpumem_max_gb = 0.5`` is a float
    there and was refused as "expects a string" (worded as if it had to be true or false)."""
    pytester.makefile(".toml", pyproject="""
[tool.pytest]
gpumem = true
gpumem_max_gb = 0.001
gpumem_max_leak_mb = 1
gpumem_round = 512
gpumem_top = 1
gpumem_json = "native.json"
""")
    pytester.makepyfile(FOUR_MIB_TEST.format(args=""))
    result = run_gpumem()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*exceeds budget gpumem_max_gb=0.001 (1.02 MiB)*"])
    (record,) = json.loads((pytester.path / "native.json").read_text())["tests"]
    assert record["max_leak_bytes"] == 2**20
    pytester.makefile(".toml", pyproject="[tool.pytest]\ngpumem = true\ngpumem_top = [1]\n")
    bad = run_gpumem()
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: ini option gpumem_top: *expects a string, got list*"])


def test_command_line_beats_ini_for_paths(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makeini("[pytest]\ngpumem = true\ngpumem_json = ini.json\n")
    pytester.makepyfile(FOUR_MIB_TEST.format(args=""))
    run_gpumem("--gpumem-json=cli.json").assert_outcomes(passed=1)
    assert (pytester.path / "cli.json").exists()
    assert not (pytester.path / "ini.json").exists()


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--gpumem-max-gb=lots"], "", "--gpumem-max-gb must be a number, got 'lots'"),
        (["--gpumem-max-gb=0"], "", "--gpumem-max-gb must be greater than zero, got '0'"),
        (["--gpumem-max-gb=nan"], "", "--gpumem-max-gb must be a number, got 'nan'"),
        ([], "gpumem_max_leak_mb = inf", "ini option gpumem_max_leak_mb must be a number*"),
        (["--gpumem-backend=tpu"], "", "--gpumem-backend must be one of auto, cuda, cuda-fast,*"),
        ([], "gpumem_max_leak_mb = -1", "ini option gpumem_max_leak_mb must be zero or more*"),
        ([], "gpumem_top = many", "ini option gpumem_top must be a whole number*"),
        ([], "gpumem_backend = gpu", "ini option gpumem_backend must be one of*"),
        ([], "gpumem_nvml = maybe", "ini option gpumem_nvml must be true or false*"),
    ],
)
def test_bad_values_are_one_line_errors(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, args: list[str], ini: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(FOUR_MIB_TEST.format(args=""))
    result = run_gpumem("--gpumem", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize("backend", ["cuda", "cuda-fast"])
def test_cuda_backend_without_cuda_is_one_line(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, backend: str
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pytester.makepyfile(FOUR_MIB_TEST.format(args=""))
    result = run_gpumem("--gpumem", f"--gpumem-backend={backend}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: *--gpumem-backend={backend}, but torch.cuda.is_available()*"])


def test_pytest_help_lists_every_gpumem_option(pytester: pytest.Pytester) -> None:
    """argparse %-formats option help: a bare `%` (as in '10%') once broke `pytest --help`."""
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0, result.stderr.str()
    text = result.stdout.str()
    assert "--gpumem-tolerance" in text and "'10%'" in text
    assert "--gpumem-max-gb" in text


def test_option_help_escapes_percent_for_argparse() -> None:
    import argparse

    from pytest_gpumem.options import option_help

    parser = argparse.ArgumentParser()
    parser.add_argument("--x", help=option_help("grow by '10%' at most", "x_ini"))
    assert "grow by '10%' at most [ini: x_ini]" in " ".join(parser.format_help().split())


def test_switch_ini_keys_are_bool_and_value_options_have_metavars(
    pytester: pytest.Pytester,
) -> None:
    """Switches are ``bool`` ini keys (``gpumem = true`` in TOML is a real boolean); every
    option that takes a value names it in ``pytest --help``."""
    import re

    config = pytester.parseconfig(*plugin_args())
    inis = {name: config._parser._inidict[name] for name in config._parser._inidict
            if name.startswith("gpumem")}
    switches = {"gpumem", "gpumem_all", "gpumem_update_baseline", "gpumem_baseline_strict",
                "gpumem_nvml"}
    assert {name for name, (_, kind, _) in inis.items() if kind == "bool"} == switches
    assert {kind for name, (_, kind, _) in inis.items() if name not in switches} == {"string"}
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    flags = re.findall(r"^  (--gpumem[\w-]*)(=\S+)?", result.stdout.str(), re.MULTILINE)
    assert len(flags) == len(inis)
    for flag, metavar in flags:
        ini = flag.lstrip("-").replace("-", "_")
        assert bool(metavar) == (ini not in switches), flag


def test_bool_ini_key_false_keeps_the_plugin_off(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\ngpumem = false\n")
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess(*plugin_args())
    result.assert_outcomes(passed=1)
    assert "gpumem" not in result.stdout.str()


def test_top_zero_lists_every_measured_test(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """As --durations=0 and pytest-memray's --most-allocations=0: 0 means all."""
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem
@pytest.mark.parametrize("n", range(7))
def test_sized(n):
    torch.empty(1024 * (n + 1), dtype=torch.uint8)
""")
    every = run_gpumem("--gpumem", "--gpumem-top=0")
    every.stdout.fnmatch_lines(["*gpumem: 7 highest peaks*"])
    assert every.stdout.str().count("(no budget, cpu cpu)") == 7
    default = run_gpumem("--gpumem")
    default.stdout.fnmatch_lines(["*gpumem: 5 highest peaks*"])
    assert default.stdout.str().count("(no budget, cpu cpu)") == 5

"""Files the plugin writes (JSON report, baseline, timelines): where ini paths point, what a
path that cannot be written does, and the permissions the files get."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.gpumem.conftest import RunGpumem

TEST = """
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=1e-6)
def test_over():
    a = torch.zeros(1024)  # 4 KiB, over the 1.05 KiB budget
"""


def test_ini_paths_are_relative_to_the_ini_file(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started from a subfolder (``cd tests && pytest``), the committed baseline named in
    pyproject.toml is still found and the report lands next to the ini file."""
    pytester.makefile(".toml", pyproject="""
[tool.pytest.ini_options]
gpumem = true
gpumem_json = "out/report.json"
gpumem_baseline = "gpumem-baseline.json"
gpumem_timeline_dir = "timelines"
""")
    sub = pytester.mkdir("tests")
    (sub / "test_sub.py").write_text(TEST)
    (pytester.path / "gpumem-baseline.json").write_text(json.dumps({
        "format": 1,
        "tests": {"tests/test_sub.py::test_over": {
            "backend": "cpu", "device": "cpu", "leaked_bytes": 0, "peak_bytes": 100}},
    }))
    monkeypatch.chdir(sub)
    result = run_gpumem()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*baseline *gpumem-baseline.json: 1 compared, 0 over*"])
    record = json.loads((pytester.path / "out" / "report.json").read_text())["tests"][0]
    assert record["baseline"] == {"verdict": "ok", "message": record["baseline"]["message"],
                                  "peak_bytes": 100}
    assert len(list((pytester.path / "timelines").iterdir())) == 1
    assert not (sub / "out").exists() and not (sub / "timelines").exists()


def test_command_line_paths_stay_relative_to_the_current_folder(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\ngpumem = true\n")
    sub = pytester.mkdir("tests")
    (sub / "test_sub.py").write_text(TEST)
    monkeypatch.chdir(sub)
    run_gpumem("--gpumem-json=here.json").assert_outcomes(failed=1)
    assert (sub / "here.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpumem-json=blocker/r.json"],
            "cannot create the folder of JSON report blocker/r.json*",
        ),
        (["--gpumem-json=."], "JSON report . is a directory; give a file name"),
        (
            ["--gpumem-baseline=blocker/b.json", "--gpumem-update-baseline"],
            "cannot create the folder of baseline blocker/b.json*",
        ),
        # Folders written while the run goes: a file in the way was only a closing note.
        (["--gpumem-timeline-dir=blocker"], "--gpumem-timeline-dir blocker is not a folder"),
        (
            ["--gpumem-snapshot-dir=blocker/snaps"],
            "--gpumem-snapshot-dir blocker/snaps is not a folder (blocker is a file)",
        ),
    ],
)
def test_an_output_path_that_cannot_be_written_is_a_usage_error(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, args: list[str], message: str
) -> None:
    pytester.makepyfile(TEST)
    pytester.makefile("", blocker="a file where a folder is needed")
    result = run_gpumem("--gpumem", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest_gpumem: {message}"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_written_files_get_ordinary_permissions(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Not 0600 as a temporary file gets: a CI step running as another user uploads them."""
    pytester.makepyfile(TEST)
    old = os.umask(0o022)
    try:
        run_gpumem(
            "--gpumem", "--gpumem-json=r.json", "--gpumem-baseline=b.json",
            "--gpumem-update-baseline",
        ).assert_outcomes(failed=1)
    finally:
        os.umask(old)
    for name in ("r.json", "b.json"):
        assert stat.S_IMODE((pytester.path / name).stat().st_mode) == 0o644, name


def test_junitxml_gets_no_record_properties(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """The record travels on the report for xdist, not in ``user_properties``, which
    junitxml would print into every <testcase> as a Python dict."""
    pytester.makepyfile(TEST)
    result = run_gpumem("--gpumem", "--junitxml=j.xml", "--gpumem-json=r.json")
    result.assert_outcomes(failed=1)
    xml = (pytester.path / "j.xml").read_text()
    assert "<properties>" not in xml and "peak_bytes" not in xml
    assert 'message="peak 4.00 KiB exceeds budget max_gb=1e-06 (1.05 KiB)' in xml
    assert json.loads((pytester.path / "r.json").read_text())["tests"][0]["peak_bytes"] == 4096


def test_help_shows_whatever_the_output_paths(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makefile("", blocker="a file where a folder is needed")
    result = run_gpumem("--gpumem", "--gpumem-json=blocker/r.json", "--help")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*--gpumem-json=PATH*"])

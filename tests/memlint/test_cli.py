"""The ``memlint`` command end to end: arguments, exit codes, output destinations, rule docs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memlint
from memlint.cli import main
from tests.memlint.cli_support import FlagDrip, FlagLeak, run_cli, write

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_findings_print_path_line_col_code_message_and_exit_1(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "pkg/train.py", "x = 1\ny = leak()\n")
    run = run_cli(capsys, project, ".")
    assert run.rc == 1
    assert run.lines[0] == f"{Path('pkg/train.py')}:2:5: MEM901 leak() called"
    assert run.lines[-1] == "Found 1 problem."
    assert run.err == ""


def test_clean_tree_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "x = 1\n")
    run = run_cli(capsys, project)
    assert run.rc == 0
    assert run.out == "All checks passed.\n"


def test_parse_error_counts_as_a_finding(project: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "broken.py", "def f(:\n    pass\n")
    run = run_cli(capsys, project)
    assert run.rc == 1
    assert run.lines[0].startswith("broken.py:")
    assert " MEM999 " in run.lines[0]


def test_exit_zero_keeps_the_report(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "leak()\n")
    run = run_cli(capsys, project, "--exit-zero")
    assert run.rc == 0
    assert "MEM901" in run.out


def test_output_file_receives_the_report(project: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "leak()\n")
    target = tmp_path / "report.json"
    run = run_cli(capsys, project, "--output-format", "json", "-o", str(target))
    assert run.rc == 1
    assert run.out == ""
    assert '"code": "MEM901"' in target.read_text(encoding="utf-8")


def test_statistics_counts_per_code(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "leak()\nleak()\ndrip()\n")
    write(project, "b.py", "leak()\n")
    run = run_cli(capsys, project, "--extend-select", "MEM902", "--statistics")
    assert run.rc == 1
    assert run.lines == ["3  MEM901  test-leak", "1  MEM902  test-drip"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--no-such-flag"], "unrecognized arguments"),
        (["--select", "MEM123"], "unknown rule selector 'MEM123'"),
        (["--ignore", "XYZ"], "unknown rule selector 'XYZ'"),
        (["does/not/exist.py"], "path does not exist"),
        (["--output-format", "xml"], "invalid choice"),
        (["--jobs", "0"], "positive integer"),
        (["--per-file-ignores", "nocolon"], "PATTERN:CODES"),
        (["--config", "missing.toml"], "config file does not exist"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(project: Path, capsys: pytest.CaptureFixture[str],
                                               argv: list[str], fragment: str) -> None:
    write(project, "a.py", "leak()\n")
    run = run_cli(capsys, project, *argv)
    assert run.rc == 2
    assert run.out == ""
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("memlint: error: ")
    assert fragment in lines[0]


def test_version_and_help_exit_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, project, "--version")
    assert (run.rc, run.out) == (0, f"memlint {memlint.__version__}\n")
    run = run_cli(capsys, project, "--help")
    assert run.rc == 0
    assert "--output-format" in run.out


def test_jobs_do_not_change_results(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(12):
        write(project, f"m{i:02}.py", "leak()\n" * (i % 3) + "x = 1\n")
    serial = run_cli(capsys, project, "--no-cache", "-j", "1")
    parallel = run_cli(capsys, project, "--no-cache", "-j", "2")
    assert serial.rc == parallel.rc == 1
    assert serial.out == parallel.out
    assert len(serial.lines) == 12 + 1  # 4 files x 0, 1, 2 findings, plus the summary


def test_a_crashing_rule_is_one_diagnostic_and_the_run_goes_on(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a_bad.py", "boom()\n")
    write(project, "b_good.py", "leak()\n")
    run = run_cli(capsys, project, "--no-cache")
    assert run.rc == 1
    assert run.lines[0].startswith("a_bad.py:1:1: MEM997 ")
    assert "RuntimeError: rule bug" in run.lines[0]
    assert run.lines[1] == "b_good.py:1:1: MEM901 leak() called"


def test_rule_prints_its_documentation(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, project, "rule", "mem901")
    assert run.rc == 0
    assert run.lines[0] == "# test-leak (MEM901)"
    assert "## What it does" in run.out
    assert "Flags every call to ``leak()``" in run.out
    by_name = run_cli(capsys, project, "rule", "test-leak")
    assert by_name.out == run.out


def test_rule_all_lists_every_rule_with_default_and_fix(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, project, "rule", "--all")
    assert run.rc == 0
    assert run.lines[0].split() == ["code", "name", "default", "fix", "summary"]
    rows = {line.split()[0]: line.split() for line in run.lines[1:]}
    assert rows["MEM901"][:4] == ["MEM901", "test-leak", "on", "-"]
    assert rows["MEM902"][:4] == ["MEM902", "test-drip", "off", "-"]
    assert "MEM999" in rows


@pytest.mark.parametrize("argv", [["rule"], ["rule", "MEM000"], ["rule", "MEM901", "--all"]])
def test_rule_usage_errors(project: Path, capsys: pytest.CaptureFixture[str],
                           argv: list[str]) -> None:
    run = run_cli(capsys, project, *argv)
    assert run.rc == 2
    assert run.err.startswith("memlint: error: ")
    assert len(run.err.splitlines()) == 1


def test_check_subcommand_is_an_alias(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "leak()\n")
    assert run_cli(capsys, project, "check", "a.py").rc == 1


def test_python_dash_m_runs_the_cli(project: Path) -> None:
    write(project, "a.py", "import torch\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMLINT_CACHE_DIR": str(project.parent / "c")}
    done = subprocess.run([sys.executable, "-m", "memlint", "--select", "MEM00", "nope.py"],
                          cwd=project, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == "memlint: error: path does not exist: nope.py\n"
    done = subprocess.run([sys.executable, "-m", "memlint", "--version"], cwd=project, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("memlint ")


def test_examples_show_the_four_core_mistakes_and_their_fixes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's first command, with the real rules."""
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path / "cache"))
    leaks = run_cli(capsys, REPO, "--output-format", "json", "examples/train_with_leaks.py",
                    rules=None)
    assert leaks.rc == 1
    codes = {line.split('"')[3] for line in leaks.lines if '"code"' in line}
    assert {"MEM001", "MEM002", "MEM003", "MEM004"} <= codes
    clean = run_cli(capsys, REPO, "examples/train_clean.py", rules=None)
    assert (clean.rc, clean.out) == (0, "All checks passed.\n")


def test_opt_in_rule_needs_select(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project, "a.py", "drip()\n")
    assert run_cli(capsys, project).rc == 0
    assert run_cli(capsys, project, "--extend-select", "MEM902").rc == 1
    assert FlagDrip.code not in {FlagLeak.code}


def test_an_empty_selection_warns_instead_of_passing_silently(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "vendored/\n")
    write(tmp_path, "vendored/train.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "vendored")
    assert run.rc == 0
    assert "no Python files found" in run.err
    assert "no Python files found" not in run_cli(capsys, tmp_path, "--no-cache",
                                                    "--no-respect-gitignore", "vendored").err


@pytest.mark.parametrize("seconds", ["inf", "1e300"])
def test_file_timeout_without_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    seconds: str) -> None:
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    code = main(["--no-cache", "--file-timeout", seconds, str(tmp_path / "a.py")])
    assert code == 0 and "error" not in capsys.readouterr().err


def test_file_timeout_must_be_a_positive_number(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("nan", "0", "-1"):
        assert main(["--file-timeout", bad, str(tmp_path)]) == 2
        assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(("argv", "says"), [
    (["--select", ",,"], "at least one rule code"),
    (["--ignore", "MEM999"], "cannot be ignored"),
    (["--isolated", "--config", "pyproject.toml"], "--isolated"),
])
def test_settings_that_would_be_ignored_are_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], says: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.memlint]\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("leak()\n", encoding="utf-8")
    capsys.readouterr()
    assert main([*argv, "a.py"], rules=[FlagLeak]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_repeated_per_file_ignores_add_up(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "a.py", "leak()\ndrip()\n")
    run = run_cli(capsys, tmp_path, "--per-file-ignores", "a.py:MEM901",
                  "--per-file-ignores", "a.py:MEM902")
    assert run.rc == 0, run.lines


def test_unreadable_discovered_pyproject_is_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "a.py", "leak()\n")
    config = tmp_path / "pyproject.toml"
    config.write_bytes(b"[tool.memlint]\nselect = [\"MEM901\"]\n\xff\xfe")
    run = run_cli(capsys, tmp_path)
    assert run.rc == 2 and "cannot read" in run.err


def test_diff_reports_a_file_it_could_not_check(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "bad.py", "def f(:\n")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01")
    run = run_cli(capsys, tmp_path, "--diff")
    assert run.rc == 1 and run.out == ""
    assert "bad.py:1:1: MEM999" in run.err
    assert "blob.py: skipped: binary file" in run.err


def test_a_long_module_reports_every_copy_of_its_findings(tmp_path: Path) -> None:
    """A long file (here the example script 60 times over) is linted whole: every copy's
    findings, no more and no fewer, and no internal error. Guards the per-block and
    per-function caches that keep long modules linear: a cache keyed too coarsely would
    make the copies answer for one another."""
    example = (REPO / "examples" / "train_with_leaks.py").read_text(encoding="utf-8")
    body = "\n".join(line for line in example.splitlines()
                     if not line.startswith("from __future__"))
    one = tmp_path / "one.py"
    one.write_text(body + "\n", encoding="utf-8")
    many = tmp_path / "many.py"
    many.write_text("\n".join([body] * 60) + "\n", encoding="utf-8")
    single = _codes(one)
    assert single and "MEM997" not in single
    combined = _codes(many)
    assert sorted(combined) == sorted(single * 60)


def _codes(path: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "memlint", "--no-cache", "--isolated", "--output-format",
         "json", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    return [item["code"] for item in json.loads(done.stdout)]

"""The ruff habits users bring: nested configs, stdin, --add-noqa, --show-*, fix hints,
malformed noqa comments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.memlint.cli_support import run_cli, write

AMP = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"  # MEM015, a safe fix
ZERO = "opt.zero_grad(set_to_none=False)\n"  # MEM009, an unsafe fix


def memlint(cwd: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command, with the real rules, in a fresh process (stdin is real there)."""
    env = {**os.environ, "MEMLINT_CACHE_DIR": str(cwd / ".cache-outside")}
    return subprocess.run([sys.executable, "-m", "memlint", "--no-cache", *argv], cwd=cwd,
                          input=stdin, capture_output=True, text=True, env=env, check=False)


def test_each_file_uses_its_nearest_config(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`memlint pkgA/m.py pkgB/m.py` (a pre-commit run) applies each package's own config,
    whichever files the commit holds."""
    write(tmp_path, "pkgA/m.py", "leak()\ndrip()\n")
    write(tmp_path, "pkgB/m.py", "leak()\ndrip()\n")
    write(tmp_path, "pkgC/m.py", "leak()\ndrip()\n")
    write(tmp_path, "pkgA/pyproject.toml", "[tool.memlint]\nextend-select = ['MEM902']\n")
    write(tmp_path, "pkgB/memlint.toml", "ignore = ['MEM901']\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "pkgA/m.py", "pkgB/m.py", "pkgC/m.py")
    assert run.lines[:4] == [
        "pkgA/m.py:1:1: MEM901 leak() called",
        "pkgA/m.py:2:1: MEM902 drip() called",
        "pkgC/m.py:1:1: MEM901 leak() called",
        "Found 3 problems.",
    ]
    # One file alone gets the same verdict as in company.
    alone = run_cli(capsys, tmp_path, "--no-cache", "pkgB/m.py")
    assert alone.rc == 0, alone.lines
    # --config switches the hierarchy off: one file's settings for all.
    fixed = run_cli(capsys, tmp_path, "--no-cache", "--config", "pkgB/memlint.toml", ".")
    assert (fixed.rc, fixed.lines) == (0, ["All checks passed."])


def test_nested_config_excludes_and_per_file_ignores_are_relative_to_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "sub/gen/x.py", "leak()\n")
    write(tmp_path, "sub/tests/t.py", "leak()\n")
    write(tmp_path, "gen/x.py", "leak()\n")
    write(tmp_path, "sub/pyproject.toml",
          "[tool.memlint]\nextend-exclude = ['/gen']\n"
          "per-file-ignores = {'/tests/*' = ['MEM901']}\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.lines[:-1] == ["gen/x.py:1:1: MEM901 leak() called"]


def test_show_files_and_show_settings(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "a.py", "leak()\n")
    write(tmp_path, "pkg/b.py", "leak()\n")
    write(tmp_path, "build/c.py", "leak()\n")
    write(tmp_path, "pkg/pyproject.toml", "[tool.memlint]\nselect = ['MEM902']\n")
    files = run_cli(capsys, tmp_path, "--show-files")
    assert (files.rc, files.lines) == (0, ["a.py", "pkg/b.py"])
    shown = run_cli(capsys, tmp_path, "--show-settings", "pkg/b.py")
    assert shown.rc == 0
    assert shown.lines[0] == "Resolved settings for: pkg/b.py"
    assert f"config = {tmp_path.resolve() / 'pkg' / 'pyproject.toml'}" in shown.lines
    assert "enabled = MEM902" in shown.lines
    default = run_cli(capsys, tmp_path, "--show-settings", "a.py")
    assert "config = (none: defaults)" in default.lines
    assert "enabled = MEM901, MEM903" in default.lines


def test_stdin_is_linted_as_the_named_file(tmp_path: Path) -> None:
    write(tmp_path, "pkg/pyproject.toml",
          "[tool.memlint]\nper-file-ignores = {'skip.py' = ['MEM015']}\n")
    run = memlint(tmp_path, "-", "--stdin-filename", "pkg/m.py", stdin=AMP)
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines()[0].startswith("pkg/m.py:3:6: MEM015 [*] ")
    # The named file's own settings apply (here: its per-file-ignores), even unsaved.
    ignored = memlint(tmp_path, "--stdin-filename", "pkg/skip.py", stdin=AMP)
    assert (ignored.returncode, ignored.stdout) == (0, "All checks passed.\n"), ignored.stderr
    plain = memlint(tmp_path, "-", stdin="x = 1\n")
    assert plain.returncode == 0 and plain.stdout == "All checks passed.\n"


def test_stdin_fix_writes_the_fixed_code_to_stdout(tmp_path: Path) -> None:
    run = memlint(tmp_path, "--fix", "--stdin-filename", "m.py", stdin=AMP + ZERO)
    assert 'torch.amp.autocast("cuda")' in run.stdout
    assert "set_to_none=False" in run.stdout  # unsafe: left alone
    assert run.stderr.splitlines() == [
        "m.py:5:1: MEM009 " + run.stderr.split("MEM009 ", 1)[1].splitlines()[0]]
    assert run.returncode == 1
    assert not (tmp_path / "m.py").exists()
    with_stdin_and_path = memlint(tmp_path, "-", "other.py", stdin="")
    assert with_stdin_and_path.returncode == 2
    assert "cannot be combined" in with_stdin_and_path.stderr


def test_fix_hints_and_show_fixes(tmp_path: Path) -> None:
    write(tmp_path, "m.py", AMP + ZERO)
    run = memlint(tmp_path, "m.py")
    assert run.stdout.splitlines()[-1] == (
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the "
        "`--unsafe-fixes` option).")
    fixed = memlint(tmp_path, "--fix", "--show-fixes", "m.py")
    assert "Fixed 1 problem:\n- m.py:\n    1 \u00d7 MEM015 (deprecated-amp-api)\n" in fixed.stderr
    assert "torch.amp.autocast" in (tmp_path / "m.py").read_text()
    nothing = memlint(tmp_path, "--fix", "--show-fixes", "m.py")
    assert "No fixes applied." in nothing.stderr


def test_add_noqa_silences_every_current_finding(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    source = ("leak()\n"
              "x = leak()  # noqa: E501\n"
              "y = leak()  # noqa\n"
              "s = '''\n"
              "text''' + str(leak())\n"
              "z = [leak(), leak()]\n")
    path = write(tmp_path, "m.py", source)
    run = run_cli(capsys, tmp_path, "--no-cache", "--add-noqa", ".")
    assert run.rc == 0
    assert run.err.strip().splitlines()[-1] == "Added 4 noqa directives."
    assert path.read_text() == (
        "leak()  # noqa: MEM901\n"
        "x = leak()  # noqa: E501, MEM901\n"
        "y = leak()  # noqa\n"
        "s = '''\n"
        "text''' + str(leak())  # noqa: MEM901\n"
        "z = [leak(), leak()]  # noqa: MEM901\n")
    again = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert (again.rc, again.lines) == (0, ["All checks passed."])
    assert run_cli(capsys, tmp_path, "--no-cache", "--add-noqa", ".").err.strip().endswith(
        "Added 0 noqa directives.")


@pytest.mark.parametrize("comment", ["# noqa MEM901", "# noqa : MEM901", "# noqa:", "#noqa  :"])
def test_malformed_noqa_is_reported_and_silences_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], comment: str) -> None:
    write(tmp_path, "m.py", f"leak()  {comment}\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.lines == ["m.py:1:1: MEM901 leak() called", "Found 1 problem."]
    assert run.err.splitlines() == [
        "memlint: warning: m.py:1:9: invalid `# noqa` directive: expected `:` followed by a "
        "comma-separated list of codes (e.g. `# noqa: MEM001, MEM002`); it silences nothing"]


@pytest.mark.parametrize("comment", ["# noqa", "# noqa: MEM901", "# NOQA:MEM901",
                                     "# noqa because the test wants it"])
def test_well_formed_noqa_still_silences(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         comment: str) -> None:
    write(tmp_path, "m.py", f"leak()  {comment}\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert (run.rc, run.lines, run.err) == (0, ["All checks passed."], "")


def test_editing_a_nested_config_invalidates_cached_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "pkgA/m.py", "leak()\n")
    write(tmp_path, "pkgB/m.py", "leak()\n")
    config = write(tmp_path, "pkgB/memlint.toml", "ignore = ['MEM901']\n")
    cache = ["--cache-dir", str(tmp_path.parent / f"{tmp_path.name}-cache")]
    first = run_cli(capsys, tmp_path, *cache, "pkgA/m.py", "pkgB/m.py")
    assert first.lines == ["pkgA/m.py:1:1: MEM901 leak() called", "Found 1 problem."]
    again = run_cli(capsys, tmp_path, *cache, "pkgA/m.py", "pkgB/m.py")
    assert again.lines == first.lines
    config.write_text("ignore = []\n", encoding="utf-8")
    edited = run_cli(capsys, tmp_path, *cache, "pkgA/m.py", "pkgB/m.py")
    assert edited.lines[:2] == ["pkgA/m.py:1:1: MEM901 leak() called",
                                "pkgB/m.py:1:1: MEM901 leak() called"]


def test_a_broken_nested_config_is_a_one_line_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "pkg/m.py", "leak()\n")
    write(tmp_path, "pkg/memlint.toml", "selec = ['MEM901']\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.rc == 2
    assert run.err.startswith("memlint: error: ") and "unknown key 'selec'" in run.err
    assert len(run.err.splitlines()) == 1

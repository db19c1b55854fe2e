"""Hostile input: every bad file gets one line (or a reasoned skip), and the run goes on.

The whole tree is linted in one run, so each case also proves it does not stop the others,
and the tree is snapshotted to prove memlint never writes into what it lints.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import memlint.filecheck
from tests.memlint.cli_support import run_cli, snapshot, write

NESTING = 5000  # far past what libcst's native parser survives (it overflows the C stack)


def build_tree(root: Path) -> None:
    root.mkdir()
    (root / "binary.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00leak()\n")
    (root / "latin1_cookie.py").write_bytes(
        "# -*- coding: latin-1 -*-\nname = 'café'\nleak()\n".encode("latin-1"))
    (root / "latin1_no_cookie.py").write_bytes("name = 'café'\n".encode("latin-1"))
    (root / "empty.py").write_bytes(b"")
    write(root, "syntax_error.py", "def f(:\n    return\n")
    write(root, "unterminated.py", "s = '''never closed\n")
    # Clean on purpose: positions on a 200k-element line are quadratic in libcst (see report).
    write(root, "huge_list.py", "x = [" + ", ".join(["1"] * 200_000) + "]\n")
    write(root, "nested_parens.py", "x = " + "(" * NESTING + "1" + ")" * NESTING + "\n")
    write(root, "nested_ok.py", "x = " + "(" * 50 + "leak()" + ")" * 50 + "\n")
    write(root, "unreadable.py", "leak()\n")
    write(root, "z_last_good.py", "leak()\n")
    os.symlink(root, root / "loop_dir")
    os.symlink(root / "loop_b.py", root / "loop_a.py")
    os.symlink(root / "loop_a.py", root / "loop_b.py")


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "hostile"
    build_tree(root)
    unreadable = root / "unreadable.py"
    unreadable.chmod(0)
    if os.access(unreadable, os.R_OK):
        # Running as root: permissions do not block reads, so simulate the failing read.
        real = memlint.filecheck.read_source

        def refuse(path: str) -> bytes:
            if path.endswith("unreadable.py"):
                raise PermissionError(13, "Permission denied", path)
            return real(path)

        monkeypatch.setattr(memlint.filecheck, "read_source", refuse)
    yield root
    unreadable.chmod(0o644)


def test_hostile_tree(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(tree)
    run = run_cli(capsys, tree, "--jobs", "2", "--cache-dir", str(tmp_path / "cache"))
    assert snapshot(tree) == before, "memlint wrote into the linted tree"
    assert run.rc == 1
    assert "Traceback" not in run.out + run.err
    found: dict[str, list[str]] = {}
    for line in run.lines[:-1]:
        path, _, _, rest = line.split(":", 3)
        found.setdefault(path, []).append(rest.split()[0])
    assert run.lines[-1] == f"Found {sum(map(len, found.values()))} problems."
    assert found == {
        "latin1_cookie.py": ["MEM901"],
        "latin1_no_cookie.py": ["MEM999"],
        "syntax_error.py": ["MEM999"],
        "unterminated.py": ["MEM999"],
        "nested_parens.py": [found.get("nested_parens.py", ["?"])[0]],
        "nested_ok.py": ["MEM901"],
        "unreadable.py": ["MEM996"],
        "z_last_good.py": ["MEM901"],
    }
    # Too deep to parse: a parse error or a contained crash, never a dead run.
    assert found["nested_parens.py"][0] in {"MEM997", "MEM999"}
    warnings = run.err.splitlines()
    assert sorted(warnings) == sorted([
        f"memlint: warning: {tree / 'loop_a.py'}: skipped: broken symbolic link or symlink loop",
        f"memlint: warning: {tree / 'loop_b.py'}: skipped: broken symbolic link or symlink loop",
        "memlint: warning: binary.py: skipped: binary file (contains NUL bytes)",
    ])


def test_messages_for_undecodable_and_unreadable_files(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, tree, "--no-cache", "latin1_no_cookie.py", "unreadable.py")
    assert run.lines[0].startswith("latin1_no_cookie.py:1:1: MEM999 cannot decode file: ")
    assert run.lines[1] == "unreadable.py:1:1: MEM996 cannot read file: Permission denied"


def test_crash_of_a_worker_is_attributed_to_its_file(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, tree, "--no-cache", "-j", "1", "nested_parens.py", "z_last_good.py")
    assert run.rc == 1
    first, second = run.lines[:2]
    assert first.startswith("nested_parens.py:1:1: ")
    assert second == "z_last_good.py:1:1: MEM901 leak() called"


def test_bad_cookie_is_a_parse_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_bytes(b"# coding: no-such-codec\nleak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache")
    assert run.rc == 1
    assert run.lines[0].startswith("a.py:1:1: MEM999 cannot decode file: ")


def test_a_file_that_parses_too_slowly_is_abandoned(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # libcst takes tens of seconds on a long unary chain; the run must not wait for it.
    write(tmp_path, "slow.py", "x = " + "-" * 6000 + "1\n")
    write(tmp_path, "z_good.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "-j", "2", "--file-timeout", "2")
    assert run.rc == 1
    assert run.lines[0] == ("slow.py:1:1: MEM997 gave up after 2 s (--file-timeout); "
                            "the file is too complex to parse")
    assert run.lines[1] == "z_good.py:1:1: MEM901 leak() called"


def test_a_syntax_error_is_reported_even_where_no_rule_applies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real rules skip files without trigger words; broken files are still MEM999."""
    write(tmp_path, "broken.py", "def f(:\n    return\n")
    write(tmp_path, "unterminated.py", "s = '''never closed\n")
    # Newer than Python 3.11: CPython 3.11 refuses it, libcst (the final word) accepts it.
    write(tmp_path, "newer_syntax.py", "type Vector = list[float]\ndef f[T](x: T) -> T: ...\n")
    write(tmp_path, "switched_off.py", "# memlint: noqa\ndef f(:\n")
    write(tmp_path, "fine.py", "BATCH = 32\n")
    run = run_cli(capsys, tmp_path, "--no-cache", rules=None)
    assert run.rc == 1
    reported = [(line.split(":")[0], line.split()[1]) for line in run.lines[:-1]]
    assert reported == [("broken.py", "MEM999"), ("unterminated.py", "MEM999")]


def test_deep_but_valid_nesting_keeps_the_files_findings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """150 and 400 nested brackets are valid Python: the file's findings are reported, and
    --fix fixes it (in a worker: the parent never parses it)."""
    for depth in (150, 400):
        write(tmp_path, f"deep_{depth}.py", "import torch\nstate = torch.load(p)\nx = "
              + "[" * depth + "1" + "]" * depth + "\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "--isolated", "--select", "MEM014",
                  rules=None)
    assert [line.split()[1] for line in run.lines if line.startswith("deep_")] == [
        "MEM014", "MEM014"]
    run = run_cli(capsys, tmp_path, "--no-cache", "--isolated", "--select", "MEM014",
                  "--fix", "--unsafe-fixes", rules=None)
    assert run.rc == 0, run.out + run.err
    assert 'map_location="cpu"' in (tmp_path / "deep_400.py").read_text()


def test_a_file_past_the_memory_ceiling_is_one_finding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A giant literal would take gigabytes; past the ceiling it is one MEM997 line."""
    write(tmp_path, "giant.py", "import torch\nx = [" + ", ".join(["1"] * 800_000) + "]\n"
          "state = torch.load(p)\n")
    write(tmp_path, "z_good.py", "import torch\nstate = torch.load(p)\n")
    monkeypatch.setenv("MEMLINT_WORKER_MEMORY_MB", "400")
    run = run_cli(capsys, tmp_path, "--no-cache", "--isolated", "--select", "MEM014",
                  "-j", "2", rules=None)
    assert run.rc == 1
    # The worker either catches its MemoryError or is stopped at the ceiling: one line.
    assert run.lines[0].startswith("giant.py:1:1: MEM997 ")
    assert "ran out of memory on this file" in run.lines[0]
    assert run.lines[1].startswith("z_good.py:2:9: MEM014")


@pytest.mark.parametrize("source", [
    # Only bytecode generation rejects these, and libcst parses them: never a MEM999.
    b"return 1\n", b"break\n", b"yield 1\n", b"*a = 1\n", b"a, *b, *c = d\n",
    b"f(a=1, a=2)\n", b"x = 1\nfrom __future__ import annotations\n",
    b"class A:\n    return 1\n",
])
def test_what_only_bytecode_generation_rejects_is_no_syntax_error(source: bytes) -> None:
    assert memlint.filecheck.syntax_errors("f.py", source) == []


@pytest.mark.parametrize("source", [
    b"def f(:\n    return\n",  # the parser
    b"def f(*, **k): pass\n",  # the parser
    b"del *a\n",  # the parser
    b"# -*- coding: latin-1 -*-\nx = (\n",  # the parser, after decoding per PEP 263
])
def test_syntax_errors_are_reported_once(source: bytes) -> None:
    found = memlint.filecheck.syntax_errors("f.py", source)
    assert [d.code for d in found] == ["MEM999"]


def test_a_valid_file_with_a_coding_cookie_is_no_syntax_error() -> None:
    source = "# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1")
    assert memlint.filecheck.syntax_errors("f.py", source) == []

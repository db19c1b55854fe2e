"""File discovery: default excludes, .gitignore, --force-exclude, and links that loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint.config import DEFAULT_EXCLUDE
from memlint.discovery import Excluder, discover
from tests.memlint.cli_support import run_cli, write


def found(root: Path, *paths: Path, exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
          force_exclude: bool = False, respect_gitignore: bool = True) -> list[str]:
    result = discover(paths or (root,), root=root, exclude=exclude,
                      force_exclude=force_exclude, respect_gitignore=respect_gitignore)
    return [p.relative_to(root).as_posix() for p in result.files]


def test_python_sources_and_stubs_only(tmp_path: Path) -> None:
    for name in ("a.py", "b.pyi", "c.txt", "d.pyc", "pkg/e.py", "pkg/notes.md"):
        write(tmp_path, name, "x = 1\n")
    assert found(tmp_path) == ["a.py", "b.pyi", "pkg/e.py"]


def test_default_excludes_prune_tool_and_build_directories(tmp_path: Path) -> None:
    for directory in DEFAULT_EXCLUDE:
        write(tmp_path, f"{directory}/x.py", "x = 1\n")
        write(tmp_path, f"src/{directory}/y.py", "x = 1\n")
    write(tmp_path, "src/keep.py", "x = 1\n")
    write(tmp_path, "src/builder/keep.py", "x = 1\n")
    assert found(tmp_path) == ["src/builder/keep.py", "src/keep.py"]


def test_exclude_replaces_and_extend_adds(tmp_path: Path) -> None:
    write(tmp_path, "build/a.py", "x = 1\n")
    write(tmp_path, "gen/b.py", "x = 1\n")
    write(tmp_path, "c_pb2.py", "x = 1\n")
    assert found(tmp_path, exclude=("gen",)) == ["build/a.py", "c_pb2.py"]
    assert found(tmp_path, exclude=(*DEFAULT_EXCLUDE, "gen", "*_pb2.py")) == []


_PARTS = st.sampled_from(["build", "src", ".venv", "a.b", "x-y", "dist", "m.py", "_b"])


@settings(max_examples=300, deadline=None)
@given(patterns=st.lists(_PARTS, max_size=4), parts=st.lists(_PARTS, min_size=1, max_size=4),
       is_dir=st.booleans())
def test_plain_name_excludes_match_as_gitignore_patterns_do(
        patterns: list[str], parts: list[str], is_dir: bool) -> None:
    # Plain names skip pathspec (a set lookup per walked entry): the same verdict as its own.
    root = Path("/project")
    excluder = Excluder(patterns, root)
    path = root.joinpath(*parts)
    expected = excluder.spec.match_file("/".join(parts) + ("/" if is_dir else ""))
    assert excluder.excluded(path, is_dir) == expected
    assert excluder.excludes_entry(path.parent, path.name, is_dir) == expected


def test_a_walk_below_an_excluded_folder_finds_nothing(tmp_path: Path) -> None:
    # The folders between the root and the one walked are matched too (`build/sub/x.py`).
    write(tmp_path, "build/sub/x.py", "x = 1\n")
    write(tmp_path, "src/sub/y.py", "x = 1\n")
    assert found(tmp_path, tmp_path / "build" / "sub") == []
    assert found(tmp_path, tmp_path / "src" / "sub") == ["src/sub/y.py"]


def test_gitignore_files_apply_with_nesting_and_negation(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "generated/\n*_tmp.py\n")
    write(tmp_path, "generated/a.py", "x = 1\n")
    write(tmp_path, "src/b_tmp.py", "x = 1\n")
    write(tmp_path, "src/c.py", "x = 1\n")
    write(tmp_path, "src/sub/.gitignore", "!keep_tmp.py\nlocal.py\n")
    write(tmp_path, "src/sub/keep_tmp.py", "x = 1\n")
    write(tmp_path, "src/sub/local.py", "x = 1\n")
    write(tmp_path, "src/sub/other_tmp.py", "x = 1\n")
    assert found(tmp_path) == ["src/c.py", "src/sub/keep_tmp.py"]
    # The repository's root .gitignore applies when only a subdirectory is linted.
    assert found(tmp_path, tmp_path / "src") == ["src/c.py", "src/sub/keep_tmp.py"]
    assert len(found(tmp_path, respect_gitignore=False)) == 6


def test_named_files_are_linted_unless_force_exclude(tmp_path: Path) -> None:
    target = write(tmp_path, "build/gen.py", "x = 1\n")
    write(tmp_path, "src/a.py", "x = 1\n")
    assert found(tmp_path, target) == ["build/gen.py"]
    assert found(tmp_path, target, force_exclude=True) == []
    assert found(tmp_path, target, tmp_path / "src", force_exclude=True) == ["src/a.py"]


def test_a_directory_link_loop_neither_hangs_nor_duplicates(tmp_path: Path) -> None:
    write(tmp_path, "pkg/a.py", "x = 1\n")
    os.symlink(tmp_path, tmp_path / "pkg" / "loop")
    os.symlink(tmp_path / "pkg", tmp_path / "alias")
    assert found(tmp_path) == ["pkg/a.py"]


def test_file_link_loops_are_skipped_with_a_reason(tmp_path: Path) -> None:
    os.symlink(tmp_path / "b.py", tmp_path / "a.py")
    os.symlink(tmp_path / "a.py", tmp_path / "b.py")
    write(tmp_path, "c.py", "x = 1\n")
    result = discover([tmp_path], root=tmp_path, exclude=DEFAULT_EXCLUDE)
    assert [p.name for p in result.files] == ["c.py"]
    assert sorted((s.path.name, s.reason) for s in result.skipped) == [
        ("a.py", "broken symbolic link or symlink loop"),
        ("b.py", "broken symbolic link or symlink loop"),
    ]


def test_force_exclude_in_cli_for_pre_commit(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "pyproject.toml", "[tool.memlint]\nextend-exclude = ['vendored/']\n")
    write(tmp_path, "vendored/lib.py", "leak()\n")
    assert run_cli(capsys, tmp_path, "--no-cache", "vendored/lib.py").rc == 1
    run = run_cli(capsys, tmp_path, "--no-cache", "--force-exclude", "vendored/lib.py")
    assert (run.rc, run.out) == (0, "All checks passed.\n")


def test_git_info_exclude_and_global_excludes_file_are_honoured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlint.config import DEFAULT_EXCLUDE
    from memlint.discovery import discover

    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("local_scratch.py\n", encoding="utf-8")
    home = tmp_path / "home"
    (home / "cfg").mkdir(parents=True)
    (home / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {home / 'cfg' / 'ignore'}\n", encoding="utf-8")
    (home / "cfg" / "ignore").write_text("*_personal.py\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in ("train.py", "local_scratch.py", "notes_personal.py",
                 ".ipynb_checkpoints/train-checkpoint.py", "_build/gen.py", ".nox/x.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x = 1\n", encoding="utf-8")
    found = discover([repo], root=repo, exclude=DEFAULT_EXCLUDE)
    assert [p.name for p in found.files] == ["train.py"]

"""The result cache: reused when nothing changed, never trusted when something did."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memlint.cache import FORMAT
from tests.memlint.cli_support import run_cli, write


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(root, "a.py", "leak()\n")
    write(root, "b.py", "x = 1\n")
    return root


def cache_files(cache_dir: Path) -> list[Path]:
    """The result caches (one per configuration), not the shared module-summary store."""
    return sorted(p for p in cache_dir.rglob("*.json") if not p.name.startswith("summaries-"))


def tamper(cache_dir: Path, old: str, new: str) -> None:
    """Rewrite a cached message: if the next run prints it, the result came from the cache."""
    (path,) = cache_files(cache_dir)
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


def lint(capsys: pytest.CaptureFixture[str], project: Path, cache_dir: Path,
         *argv: str) -> list[str]:
    return run_cli(capsys, project, "--cache-dir", str(cache_dir), *argv).lines


def test_warm_run_reuses_results_without_relinting(
        project: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cold = lint(capsys, project, cache_dir)
    assert cold[0] == "a.py:1:1: MEM901 leak() called"
    assert (cache_dir / ".gitignore").read_text(encoding="utf-8").endswith("*\n")
    tamper(cache_dir, "leak() called", "from the cache")
    assert lint(capsys, project, cache_dir)[0] == "a.py:1:1: MEM901 from the cache"


def test_edited_file_is_linted_again(project: Path, cache_dir: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    tamper(cache_dir, "leak() called", "from the cache")
    write(project, "a.py", "x = 0\nleak()\n")
    assert lint(capsys, project, cache_dir)[0] == "a.py:2:1: MEM901 leak() called"


def test_touched_but_unchanged_file_is_recognised_by_content(
        project: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    tamper(cache_dir, "leak() called", "from the cache")
    st = (project / "a.py").stat()
    os.utime(project / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert lint(capsys, project, cache_dir)[0] == "a.py:1:1: MEM901 from the cache"


def test_configuration_is_part_of_the_key(project: Path, cache_dir: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    tamper(cache_dir, "leak() called", "from the cache")
    out = lint(capsys, project, cache_dir, "--extend-select", "MEM902")
    assert out[0] == "a.py:1:1: MEM901 leak() called"
    assert len(cache_files(cache_dir)) == 2


def test_corrupt_cache_is_ignored_and_replaced(project: Path, cache_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    (path,) = cache_files(cache_dir)
    for garbage in ("{not json", '{"format": 1, "files": {"x": [1, 2]}}', "[]", "\0\0"):
        path.write_text(garbage, encoding="utf-8")
        run = run_cli(capsys, project, "--cache-dir", str(cache_dir))
        assert run.rc == 1 and run.err == ""
        assert run.lines[0] == "a.py:1:1: MEM901 leak() called"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == FORMAT and len(data["files"]) == 2


def test_cache_writes_leave_no_temporary_files(project: Path, cache_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    write(project, "c.py", "leak()\n")
    lint(capsys, project, cache_dir)
    names = [p.name for p in cache_dir.rglob("*") if p.is_file()]
    assert not [n for n in names if n.startswith(".tmp-")]


def test_no_cache_writes_nothing_and_default_dir_is_the_project_root(
        project: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLINT_CACHE_DIR", raising=False)
    before = sorted(p.name for p in project.iterdir())
    assert run_cli(capsys, project, "--no-cache").rc == 1
    assert sorted(p.name for p in project.iterdir()) == before
    write(project, "pyproject.toml", "[tool.memlint]\nignore = []\n")
    sub = project / "sub"
    sub.mkdir()
    run_cli(capsys, sub, str(project))
    assert (project / ".memlint_cache").is_dir()
    assert not (sub / ".memlint_cache").exists()


def test_unwritable_cache_is_a_warning_not_a_failure(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("", encoding="utf-8")
    run = run_cli(capsys, project, "--cache-dir", str(blocker / "cache"))
    assert run.rc == 1
    assert run.lines[0] == "a.py:1:1: MEM901 leak() called"
    assert run.err.startswith("memlint: warning: cannot write cache")
    assert len(run.err.splitlines()) == 1


def test_cache_entries_with_wrong_field_types_are_dropped(
        project: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    (path,) = cache_files(cache_dir)
    pristine = json.loads(path.read_text(encoding="utf-8"))
    key = next(k for k in pristine["files"] if k.endswith("a.py"))

    def damaged(change: str) -> dict[str, object]:
        data = json.loads(json.dumps(pristine))
        entry = data["files"][key]
        if change == "string line":
            entry[4][0]["line"] = "1"
        elif change == "int code":
            entry[4][0]["code"] = 901
        else:  # an mtime past any integer: JSON's 1e400 reads as infinity
            entry[0] = 1e400
        return data

    for change in ("string line", "int code", "huge mtime"):
        path.write_text(json.dumps(damaged(change)), encoding="utf-8")
        run = run_cli(capsys, project, "--cache-dir", str(cache_dir))
        assert run.rc == 1 and run.err == "", change
        assert run.lines[0] == "a.py:1:1: MEM901 leak() called", change


@pytest.mark.parametrize("directory", ["", ".", "proj"])
def test_cache_dir_holding_the_project_is_refused(
        tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, directory: str) -> None:
    # `--cache-dir "$UNSET"` or `--cache-dir .` would write a `*` .gitignore over the project.
    monkeypatch.chdir(project if directory != "proj" else tmp_path)
    capsys.readouterr()
    from memlint.cli import main

    code = main(["--cache-dir", directory, str(project)])
    err = capsys.readouterr().err
    assert code == 2 and "choose a folder of its own" in err
    assert not (project / ".gitignore").exists() and not (project / "CACHEDIR.TAG").exists()


def test_cached_results_are_kept_per_project_root(
        tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The same per-file-ignores text means different files under different roots.
    root = tmp_path / "repo"
    write(root, "a.py", "leak()\n")
    write(root, "sub/a.py", "leak()\n")
    table = '[tool.memlint]\nper-file-ignores = {"/a.py" = ["MEM901"]}\n'
    (root / "pyproject.toml").write_text(table, encoding="utf-8")
    (root / "sub" / "pyproject.toml").write_text(table, encoding="utf-8")
    # --config: one root (repo/) for every file, so sub/a.py is not "/a.py".
    first = run_cli(capsys, root, "--cache-dir", str(cache_dir), "--config", "pyproject.toml",
                    ".")
    assert first.lines[0] == "sub/a.py:1:1: MEM901 leak() called"
    # Rooted at sub/, its a.py is the ignored one: a result cached under the other root
    # must not be served.
    second = run_cli(capsys, root, "--cache-dir", str(cache_dir),
                     "--config", "sub/pyproject.toml", "sub")
    assert second.rc == 0, second.lines
    # Without --config each file has its nearest config's root: both a.py are ignored, and
    # the results cached under the single root above are not served.
    third = run_cli(capsys, root, "--cache-dir", str(cache_dir), ".")
    assert third.rc == 0, third.lines


def test_entries_of_deleted_files_are_pruned(project: Path, cache_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    lint(capsys, project, cache_dir)
    (path,) = cache_files(cache_dir)
    assert any(k.endswith("b.py") for k in json.loads(path.read_text("utf-8"))["files"])
    (project / "b.py").unlink()
    lint(capsys, project, cache_dir)
    files = json.loads(path.read_text("utf-8"))["files"]
    assert not any(k.endswith("b.py") for k in files) and any(k.endswith("a.py") for k in files)


def test_a_file_that_timed_out_is_remembered_until_given_more_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same content does not cost the whole --file-timeout on every run; a longer
    timeout, or --no-cache, tries it again."""
    import memlint.pool

    tree = tmp_path / "tree"
    tree.mkdir()
    write(tree, "slow.py", "x = " + "-" * 6000 + "1\n")
    write(tree, "z_good.py", "leak()\n")
    linted: list[str] = []
    real_run = memlint.pool.Pool.run

    def spy(self: memlint.pool.Pool, tasks: Any, *args: Any, **kwargs: Any) -> Any:
        linted.extend(Path(task.path).name for task in tasks)
        return real_run(self, tasks, *args, **kwargs)

    monkeypatch.setattr(memlint.pool.Pool, "run", spy)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = run_cli(capsys, tree, *cache, "--file-timeout", "1")
    assert first.lines[0] == ("slow.py:1:1: MEM997 gave up after 1 s (--file-timeout); "
                              "the file is too complex to parse")
    assert "slow.py" in linted
    linted.clear()
    second = run_cli(capsys, tree, *cache, "--file-timeout", "1")
    assert "slow.py" not in linted
    assert second.lines[0].startswith(first.lines[0] + " (remembered from an earlier run")
    assert second.lines[1:] == first.lines[1:]
    run_cli(capsys, tree, *cache, "--file-timeout", "1.5")
    assert "slow.py" in linted


def test_a_run_collects_garbage_rarely_and_restores_the_callers_thresholds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent unpickles a summary object per call site and builds the project model:
    a default collection every 700 allocations cost a third of its CPU on transformers."""
    import gc

    import memlint.project.model as model
    from memlint.pool import GC_THRESHOLDS

    seen: list[tuple[int, int, int]] = []
    build = model.build_views

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return build(*args, **kwargs)

    monkeypatch.setattr(model, "build_views", spy)
    write(tmp_path, "a.py", "leak()\n")
    before = gc.get_threshold()
    gc.set_threshold(701, 11, 12)
    try:
        run = run_cli(capsys, tmp_path, "--no-cache", ".")
        assert gc.get_threshold() == (701, 11, 12)
    finally:
        gc.set_threshold(*before)
    assert run.rc == 1
    assert seen == [GC_THRESHOLDS]

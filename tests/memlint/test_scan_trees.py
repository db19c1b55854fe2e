"""The scan's stdlib trees, kept in the worker that parsed them for the lint of the same file:
the lint finds what it finds without them, the worker holds them within its budget, and the
pool sends a file's lint to the worker that scanned it (or, rather than wait, to another)."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest

from memlint import engine
from memlint.filecheck import FileResult, ScanTrees, Task
from memlint.pool import Pool
from memlint.rules import all_rules

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))


@pytest.mark.parametrize("path", CORPUS[::3], ids=lambda p: p.name)
def test_a_lint_from_the_scans_tree_finds_what_a_fresh_parse_does(path: Path) -> None:
    source = path.read_bytes()
    rules = list(all_rules())
    assert engine.lint_source(str(path), source, rules, tree=ast.parse(source)) == (
        engine.lint_source(str(path), source, rules))


def test_trees_are_kept_within_the_budget_oldest_dropped_first() -> None:
    trees = ScanTrees(budget=100)
    made = {name: ast.parse(f"{name} = 1\n") for name in "abcd"}
    trees.keep("a.py", "1", made["a"], 40)
    trees.keep("b.py", "1", made["b"], 40)
    trees.keep("c.py", "1", made["c"], 40)  # over budget: a.py goes
    trees.keep("d.py", "1", made["d"], 101)  # larger than the budget: never kept
    assert trees.take("a.py", "1") is None
    assert trees.take("d.py", "1") is None
    assert trees.take("b.py", "2") is None  # other content: not its tree
    assert trees.take("b.py", "1") is made["b"]
    assert trees.take("b.py", "1") is None  # taken once
    assert trees.take("c.py", "1") is made["c"]


def _pid_lint(task: Any, rules: Any, *, imports_ready: Any = None) -> Any:
    """A worker's lint_task that answers with the process it ran in."""
    return FileResult(task.display, skipped=str(os.getpid()))


def _failed(task: Task, message: str) -> FileResult:
    return FileResult(task.display, skipped=message)


def test_a_files_lint_goes_to_the_worker_that_scanned_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import memlint.filecheck

    monkeypatch.setattr(memlint.filecheck, "lint_task", _pid_lint)  # forked workers see it
    names = ["a.py", "b.py"]
    with Pool() as pool:
        scanned = {r.path: r for r in pool.run(
            [Task(n, n, phase="scan") for n in names], [], 2, 30, _failed, keep=True)}
        assert len({r.lane for r in scanned.values()}) == 2  # one file each
        for order in (names, names[::-1]):
            lint = [Task(n, n, lane=scanned[n].lane) for n in order]
            linted = {r.path: r for r in pool.run(lint, [], 2, 30, _failed, keep=True)}
            for name in names:
                assert linted[name].lane == scanned[name].lane
                assert linted[name].skipped == scanned[name].skipped  # the same process


def test_a_worker_with_no_files_of_its_own_takes_another_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file scanned by one worker: the other takes the smallest of them rather than
    wait."""
    import memlint.filecheck

    monkeypatch.setattr(memlint.filecheck, "lint_task", _pid_lint)
    with Pool() as pool:
        first = next(iter(pool.run([Task("s.py", "s.py", phase="scan")], [], 1, 30, _failed,
                                   keep=True)))
        names = [f"m{i}.py" for i in range(10)]
        linted = list(pool.run([Task(n, n, lane=first.lane) for n in names], [], 2, 30,
                               _failed))
    assert sorted(r.path for r in linted) == names
    assert len({r.lane for r in linted}) == 2

"""Fault injection for the runner and --fix: workers killed mid-file, signals to the parent,
unwritable targets, files replaced or deleted between read and write, a full disk. The
assertion is always the same: nothing lost, no process left behind, exit status 2 with a
one-line reason (a crash while linting is a MEM997 finding instead)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from memlint.diagnostics import FixSafety
from memlint.filecheck import syntax_errors as _REAL_SYNTAX_ERRORS
from memlint.rules.base import Fix, Rule

CORPUS = Path(__file__).parent / "corpus"


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries ``mark`` (the run's workers, wherever they are)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark.encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the workers")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_run_leaves_no_worker_behind(tmp_path: Path, sig: signal.Signals) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    sources = sorted(CORPUS.glob("*.py"))
    for i in range(12):  # enough files to keep two workers busy for a few seconds
        for source in sources:
            shutil.copyfile(source, tree / f"{source.stem}_{i}.py")
    mark = f"MEMLINT_FAULT_TEST={uuid.uuid4().hex}"
    name, value = mark.split("=")
    env = {**os.environ, name: value}
    parent = subprocess.Popen(
        [sys.executable, "-m", "memlint", "--no-cache", "-j", "2", str(tree)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while len(_marked(mark)) < 3 and time.monotonic() < deadline:  # parent + 2 workers
        time.sleep(0.05)
    assert parent.poll() is None, "the run ended before it could be killed"
    parent.send_signal(sig)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _marked(mark)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


_TERM_IN_FORK = """
import os, signal, sys
from memlint.cli import main

def after_fork_in_parent():
    # A SIGTERM that lands while a worker is forked, as a CI timeout's may.
    if not getattr(after_fork_in_parent, "sent", False):
        after_fork_in_parent.sent = True
        os.kill(os.getpid(), signal.SIGTERM)

os.register_at_fork(after_in_parent=after_fork_in_parent)
sys.exit(main(["--no-cache", "-j", "2", sys.argv[1]]))
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_sigterm_while_a_worker_is_forked_stops_the_run(tmp_path: Path) -> None:
    """Python drops an exception a signal handler raises inside fork's own callbacks
    ("Exception ignored"); the run then went on to the end as if never terminated."""
    for i in range(4):
        shutil.copyfile(CORPUS / "accum_right_and_wrong.py", tmp_path / f"t{i}.py")
    done = subprocess.run([sys.executable, "-c", _TERM_IN_FORK, str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == "memlint: error: terminated (SIGTERM)"
    assert "ignored" not in done.stderr


def test_no_worker_process_to_be_had_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """fork failing (a process limit, -j 50 under RLIMIT_NPROC): fewer workers while any
    can be started, a one-line error when none can."""
    import multiprocessing.process

    from memlint.cli import main

    for i in range(6):
        (tmp_path / f"m{i}.py").write_text("leak()\n", encoding="utf-8")
    started = 0
    real_start = multiprocessing.process.BaseProcess.start

    def limited(self: multiprocessing.process.BaseProcess, allowed: int) -> None:
        nonlocal started
        if started >= allowed:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        started += 1
        real_start(self)

    from tests.memlint.cli_support import TEST_RULES

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                        lambda self: limited(self, 2))
    assert main(["--no-cache", "-j", "50", "."], rules=TEST_RULES) == 1
    assert capsys.readouterr().out.count("MEM901") == 6
    started = 0
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                        lambda self: limited(self, 0))
    assert main(["--no-cache", "-j", "50", "."], rules=TEST_RULES) == 2
    assert capsys.readouterr().err == ("memlint: error: cannot start a worker process: "
                                       "Resource temporarily unavailable (a process limit?)\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores RLIMIT_NPROC")
def test_fifty_jobs_under_a_real_process_limit(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text("x = 1\n", encoding="utf-8")
    script = ("import resource, sys; from memlint.cli import main;"
              "n = resource.getrlimit(resource.RLIMIT_NPROC);"
              "resource.setrlimit(resource.RLIMIT_NPROC, (1, n[1]));"
              "sys.exit(main(['--no-cache', '-j', '50', '.']))")
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode in (0, 2), run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr
    assert len(run.stderr.splitlines()) <= 1


def test_a_deleted_working_directory_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r});"
              "from memlint.cli import main; sys.exit(main([]))")
    # -I: no empty (working-directory) entry on sys.path, as for the `memlint` command;
    # with one, CPython 3.13.0 itself fails to import anything once the folder is gone.
    run = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr == ("memlint: error: the current directory no longer exists "
                          "(deleted?); cd into the project again\n")


# -- the fix path under faults: nothing lost, no process left, exit 2 with one line each ---

class Renames(Rule):
    """
    ## What it does
    Flags ``leak()`` with a safe fix to ``fixed()``. Test only.

    ## Why is this bad?
    Test only.

    ## Example
    ```python
    leak()
    ```

    ## How to fix
    Test only.
    """

    code = "MEM905"
    name = "test-renames"
    message = "rename leak"
    fix_safety = FixSafety.SAFE
    triggers = ("leak",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "leak":
            self.report(node, fix=Fix(FixSafety.SAFE, {node.func: cst.Name("fixed")}))


class Dies(Rule):
    """
    ## What it does
    Kills its own process on ``die()`` once the marker file named by ``MEMLINT_DIE_WHEN``
    exists: a worker killed mid-file (the OOM killer, a crash in native code). Test only.

    ## Why is this bad?
    Test only.

    ## Example
    ```python
    die()
    ```

    ## How to fix
    Test only.
    """

    code = "MEM906"
    name = "test-dies"
    message = "never reported"
    triggers = ("die",)

    def visit_Call(self, node: cst.Call) -> None:
        marker = os.environ.get("MEMLINT_DIE_WHEN", "")
        if (isinstance(node.func, cst.Name) and node.func.value == "die"
                and marker and os.path.exists(marker)):
            os.kill(os.getpid(), signal.SIGKILL)


FAULT_RULES = (Renames, Dies)


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")


def _temp_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".memlint"))


def test_a_worker_killed_mid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while linting: that file is one MEM997, the others are linted and fixed.
    Killed while fixing: that file is left as it was, exit 2 with its one line."""
    from memlint.cli import main

    _tree(tmp_path, {"a.py": "leak()\n", "b.py": "leak()\ndie()\n", "c.py": "leak()\n"})
    marker = tmp_path.parent / f"{tmp_path.name}.die"
    marker.touch()
    monkeypatch.setenv("MEMLINT_DIE_WHEN", str(marker))
    monkeypatch.chdir(tmp_path)
    assert main(["--no-cache", "-j", "2", "--fix", "."], rules=FAULT_RULES) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("b.py:1:1: MEM997 the linter process was killed on this "
                                   "file (signal 9), perhaps by the system's out-of-memory "
                                   "killer")
    assert (tmp_path / "a.py").read_text() == (tmp_path / "c.py").read_text() == "fixed()\n"
    assert (tmp_path / "b.py").read_text() == "leak()\ndie()\n"

    # Now the lint passes and the worker dies computing the fix.
    _tree(tmp_path, {"a.py": "leak()\n", "b.py": "leak()\ndie()\n", "c.py": "leak()\n"})
    marker.unlink()
    import memlint.pool

    real_run = memlint.pool.Pool.run

    def arm(self: memlint.pool.Pool, tasks: Any, *args: Any, **kwargs: Any) -> Any:
        if tasks and tasks[0].phase == "fix":
            marker.touch()
        return real_run(self, tasks, *args, **kwargs)

    monkeypatch.setattr(memlint.pool.Pool, "run", arm)
    assert main(["--no-cache", "-j", "2", "--fix", "."], rules=FAULT_RULES) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "error" in line] == [
        "memlint: error: b.py: not fixed: the linter process was killed on this file "
        "(signal 9), perhaps by the system's out-of-memory killer"]
    assert (tmp_path / "b.py").read_text() == "leak()\ndie()\n"
    assert (tmp_path / "a.py").read_text() == (tmp_path / "c.py").read_text() == "fixed()\n"
    assert _temp_files(tmp_path) == []


@pytest.mark.parametrize("fault", ["no temporary file", "replaced", "deleted"])
def test_targets_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """A folder that refuses a temporary file, a file replaced or deleted between the read
    and the write: that file stays as it is now, the others are fixed, exit 2."""
    import tempfile

    import memlint.fixer
    from memlint.cli import main

    _tree(tmp_path, {"a.py": "leak()\n", "b.py": "x = 1\nleak()\n"})
    real_write = memlint.fixer._write_if_unchanged
    real_mkstemp = tempfile.mkstemp

    def faulty(target: Path, original: bytes, new: bytes) -> None:
        if target.name == "b.py" and fault == "replaced":
            target.write_text("# edited meanwhile\nleak()\n", encoding="utf-8")
        elif target.name == "b.py" and fault == "deleted":
            target.unlink()
        real_write(target, original, new)

    def mkstemp(*args: Any, **kwargs: Any) -> Any:
        if fault == "no temporary file" and str(kwargs.get("prefix")).startswith(".b.py"):
            raise PermissionError(13, "Permission denied")
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(memlint.fixer, "_write_if_unchanged", faulty)
    monkeypatch.chdir(tmp_path)
    assert main(["--no-cache", "--fix", "."], rules=FAULT_RULES) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    reason = {"no temporary file": "Permission denied",
              "replaced": "changed on disk while fixing; left untouched",
              "deleted": "No such file or directory"}[fault]
    assert errors == [f"memlint: error: b.py: not fixed: {reason}"]
    assert (tmp_path / "a.py").read_text() == "fixed()\n"
    b = tmp_path / "b.py"
    expected = {"no temporary file": "x = 1\nleak()\n",
                "replaced": "# edited meanwhile\nleak()\n", "deleted": None}[fault]
    assert (b.read_text() if b.exists() else None) == expected
    assert _temp_files(tmp_path) == []


def _fix_tree(root: Path, count: int, lines: int) -> dict[str, bytes]:
    """Files with many safe fixes (MEM015), and what each becomes once fixed."""
    from memlint.fixer import fix_source
    from memlint.rules.mem015_deprecated_amp_api import DeprecatedAmpApi

    text = "import torch\n" + "s = torch.cuda.amp.GradScaler()\n" * lines
    fixed = fix_source("f.py", text.encode(), [DeprecatedAmpApi]).fixed
    assert fixed != text.encode()
    for i in range(count):
        (root / f"m{i:03}.py").write_text(text, encoding="utf-8")
    return {"original": text.encode(), "fixed": fixed}


# `tox -e faults` repeats the signal cases, each round waiting a little longer to send it.
ROUNDS = int(os.environ.get("MEMLINT_FAULT_ROUNDS", "1"))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the workers")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_signal_to_the_parent_while_fixing(tmp_path: Path, sig: signal.Signals,
                                           round_: int) -> None:
    """Every file is either as it was or fully fixed, no temporary file and no worker is
    left, and the exit is status 2 with one line."""
    tree = tmp_path / "tree"
    tree.mkdir()
    contents = _fix_tree(tree, 40, 60)
    mark = f"MEMLINT_FAULT_TEST={uuid.uuid4().hex}"
    name, value = mark.split("=")
    parent = subprocess.Popen(
        [sys.executable, "-m", "memlint", "--no-cache", "--isolated", "--select", "MEM015",
         "-j", "2", "--fix", str(tree)],
        env={**os.environ, name: value}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and parent.poll() is None and all(
            p.read_bytes() == contents["original"] for p in tree.glob("*.py")):
        time.sleep(0.01)
    time.sleep(round_ * 0.01)
    if parent.poll() is not None:
        pytest.skip("the run finished before the signal could be sent")
    parent.send_signal(sig)
    _, err = parent.communicate(timeout=30)
    how = "terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted"
    if parent.returncode == 0:
        # The run wrote its last file between the check above and the signal, and finished.
        assert {p.read_bytes() for p in tree.glob("*.py")} == {contents["fixed"]}
        assert _temp_files(tree) == []
        pytest.skip("the run finished before the signal took effect")
    assert parent.returncode == 2
    assert err.decode().splitlines()[-1] == f"memlint: error: {how}"
    states = {p.read_bytes() for p in tree.glob("*.py")}
    assert states <= {contents["original"], contents["fixed"]}
    assert _temp_files(tree) == []
    deadline = time.monotonic() + 5
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _marked(mark) == []


def test_a_full_disk_loses_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE stands in for a full disk: no fixed file can be written, so every file
    keeps its content, no temporary file is left, and each says so in one line; exit 2."""
    tree = tmp_path / "tree"
    tree.mkdir()
    contents = _fix_tree(tree, 3, 40)
    limit = len(contents["original"]) // 2

    def small_disk() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run(
        [sys.executable, "-m", "memlint", "--no-cache", "--isolated", "--select", "MEM015",
         "--fix", "."], cwd=tree, capture_output=True, text=True, timeout=120,
        preexec_fn=small_disk,
    )
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if line.startswith("memlint: error")]
    assert errors == [f"memlint: error: m{i:03}.py: not fixed: File too large"
                      for i in range(3)]
    assert {p.read_bytes() for p in tree.glob("*.py")} == {contents["original"]}
    assert _temp_files(tree) == []


def _fragile_lint(task: Any, rules: Any, *, imports_ready: Any = None) -> Any:
    """A worker's lint_task that dies on die.py and hangs on hang.py."""
    from memlint.filecheck import FileResult

    name = os.path.basename(task.path)
    if name == "die.py":
        os.kill(os.getpid(), signal.SIGKILL)
    if name == "hang.py":
        time.sleep(60)
    return FileResult(task.display, skipped=f"done {name}")


@pytest.mark.parametrize("ahead", [1, 4])
def test_files_sent_ahead_survive_a_crash_and_a_timeout(
        monkeypatch: pytest.MonkeyPatch, ahead: int) -> None:
    """With files sent ahead of the answers (the scan pass), a worker that dies or hangs
    still costs exactly its one file: those queued behind it go to another worker."""
    import memlint.filecheck
    from memlint.filecheck import FileResult, Task
    from memlint.pool import Pool

    monkeypatch.setattr(memlint.filecheck, "lint_task", _fragile_lint)  # forked workers see it
    names = ["a.py", "die.py", "b.py", "c.py", "hang.py", "d.py", "e.py", "f.py", "g.py"]
    tasks = [Task(name, name, phase="scan") for name in names]

    def failed(task: Task, message: str) -> FileResult:
        return FileResult(task.display, skipped=message)

    with Pool() as pool:
        results = list(pool.run(tasks, [], 2, 1.5, failed, ahead=ahead))
    outcome = {r.path: r.skipped or "" for r in results}
    assert len(results) == len(names) and sorted(outcome) == sorted(names)
    assert outcome["die.py"].startswith("the linter process was killed on this file")
    assert outcome["hang.py"].startswith("gave up after 1.5 s (--file-timeout)")
    assert all(outcome[n] == f"done {n}" for n in names if n not in ("die.py", "hang.py"))


def _fragile_syntax_check(display: str, source: bytes, imports_ready: Any = None) -> Any:
    """A worker's syntax check that dies on die.py and hangs on hang.py (the real one else)."""
    name = os.path.basename(display)
    if name == "die.py":
        os.kill(os.getpid(), signal.SIGKILL)
    if name == "hang.py":
        time.sleep(60)
    return _REAL_SYNTAX_ERRORS(display, source, imports_ready)


@pytest.mark.parametrize("trouble", ["die.py", "hang.py"])
def test_a_deferred_syntax_check_costs_exactly_its_one_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        trouble: str) -> None:
    """The syntax checks of files no rule applies to run in batches while the project model
    is built; a worker that dies or hangs in a batch costs one file, found by checking the
    batch's files again one at a time, and every other file keeps its verdict."""
    import memlint.filecheck
    from memlint.cli import main

    for name in ("a.py", "b.py", "c.py", trouble):
        (tmp_path / name).write_text("BATCH = 32\n", encoding="utf-8")
    (tmp_path / "broken.py").write_text("def f(:\n", encoding="utf-8")
    monkeypatch.setattr(memlint.filecheck, "syntax_errors", _fragile_syntax_check)
    monkeypatch.chdir(tmp_path)
    assert main(["--no-cache", "--isolated", "-j", "1", "--file-timeout", "1", "."]) == 1
    lines = capsys.readouterr().out.splitlines()
    reported = [(line.split(":")[0], line.split()[1]) for line in lines if ".py:" in line]
    assert reported == [("broken.py", "MEM999"), (trouble, "MEM997")]
    message = next(line for line in lines if line.startswith(trouble))
    assert ("gave up after 1 s" if trouble == "hang.py" else "was killed") in message


def _marking_lint(task: Any, rules: Any, *, imports_ready: Any = None) -> Any:
    """A worker's lint_task that leaves a file named after the task in MEMLINT_TEST_MARKS."""
    from memlint.filecheck import FileResult

    (Path(os.environ["MEMLINT_TEST_MARKS"]) / os.path.basename(task.path)).touch()
    return FileResult(task.display)


def test_a_pass_starts_before_its_results_are_asked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner sends the deferred syntax checks, then builds the project model while they
    run: the first tasks must reach the workers when the pass is created, not when the
    caller first asks for a result."""
    import memlint.filecheck
    from memlint.filecheck import FileResult, Task
    from memlint.pool import Pool

    monkeypatch.setattr(memlint.filecheck, "lint_task", _marking_lint)
    monkeypatch.setenv("MEMLINT_TEST_MARKS", str(tmp_path))
    names = ["a.py", "b.py", "c.py"]

    def failed(task: Task, message: str) -> FileResult:
        return FileResult(task.display, skipped=message)

    with Pool() as pool:
        running = pool.run([Task(n, n) for n in names], [], 2, 30, failed, ahead=4)
        deadline = time.monotonic() + 10
        while len(list(tmp_path.iterdir())) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(p.name for p in tmp_path.iterdir()) == names
        assert sorted(r.path for r in running) == names


def _slow_syntax_check(display: str, source: bytes, imports_ready: Any = None) -> Any:
    """A worker's syntax check that takes its time over slow.py and says when it is done."""
    if os.path.basename(display) == "slow.py":
        time.sleep(1.5)
        (Path(os.environ["MEMLINT_TEST_MARKS"]) / "checked").touch()
    return _REAL_SYNTAX_ERRORS(display, source, imports_ready)


def test_the_lint_is_planned_while_the_deferred_syntax_checks_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent builds the project model, summarises the modules it found missing (a
    helper that inference code calls after ``.eval()``), builds it again and plans the lint
    while the workers run the deferred syntax checks: only the lint itself waits for them.
    Every verdict stands: the helper is linted for MEM002, a broken file keeps its error."""
    import memlint.filecheck
    import memlint.project.model
    from memlint.cli import main

    marks = tmp_path / "marks"
    marks.mkdir()
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (project / "pkg" / "evaluate.py").write_text(
        "import torch\n\nfrom pkg.helpers import run_batches\n\n\n"
        "def main(model, items):\n    model.eval()\n    return run_batches(model, items)\n",
        encoding="utf-8")
    (project / "pkg" / "helpers.py").write_text(
        "def run_batches(model, items):\n    outs = []\n    for x in items:\n"
        "        outs.append(model(x))\n    return outs\n", encoding="utf-8")
    (project / "pkg" / "slow.py").write_text("SIZE = 3\n", encoding="utf-8")
    (project / "pkg" / "broken.py").write_text("def f(:\n", encoding="utf-8")
    built = memlint.project.model.build_views
    checked_at_build: list[bool] = []

    def spied(*args: Any, **kwargs: Any) -> Any:
        checked_at_build.append((marks / "checked").exists())
        return built(*args, **kwargs)

    monkeypatch.setattr(memlint.project.model, "build_views", spied)
    monkeypatch.setattr(memlint.filecheck, "syntax_errors", _slow_syntax_check)
    monkeypatch.setenv("MEMLINT_TEST_MARKS", str(marks))
    monkeypatch.chdir(project)
    assert main(["--no-cache", "--isolated", "-j", "1", "."]) == 1
    assert checked_at_build == [False, False]  # the model, and again with the helper
    assert (marks / "checked").exists()
    reported = sorted((line.split(":")[0], line.split()[1])
                      for line in capsys.readouterr().out.splitlines() if ".py:" in line)
    assert reported == [("pkg/broken.py", "MEM999"), ("pkg/helpers.py", "MEM002")]

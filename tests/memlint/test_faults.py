"""Fault injection for the runner: a killed memlint leaves no process behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

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
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert run.stderr == ("memlint: error: the current directory no longer exists "
                          "(deleted?); cd into the project again\n")

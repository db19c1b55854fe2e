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

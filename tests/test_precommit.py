"""The real pre-commit tool runs the hook the way the README shows it.

The README's configuration points at the GitHub repository; here the same configuration
points at a local git clone of this source tree, tagged with the README's ``rev``. pre-commit
then builds its own environment from ``.pre-commit-hooks.yaml`` exactly as for a user: that
environment must hold neither torch nor pytest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.packaging import CHECKOUT, copy_source, run

pytestmark = pytest.mark.slow

AMP = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"  # MEM015


def readme_config(repo: str = "https://") -> str:
    """The README's pre-commit configuration whose ``repo:`` starts with ``repo``."""
    text = (CHECKOUT / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
                if f"repo: {repo}" in b and "id: memlint" in b]
    return block


def git(cwd: Path, *args: str) -> None:
    done = run(["git", *args], cwd, env=_env())
    assert done.returncode == 0, done.stderr


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                "GIT_CONFIG_NOSYSTEM": "1", "HOME": env.get("HOME", "/tmp")})
    env.pop("MEMLINT_CACHE_DIR", None)
    env.update(extra)
    return env


def test_pre_commit_runs_the_hook_as_the_readme_shows_it(tmp_path: Path) -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is not installed")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    config = readme_config()
    rev = re.search(r"rev: (\S+)", config)
    url = re.search(r"repo: (\S+)", config)
    assert rev is not None and url is not None
    hooks = copy_source(tmp_path / "hook-repo")
    git(hooks, "init", "-q")
    git(hooks, "add", "-A")
    git(hooks, "commit", "-q", "-m", "release")
    git(hooks, "tag", rev.group(1))

    project = tmp_path / "project"
    for package, settings in (("pkgA", None), ("pkgB", "ignore = ['MEM015']\n")):
        (project / package).mkdir(parents=True)
        (project / package / "m.py").write_text(AMP, encoding="utf-8")
        if settings:
            (project / package / "memlint.toml").write_text(settings, encoding="utf-8")
    (project / ".pre-commit-config.yaml").write_text(
        config.replace(url.group(1), str(hooks)), encoding="utf-8")
    git(project, "init", "-q")
    git(project, "add", "-A")
    home = tmp_path / "pre-commit-home"
    env = _env(PRE_COMMIT_HOME=str(home))
    pre_commit = [sys.executable, "-m", "pre_commit"]
    everything = run([*pre_commit, "run", "--all-files"], project, env=env, timeout=900)
    assert everything.returncode == 1, everything.stdout + everything.stderr
    assert "pkgA/m.py:3:6: MEM015" in everything.stdout
    assert "pkgB/m.py" not in everything.stdout  # its own memlint.toml ignores MEM015
    # A commit holding only pkgB/m.py gets the same verdict for it.
    alone = run([*pre_commit, "run", "--files", "pkgB/m.py"], project, env=env, timeout=900)
    assert alone.returncode == 0, alone.stdout + alone.stderr

    (python,) = home.glob("repo*/py_env-*/bin/python")
    for absent in ("torch", "pytest"):
        probe = run([python, "-c", f"import {absent}"], project, env=env)
        assert probe.returncode != 0, f"the hook environment has {absent}"


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": source.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1) + "\n"


def test_pre_commit_runs_the_readme_local_hook_on_scripts_and_notebooks(tmp_path: Path) -> None:
    """The README's ``repo: local`` snippet runs the memlint installed beside pre-commit."""
    pytest.importorskip("pre_commit", reason="pre-commit is not installed")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(AMP, encoding="utf-8")
    (project / "explore.ipynb").write_text(_notebook(AMP), encoding="utf-8")
    (project / "clean.py").write_text("x = 1\n", encoding="utf-8")
    (project / ".pre-commit-config.yaml").write_text(readme_config("local"), encoding="utf-8")
    git(project, "init", "-q")
    git(project, "add", "-A")
    bindir = str(Path(sys.executable).parent)  # where the installed memlint command lives
    env = _env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
               PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    pre_commit = [sys.executable, "-m", "pre_commit"]
    done = run([*pre_commit, "run", "--all-files"], project, env=env, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:3:6: MEM015" in done.stdout
    assert "explore.ipynb:cell 1:3:6: MEM015" in done.stdout
    clean = run([*pre_commit, "run", "--files", "clean.py"], project, env=env, timeout=900)
    assert clean.returncode == 0, clean.stdout + clean.stderr

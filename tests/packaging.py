"""Helpers for the tests that build the distribution and install it in fresh environments.

The tests that use them check what a user gets from ``pip install``, not the checkout: a
wheel and an sdist built from a copy of the source tree (never written into the checkout),
installed into new virtual environments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
# Never copied: environments, caches, build output, benchmark downloads.
IGNORED = shutil.ignore_patterns(".git", ".venv", ".tox", "__pycache__", "build", "dist",
                                 "*.egg-info", ".memlint_cache", ".pytest_cache",
                                 ".mypy_cache", ".ruff_cache", ".work", ".cache-outside")


def run(argv: list[str | Path], cwd: Path, *, env: dict[str, str] | None = None,
        stdin: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout, check=False)


def copy_source(target: Path) -> Path:
    shutil.copytree(CHECKOUT, target, ignore=IGNORED, symlinks=True)
    return target


@dataclass
class Env:
    """A fresh virtual environment; ``bin`` first on PATH runs its commands."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        env["MEMLINT_CACHE_DIR"] = str(self.root / "memlint-cache")
        env.update(extra)
        return env

    def pip(self, *args: str | Path, cwd: Path | None = None) -> None:
        done = run([self.python, "-m", "pip", "install", "-q", *args], cwd or self.root,
                   env=self.environ())
        if done.returncode != 0:
            pytest.fail(f"pip install {' '.join(map(str, args))} failed:\n{done.stderr[-3000:]}")

    def has(self, module: str) -> bool:
        done = run([self.python, "-c", f"import {module}"], self.root, env=self.environ())
        return done.returncode == 0


def new_env(path: Path) -> Env:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return Env(path)


@dataclass
class Built:
    wheel: Path
    sdist: Path


def build(source: Path, out: Path, builder: Env) -> Built:
    """A wheel and an sdist of ``source``, built by setuptools in ``builder``."""
    out.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for kind in ("sdist", "wheel"):  # one process each: setuptools keeps global state
        code = (f"import sys; from setuptools import build_meta as b; "
                f"print('built:', b.build_{kind}(sys.argv[1]))")
        done = run([builder.python, "-c", code, out], source, env=builder.environ())
        if done.returncode != 0:
            pytest.fail(f"building the {kind} failed:\n{done.stderr[-3000:]}")
        last = [line for line in done.stdout.splitlines() if line.startswith("built: ")][-1]
        made[kind] = last.split()[1]
    sdist, wheel = made["sdist"], made["wheel"]
    return Built(wheel=out / wheel, sdist=out / sdist)


def interpreter_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"

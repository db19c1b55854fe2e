"""Test-only rules and a CLI driver, so CLI tests do not depend on the real rules' details."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest

from memlint.cli import main
from memlint.rules.base import Rule


class FlagLeak(Rule):
    """
    ## What it does
    Flags every call to ``leak()``. Exists only for the CLI tests.

    ## Why is this bad?
    It is not; the tests need a finding they control.

    ## Example
    ```python
    leak()
    ```

    ## How to fix
    Remove the call.
    """

    code = "MEM901"
    name = "test-leak"
    message = "leak() called"
    # No trigger: the rule always runs, so a file that does not parse is always reported.
    triggers = ()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "leak":
            self.report(node)


class FlagDrip(Rule):
    """
    ## What it does
    Flags every call to ``drip()``; off by default, like an opt-in rule.

    ## Why is this bad?
    Test only.

    ## Example
    ```python
    drip()
    ```

    ## How to fix
    Remove the call.
    """

    code = "MEM902"
    name = "test-drip"
    message = "drip() called"
    default_enabled = False
    triggers = ("drip",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "drip":
            self.report(node)


class Explodes(Rule):
    """
    ## What it does
    Raises on ``boom()``, to prove one broken rule cannot stop a run.

    ## Why is this bad?
    Test only.

    ## Example
    ```python
    boom()
    ```

    ## How to fix
    Test only.
    """

    code = "MEM903"
    name = "test-explodes"
    message = "never reported"
    triggers = ("boom",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "boom":
            raise RuntimeError("rule bug")


TEST_RULES: tuple[type[Rule], ...] = (FlagLeak, FlagDrip, Explodes)


@dataclass
class Run:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def run_cli(capsys: pytest.CaptureFixture[str], cwd: Path, *argv: str,
            rules: Sequence[type[Rule]] | None = TEST_RULES) -> Run:
    """Run ``memlint`` in ``cwd`` with the test rules; the cache goes outside the tree."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        rc = main(list(argv), rules=rules)
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    return Run(rc, captured.out, captured.err)


def write(root: Path, relpath: str, text: str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under root (without following links) with its mode and content."""
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            content = b""
            if path.is_file() and not path.is_symlink() and os.access(path, os.R_OK):
                content = path.read_bytes()
            out[str(path.relative_to(root))] = (st.st_mode, content)
    return out

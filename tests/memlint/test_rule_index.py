"""The command line runs from the generated rule index, so its own process never imports libcst.

These tests guard the pre-commit speed design (see memlint.pool and memlint.rules.spec): if a
change makes the parent import a rule, libcst comes with it and a one-file run slows by 0.2 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlint.filecheck import lint_bytes
from memlint.pool import Pool
from memlint.rules import all_rules, rule_specs
from memlint.rules.spec import RuleSpec

REPO = Path(__file__).resolve().parents[2]


def _inherited_path() -> list[str]:
    """Where this run found its dependencies through PYTHONPATH (libcst for the workers),
    when they are not installed in the interpreter itself."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

TRAINING = textwrap.dedent("""\
    import torch

    def train(model, loader, optimizer, criterion):
        history = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss)
        return history
""")


def test_index_matches_the_rule_classes() -> None:
    assert rule_specs() == tuple(RuleSpec.of(rule) for rule in all_rules())


def test_every_spec_loads_its_own_class() -> None:
    for spec, rule in zip(rule_specs(), all_rules(), strict=True):
        assert spec.rule_class is None
        assert spec.load() is rule


def test_a_spec_naming_a_non_rule_is_refused() -> None:
    spec = RuleSpec("MEM900", "not-a-rule", "memlint.rules.spec", "RuleSpec", True, None, ())
    with pytest.raises(TypeError, match="not a memlint rule"):
        spec.load()


def _modules_after_cli(tmp_path: Path, name: str, text: str) -> tuple[int, str, str]:
    """Run the CLI in a fresh interpreter; report its exit code, output and loaded modules."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    probe = textwrap.dedent(f"""\
        import sys
        from memlint.cli import main
        code = main(["--no-cache", "--isolated", {name!r}])
        print("LIBCST" if any(m == "libcst" or m.startswith("libcst.") for m in sys.modules)
              else "NO-LIBCST")
        raise SystemExit(code)
    """)
    path = os.pathsep.join([str(REPO), *_inherited_path()])
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": path, "PATH": ""})
    return run.returncode, run.stdout, run.stderr


def test_the_parent_process_never_imports_libcst(tmp_path: Path) -> None:
    code, out, err = _modules_after_cli(tmp_path, "train.py", TRAINING)
    assert err == ""
    assert code == 1  # the worker did lint it: MEM001 on the append
    assert "MEM001" in out
    assert out.rstrip().endswith("NO-LIBCST")


def test_a_file_no_rule_applies_to_is_answered_without_parsing(tmp_path: Path) -> None:
    code, out, err = _modules_after_cli(tmp_path, "settings.py", "BATCH = 32\n")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["All checks passed.", "NO-LIBCST"]


def test_specs_and_classes_lint_alike() -> None:
    by_spec = lint_bytes("t.py", TRAINING.encode(), rule_specs())
    by_class = lint_bytes("t.py", TRAINING.encode(), all_rules())
    assert by_spec.diagnostics == by_class.diagnostics
    assert [d.code for d in by_spec.diagnostics] == ["MEM001"]


def test_a_warm_pool_that_gets_no_work_closes_at_once() -> None:
    with Pool.start() as pool:
        (worker,) = pool.idle
    assert pool.idle == []
    assert not worker.process.is_alive()

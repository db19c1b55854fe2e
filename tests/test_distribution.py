"""What a user gets from the built distribution, in fresh environments.

- The wheel, without torch and without pytest (the pre-commit hook's environment): the
  linter works; adding pytest (still no torch), ``pytest --help`` works and ``--gpumem``
  stops with one line.
- The sdist holds what the test suite needs, and the suite runs from it.
- The metadata: name, license, classifiers, URLs, one version.
"""

from __future__ import annotations

import email
import json
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import memlint
from tests.packaging import Built, Env, new_env, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bare(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """The wheel in a fresh environment: no torch, no pytest."""
    env = new_env(tmp_path_factory.mktemp("bare") / "venv")
    env.pip(built.wheel)
    return env


def test_wheel_metadata(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = wheel.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(wheel.read(meta_name))
        (points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = wheel.read(points).decode()
    assert meta["Name"] == "torch-memlint"
    assert meta["Version"] == memlint.__version__
    assert meta["License-Expression"] == "MIT"
    assert any(n.endswith("licenses/LICENSE") for n in names)
    classifiers = meta.get_all("Classifier") or []
    assert "Framework :: Pytest" in classifiers
    assert {f"Programming Language :: Python :: 3.{m}" for m in (10, 11, 12, 13)} <= set(
        classifiers)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    requires = meta.get_all("Requires-Dist") or []
    base = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith(("pytest", "torch")) for r in base), base
    assert "memlint = memlint.cli:run" in entry_points
    assert "gpumem = pytest_gpumem.plugin" in entry_points
    assert {n.split("/")[0] for n in names if not n.startswith("torch_memlint")} == {
        "memlint", "pytest_gpumem"}


def test_linter_from_the_wheel_needs_neither_torch_nor_pytest(bare: Env, tmp_path: Path) -> None:
    assert not bare.has("torch") and not bare.has("pytest")
    env = bare.environ()
    helped = run(["memlint", "--help"], tmp_path, env=env)
    assert helped.returncode == 0 and "--stdin-filename" in helped.stdout
    examples = Path(__file__).resolve().parent.parent / "examples"
    leaks = run(["memlint", "--no-cache", examples / "train_with_leaks.py"], tmp_path, env=env)
    assert leaks.returncode == 1, leaks.stderr
    assert {"MEM001", "MEM002", "MEM003", "MEM004"} <= {
        line.split()[1] for line in leaks.stdout.splitlines() if line.count(":") >= 3}
    clean = run(["memlint", "--no-cache", examples / "train_clean.py"], tmp_path, env=env)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed.\n")


def test_plugin_from_the_wheel_without_torch(bare: Env, tmp_path: Path) -> None:
    """pytest installed later, torch never: the plugin loads, stays out of the way, and
    ``--gpumem`` says in one line what is missing."""
    bare.pip("pytest>=8")
    env = bare.environ()
    helped = run(["pytest", "--help"], tmp_path, env=env)
    assert helped.returncode == 0, helped.stderr
    assert "--gpumem-max-gb=GIB" in helped.stdout
    (tmp_path / "test_plain.py").write_text("def test_ok():\n    assert True\n")
    plain = run(["pytest", "-q", "-p", "no:cacheprovider"], tmp_path, env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    gated = run(["pytest", "-q", "-p", "no:cacheprovider", "--gpumem"], tmp_path, env=env)
    assert gated.returncode == 4, gated.stdout + gated.stderr
    assert gated.stderr.strip().splitlines() == [
        "ERROR: pytest_gpumem: --gpumem needs torch, which is not installed "
        "(pip install 'torch-memlint[gpumem]')"]
    assert "Traceback" not in gated.stdout + gated.stderr


def test_sdist_holds_the_test_suite_and_its_tests_pass(built: Built, tmp_path: Path) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
        sdist.extractall(tmp_path, filter="data")
    for wanted in ("LICENSE", "README.md", "tox.ini", "pyproject.toml", ".ci/run",
                   ".ci/pip_install.py", "examples/train_with_leaks.py",
                   "examples/gpumem/test_training_step.py", "tests/conftest.py",
                   "tests/memlint/test_cli.py", "tests/memlint/data/sarif-schema-2.1.0.json",
                   "tests/memlint/corpus", "docs/rules/README.md", "tools/gen_rule_docs.py"):
        assert wanted in names or any(n.startswith(wanted + "/") for n in names), wanted
    assert not any("__pycache__" in n or n.startswith("bench/.work") for n in names)
    (root,) = tmp_path.iterdir()
    # From the unpacked sdist, its own code (the current directory comes first on sys.path
    # under `python -m pytest`) and its own tests: the CLI, configuration and output tests,
    # and the check that the generated docs in the sdist match its rules.
    done = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                "no:randomly", "tests/memlint/test_cli.py", "tests/memlint/test_config.py",
                "tests/memlint/test_output.py", "tests/memlint/test_rule_docs.py"], root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def test_one_version_source(source_copy: Path) -> None:
    pyproject = (source_copy / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "memlint.__version__" }' in pyproject
    assert json.dumps(memlint.__version__).strip('"') not in pyproject

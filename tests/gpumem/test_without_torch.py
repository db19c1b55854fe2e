"""The plugin in an environment where ``import torch`` fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.gpumem.conftest import plugin_args

REPO = Path(__file__).resolve().parents[2]

BLOCKER = '''
import sys

class _NoTorch:
    """Pretend torch is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''

TESTS = """
import pytest

@pytest.mark.gpu_mem(max_gb=0.001)
def test_marked():
    assert sum(range(10)) == 45

def test_plain():
    pass

def test_torch_is_hidden():
    with pytest.raises(ImportError):
        import torch
"""


@pytest.fixture
def no_torch(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = pytester.mkdir("blocker")
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(blocker), str(REPO), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    pytester.makepyfile(TESTS)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider",
                        *args)


@pytest.mark.usefixtures("no_torch")
def test_plain_run_is_untouched_and_fixtures_skip(pytester: pytest.Pytester) -> None:
    # One interpreter start for both checks: the plain tests pass, the fixture test skips.
    pytester.makepyfile(test_fixture="""
def test_device(gpumem_device):
    pass
""")
    result = _run(pytester, "-q", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["*the gpumem fixtures need torch*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.usefixtures("no_torch")
def test_gpumem_flag_says_it_needs_torch_in_one_line(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--gpumem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: pytest_gpumem: --gpumem needs torch, which is not installed "
        "(pip install 'torch-memlint[gpumem]')"
    ]


BROKEN = '''
import sys

class _BrokenTorch:
    """Pretend torch is installed but broken (a CUDA library missing)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise OSError("libcudart.so.13: cannot open shared object file")
        return None

sys.meta_path.insert(0, _BrokenTorch())
'''


def test_a_torch_that_fails_to_import_is_one_line_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = pytester.mkdir("blocker")
    (blocker / "sitecustomize.py").write_text(BROKEN)
    path = os.pathsep.join([str(blocker), str(REPO), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = _run(pytester, "--gpumem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: pytest_gpumem: --gpumem needs torch, which cannot be imported "
        "(OSError: libcudart.so.13: cannot open shared object file)"
    ]
    _run(pytester).assert_outcomes(passed=1)  # without --gpumem nothing imports torch

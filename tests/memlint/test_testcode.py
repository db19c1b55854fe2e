"""Which paths are test code, for the rules that leave test code alone."""

from __future__ import annotations

import pytest

from memlint.analysis.testcode import is_pytest_module, is_test_code


@pytest.mark.parametrize(("path", "pytest_module", "test_code"), [
    ("tests/test_training.py", True, True),
    ("pkg/training_test.py", True, True),
    ("conftest.py", True, True),
    ("pkg/tests/helpers.py", False, True),
    ("tests/testing_common.py", False, True),
    ("src/pkg/testing_utils.py", False, True),
    ("src/pkg/train.py", False, False),
    ("src/pkg/contest.py", False, False),
    ("tests/memlint/corpus/eval_helpers.py", False, False),
    ("latest/train.py", False, False),
])
def test_test_code_paths(path: str, pytest_module: bool, test_code: bool) -> None:
    assert is_pytest_module(path) is pytest_module
    assert is_test_code(path) is test_code


BLOCKING_COPY = b"""\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=64)
for x, y in loader:
    x = x.to("cuda")
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("train.py", True),
    ("tests/test_loader.py", False),
    ("pkg/tests/helpers.py", False),
])
def test_blocking_copy_is_not_reported_in_test_code(path: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem003_blocking_host_to_device import BlockingHostToDevice

    found = [d.code for d in lint_source(path, BLOCKING_COPY, [BlockingHostToDevice])]
    assert bool(found) is flagged


EVAL_OUTPUTS = b"""\
def evaluate(model, loader):
    model.eval()
    preds = []
    for x, _ in loader:
        preds.append(model(x))
    return preds
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("evaluate.py", True),
    ("tests/test_eval.py", False),
])
def test_eval_outputs_are_not_reported_in_test_code(path: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem005_eval_outputs_retained import EvalOutputsRetained

    found = [d.code for d in lint_source(path, EVAL_OUTPUTS, [EvalOutputsRetained])]
    assert bool(found) is flagged

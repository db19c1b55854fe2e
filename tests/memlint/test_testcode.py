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
    # evaluation scripts named test_*.py in an examples/scripts/tools folder (learning3d's
    # examples/test_dcp.py, tools/test_net.py): argparse scripts, not pytest modules
    ("learning3d/examples/test_dcp.py", False, False),
    ("tools/test_net.py", False, False),
    ("scripts/test_model.py", False, False),
    ("examples/conftest.py", True, True),
    ("examples/tests/test_example.py", True, True),
    ("examples/training_test.py", True, True),
    ("test/examples/test_svgp_regression.py", True, True),
    ("src/pkg/test_utils/scripts/test_sync.py", True, True),
])
def test_test_code_paths(path: str, pytest_module: bool, test_code: bool) -> None:
    assert is_pytest_module(path) is pytest_module
    assert is_test_code(path) is test_code


@pytest.mark.parametrize(("path", "source", "test_code"), [
    # a script that trains, validates and tests (HydraGNN's train_validate_test.py)
    ("hydragnn/train/train_validate_test.py",
     "from unittest.mock import MagicMock\ndef test(loader, model):\n    pass\n", False),
    ("pkg/train_test.py", "import torch\ndef main():\n    train()\n", False),
    # unit tests named the Go/Google way: they import a test framework or define tests
    ("examples/mnist/train_test.py", "from absl.testing import absltest\n", True),
    ("pkg/trainer_test.py", "import torch\n\ndef test_step():\n    pass\n", True),
    ("pkg/model_test.py", "import unittest\n", True),
    ("pkg/model_test.py", "class TestModel:\n    pass\n", True),
    # test_*.py and test folders go by the path
    ("tests/test_train.py", "import torch\n", True),
    ("pkg/tests/train_test.py", "import torch\n", True),
])
def test_a_suffix_test_module_is_test_code_when_it_reads_like_one(
        path: str, source: str, test_code: bool) -> None:
    assert is_test_code(path, source) is test_code
    assert is_test_code(path, source.encode()) is test_code
    assert is_test_code(path)  # without the text, the name decides


BLOCKING_COPY = b"""\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=64)
for x, y in loader:
    x = x.to("cuda")
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("train.py", True),
    ("train_test.py", True),
    ("tests/test_loader.py", False),
    ("examples/test_pointnet.py", True),
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
    ("examples/test_eval.py", True),
])
def test_eval_outputs_are_not_reported_in_test_code(path: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem005_eval_outputs_retained import EvalOutputsRetained

    found = [d.code for d in lint_source(path, EVAL_OUTPUTS, [EvalOutputsRetained])]
    assert bool(found) is flagged


SELF_TEST = """\
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        return self.fc(x)


def tinynet(**kwargs):
    return TinyNet(**kwargs)


def _test():
    for model in [tinynet]:
        net = model(classes=10)
        net.eval()
        x = torch.randn(1, 8)
        y = net(x)
        assert tuple(y.size()) == (1, 10)


if __name__ == "__main__":
    _test()
"""


@pytest.mark.parametrize(("source", "flagged"), [
    # the module's own self-check: a smoke forward on a random input, run as a script
    (SELF_TEST, False),
    (SELF_TEST.replace("_test", "_test_shapes"), False),
    (SELF_TEST.replace('"__main__" ', '"__main__"').replace(
        '__name__ == "__main__"', '"__main__" == __name__'), False),
    # a public evaluation function a script runs is evaluation code
    (SELF_TEST.replace("_test", "test"), True),
    # a private helper nothing runs from __main__ may be called by evaluation code
    (SELF_TEST.replace('if __name__ == "__main__":\n    _test()\n', "def main():\n    _test()\n"),
     True),
    # a method named _test is no module self-check
    (SELF_TEST.replace("def _test():", "class Runner:\n  def _test(self):"), True),
    # a parameterless public test() that makes up its inputs, switches nothing to eval and is
    # called from no function: a smoke test (also when nothing calls it)
    (SELF_TEST.replace("_test", "test").replace("        net.eval()\n", ""), False),
    (SELF_TEST.replace("_test", "test").replace("        net.eval()\n", "").replace(
        'if __name__ == "__main__":\n    test()\n', "# test()\n"), False),
    # ... but not one that loops over data, takes parameters or that a function calls
    (SELF_TEST.replace("_test", "test").replace("        net.eval()\n", "").replace(
        "for model in [tinynet]:", "for model in models:"), True),
    (SELF_TEST.replace("_test", "test").replace("        net.eval()\n", "").replace(
        "def test():", "def test(models):").replace("[tinynet]", "models").replace(
        "    test()\n", "    test([tinynet])\n"), True),
    (SELF_TEST.replace("_test", "test").replace("        net.eval()\n", "").replace(
        'if __name__ == "__main__":\n    test()\n', "def main():\n    test()\n"), True),
])
def test_module_self_test_is_not_evaluation_code(source: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem002_eval_without_no_grad import EvalWithoutNoGrad

    found = [d.code for d in lint_source("zoo/resnet.py", source.encode(), [EvalWithoutNoGrad])]
    assert bool(found) is flagged


def test_is_module_self_test() -> None:
    import libcst as cst

    from memlint.analysis.testcode import is_module_self_test
    from memlint.analysis.tree import TreeIndex

    tree = TreeIndex(cst.parse_module(SELF_TEST))
    (function,) = tree.functions_by_name["_test"]
    assert is_module_self_test(function, tree)
    other = TreeIndex(cst.parse_module(SELF_TEST.replace("if __name__", "if __file__")))
    (function,) = other.functions_by_name["_test"]
    assert not is_module_self_test(function, other)


EVAL_SCRIPT = b"""\
import torch


def test_one_epoch(device, model, test_loader):
    model.eval()
    for points, target in test_loader:
        output = model(points.to(device))
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("examples/test_pointnet.py", True),
    ("test_pointnet.py", False),
])
def test_an_evaluation_script_named_test_in_an_examples_folder_is_checked(
        path: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem002_eval_without_no_grad import EvalWithoutNoGrad

    found = [d.code for d in lint_source(path, EVAL_SCRIPT, [EvalWithoutNoGrad])]
    assert bool(found) is flagged


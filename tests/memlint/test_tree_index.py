"""Which same-file calls can run a definition (``TreeIndex.calls_of``).

Every analysis that follows a function to its callers asks this; a name defined twice at
the top level must not hand each definition the other's callers (a script pasted twice
into one file would otherwise cost the square of its length).
"""

from __future__ import annotations

import libcst as cst

from memlint.analysis.tree import TreeIndex


def _index(source: str) -> TreeIndex:
    return TreeIndex(cst.parse_module(source))


def _lines(index: TreeIndex, calls: list[cst.Call]) -> list[str]:
    """Each call as its source: a label per call."""
    code = index.module.code_for_node
    return [code(call) for call in calls]


def test_a_bare_call_runs_the_definition_in_force() -> None:
    index = _index(
        "early(1)\n"
        "def train(x):\n    return x\n"
        "train(2)\n"
        "def main():\n    train(3)\n"
        "def train(x):\n    return -x\n"
        "train(4)\n"
        "trainer.train(5)\n"
        "early = train\n"
    )
    first, second = index.functions_by_name["train"]
    assert _lines(index, index.calls_of(first)) == ["train(2)", "trainer.train(5)"]
    assert _lines(index, index.calls_of(second)) == [
        "train(3)", "train(4)", "trainer.train(5)"]


def test_a_call_before_every_definition_may_run_any() -> None:
    index = _index(
        "class Runner:\n    result = step(0)\n"
        "def step(x):\n    return x\n"
        "def step(x):\n    return x + 1\n"
    )
    first, second = index.functions_by_name["step"]
    assert _lines(index, index.calls_of(first)) == ["step(0)"]
    assert _lines(index, index.calls_of(second)) == ["step(0)"]


def test_a_conditional_definition_keeps_every_caller() -> None:
    index = _index(
        "def load(p):\n    return p\n"
        "try:\n    from fast import load\nexcept ImportError:\n"
        "    def load(p):\n        return p\n"
        "def load(p):\n    return p\n"
        "load(1)\n"
    )
    for function in index.functions_by_name["load"]:
        assert _lines(index, index.calls_of(function)) == ["load(1)"]


def test_one_definition_and_nested_ones_keep_every_caller() -> None:
    index = _index(
        "def evaluate(m):\n"
        "    def step(b):\n        return m(b)\n"
        "    return [step(b) for b in data]\n"
        "def step(b):\n    return b\n"
        "step(2)\n"
        "obj.evaluate(3)\n"
    )
    (evaluate,) = index.functions_by_name["evaluate"]
    assert _lines(index, index.calls_of(evaluate)) == ["obj.evaluate(3)"]
    for function in index.functions_by_name["step"]:
        assert _lines(index, index.calls_of(function)) == ["step(b)", "step(2)"]

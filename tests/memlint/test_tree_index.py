"""Which same-file calls can run a definition (``TreeIndex.calls_of``).

Every analysis that follows a function to its callers asks this; a name defined twice at
the top level must not hand each definition the other's callers (a script pasted twice
into one file would otherwise cost the square of its length).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
import pytest

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
    assert _lines(index, index.calls_of(first)) == ["train(2)"]
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


def test_self_calls_run_the_method_of_their_class_or_of_a_related_one() -> None:
    index = _index(
        "class Base:\n"
        "    def step(self):\n        return 0\n"
        "    def run(self):\n        return self.step()\n"
        "class Child(Base):\n"
        "    def step(self):\n        return super().step()\n"
        "class Other:\n"
        "    def step(self):\n        return 1\n"
        "    def loop(self):\n        return self.step()\n"
        "def main(m):\n    m.step()\n"
    )
    base, child, other = index.functions_by_name["step"]
    # Base.run's self may be a Child; Other's self is neither.
    assert _lines(index, index.calls_of(base)) == ["self.step()", "super().step()", "m.step()"]
    assert _lines(index, index.calls_of(child)) == ["self.step()", "m.step()"]
    assert _lines(index, index.calls_of(other)) == ["self.step()", "m.step()"]
    assert _class_of(index, index.calls_of(child)[0]) == "Base"
    assert _class_of(index, index.calls_of(other)[0]) == "Other"


def _class_of(index: TreeIndex, call: cst.Call) -> str | None:
    cls = index.enclosing_class(call)
    return None if cls is None else cls.name.value


def test_a_class_defined_again_leaves_its_methods_to_the_one_in_force() -> None:
    index = _index(
        "class Net:\n    def forward(self, x):\n        return x\n"
        "early = Net().forward(1)\n"
        "class Net:\n    def forward(self, x):\n        return -x\n"
        "def main():\n    return Net().forward(2)\n"
        "late = Net().forward(3)\n"
    )
    first, second = index.functions_by_name["forward"]
    assert _lines(index, index.calls_of(first)) == ["Net().forward(1)"]
    assert _lines(index, index.calls_of(second)) == ["Net().forward(2)", "Net().forward(3)"]


def test_classes_of_one_name_share_methods_when_a_class_derives_from_it() -> None:
    index = _index(
        "class Net:\n    def step(self):\n        return self.step()\n"
        "class Net:\n    def step(self):\n        return self.step()\n"
        "class Big(Net):\n    pass\n"
    )
    first, second = index.functions_by_name["step"]
    assert len(index.calls_of(first)) == len(index.calls_of(second)) == 2


def test_a_generic_base_is_a_base() -> None:
    index = _index(
        "class Base(Generic[T]):\n"
        "    def step(self):\n        return 0\n"
        "    def run(self):\n        return self.step()\n"
        "class Child(Base[int]):\n"
        "    def step(self):\n        return 1\n"
    )
    base, child = index.functions_by_name["step"]
    assert _lines(index, index.calls_of(base)) == _lines(index, index.calls_of(child)) == [
        "self.step()"]


_ASSIGNMENTS = (
    "model = build()\n"
    "class Runner:\n"
    "    def __init__(self):\n"
    "        self.model = pipeline('ner')\n"
    "        a = b = 1\n"
    "    def reset(self):\n"
    "        self.model = self.model = other()\n"
    "        def inner():\n"
    "            self.model = nested()\n"
    "    def run(self, x):\n"
    "        model = local()\n"
    "        return self.model(x), model(x)\n"
)


def test_assignments_to_a_name_are_those_of_its_scope() -> None:
    """``self.x`` in the class's methods (not a nested function's), a plain name in the
    function around the question, the module's at the top level; an assignment that names
    the target twice counts once."""
    index = _index(_ASSIGNMENTS)
    self_call, local_call = index.calls_by_name["model"]  # self.model(x), model(x)
    code = index.module.code_for_node
    assert [code(a.value) for a in index.assignments_to("self.model", self_call)] == [
        "pipeline('ner')", "other()"]
    assert [code(a.value) for a in index.assignments_to("model", local_call)] == ["local()"]
    top = index.module.body[0]
    assert [code(a.value) for a in index.assignments_to("model", top)] == ["build()"]
    assert index.assignments_to("self.missing", self_call) == []


def test_a_scope_is_read_once_however_many_names_are_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules ask for the assignments of every call that might be a forward: a walk of the
    scope per question made a 5,000-line class cost seconds."""
    index = _index(_ASSIGNMENTS)
    call = index.calls_by_name["model"][0]  # self.model(x)
    walked: list[cst.CSTNode] = []
    real = index.walk

    def counting(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        walked.append(root)
        return real(root)

    monkeypatch.setattr(index, "walk", counting)
    first = index.assignments_to("self.model", call)
    for _ in range(5):
        assert index.assignments_to("self.model", call) == first
        index.assignments_to("self.other", call)
    assert len(walked) == 4  # the class and its three methods, once

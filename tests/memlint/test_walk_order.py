"""The fast walk (TreeIndex, child_nodes, rule dispatch) must match libcst's own traversal.

memlint reads child fields directly instead of going through ``CSTNode.visit`` for speed;
these tests compare node order, parents and the sequence of rule callbacks with libcst's
on real files, on syntax that exercises unusual field orders, and on generated programs.
"""

from __future__ import annotations

from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings

from memlint.analysis.tree import (
    _CHILD_FIELDS,
    LAYOUT_LEAVES,
    LEFT_OUT,
    TreeIndex,
    child_nodes,
    last_child,
)
from memlint.dispatch import visit_batched

ROOT = Path(__file__).resolve().parents[2]

UNUSUAL = '''
from __future__ import annotations
import os.path as osp, sys
from . import sibling
from torch import (nn as tnn, optim)

@decorator(arg)
@other
async def f[T: int = str](a, /, b: int = 1, *args: T, c, d=2, **kw) -> list[T]:
    """Doc."""
    global g
    x = y if cond else z
    w = {k: v for k, v in items if k} | {**other}
    s = f"{a!r:>{width}} {b=}" "tail"
    async with ctx() as (p, q), other:
        async for i in aiter():
            await thing[1:2:3, ..., ::-1]
    match command:
        case Point(x=0, y=yy) | [1, *rest] if rest:
            pass
        case {"k": v, **others}:
            pass
        case _ as anything:
            pass
    try:
        raise ValueError("x") from None
    except* (TypeError, KeyError) as err:
        del err
    else:
        assert x, "msg"
    finally:
        yield (n := 3)
    lam = lambda q, *, r=1: (q, r)
    return [a for a in b if a for c in a] + list((-v for v in ())) + [*s]

class C(Base, metaclass=Meta):
    attr: int = 0
    type Alias[K] = dict[K, int]
    def m(self) -> None: self.x += 1; del self.x

while True:
    break
else:
    pass
for i, (j, k) in enumerate(pairs): continue
with open(p) as fh: print(fh.read(), file=sys.stderr, end="")
'''


def _sources() -> list[tuple[str, str]]:
    folders = ("memlint", "tests/memlint", "examples")
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    named = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files]
    return [("unusual", UNUSUAL), *named]


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.order: list[cst.CSTNode] = []
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) in LAYOUT_LEAVES:  # the index leaves these out on purpose
            return False
        if self.stack:
            self.parents[node] = self.stack[-1]
        self.order.append(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if type(original_node) not in LAYOUT_LEAVES:
            self.stack.pop()


def _node_types() -> list[str]:
    """Node types with rule callbacks; layout leaves have their own test."""
    return sorted(
        name for name in dir(cst)
        if isinstance(getattr(cst, name), type) and issubclass(getattr(cst, name), cst.CSTNode)
        and getattr(cst, name) not in LAYOUT_LEAVES
    )


def _event_log_visitor(
    log: list[tuple[str, int]], node_types: list[str]
) -> cst.BatchableCSTVisitor:
    """A batchable visitor with a visit_ and leave_ method for every node type, logging calls."""

    def make(event: str) -> object:
        def method(self: cst.BatchableCSTVisitor, node: cst.CSTNode) -> None:
            log.append((event, id(node)))

        method.__name__ = event
        return method

    namespace: dict[str, object] = {}
    for name in node_types:
        namespace[f"visit_{name}"] = make(f"visit_{name}")
        namespace[f"leave_{name}"] = make(f"leave_{name}")
    cls = type("EventLog", (cst.BatchableCSTVisitor,), namespace)
    visitor: cst.BatchableCSTVisitor = cls()
    return visitor


def _field_walk(root: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node below ``root`` in libcst's order, not entering nested scopes: the walk
    ``TreeIndex.walk`` answers from its preorder slice."""
    out: list[cst.CSTNode] = []
    for child in child_nodes(root):
        out.append(child)
        if type(child) not in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            out.extend(_field_walk(child))
    return out


def test_walk_of_a_node_from_outside_the_index() -> None:
    index = TreeIndex(cst.parse_module("x = f(a)\n"))
    built = cst.parse_expression("g(b, lambda: c)")
    assert [id(n) for n in index.walk(built)] == [id(n) for n in _field_walk(built)]


def _check(source: str) -> None:
    module = cst.parse_module(source)
    recorder = _Recorder()
    module.visit(recorder)
    index = TreeIndex(module)
    assert [id(n) for n in index.preorder] == [id(n) for n in recorder.order]
    assert {k: id(v) for k, v in index.parents.items()} == {
        id(k): id(v) for k, v in recorder.parents.items()
    }
    for position, node in enumerate(index.preorder):
        children = node.children
        assert [id(c) for c in child_nodes(node)] == [
            id(c) for c in children if type(c) not in LAYOUT_LEAVES]
        assert last_child(node) is (children[-1] if children else None)
        end = index.subtree_end[position]
        below = {id(n) for n in index.preorder[position + 1 : end]}
        assert all(index.is_inside(index.preorder[i], node) for i in range(position, end))
        assert end == len(index.preorder) or id(index.preorder[end]) not in below

    for node in index.preorder:  # the sliced walk is the field-by-field one
        assert [id(n) for n in index.walk(node)] == [id(n) for n in _field_walk(node)]

    # The answers read from preorder slices are the parent-walking ones, false ones included.
    sample = index.preorder[:: max(1, len(index.preorder) // 30)]
    for container in sample:
        for node in sample:
            assert index.is_inside(node, container) is _walks_up_to(index, node, container)
        for name, calls in index.calls_by_name.items():
            assert [id(c) for c in index.calls_within(container, name)] == [
                id(c) for c in calls if _walks_up_to(index, c, container)]

    types = _node_types()
    expected: list[tuple[str, int]] = []
    cst.visit_batched(module, [_event_log_visitor(expected, types)])
    actual: list[tuple[str, int]] = []
    visit_batched(index, [_event_log_visitor(actual, types)])
    assert actual == expected


def _walks_up_to(index: TreeIndex, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return node is container or any(a is container for a in index.ancestors(node))


@pytest.mark.parametrize("name,source", _sources(), ids=[n for n, _ in _sources()])
def test_fast_walk_matches_libcst(name: str, source: str) -> None:
    _check(source)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node())
def test_fast_walk_matches_libcst_on_generated_code(source: str) -> None:
    # hypothesmith writes what CPython compiles; libcst rejects a few of those (no space
    # around `is` before a number, `'' is.0`), and memlint never walks what it cannot parse
    try:
        cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        assume(False)
    _check(source)


@pytest.mark.parametrize(
    "first", ['f"{a}"\n', 'f"{a:>{w}}"\n', 'from m import *\n', 'from m import (a)\n']
)
def test_field_order_does_not_depend_on_the_first_instance_seen(first: str) -> None:
    """Field orders are learned from the first node of each type; optional fields vary."""
    saved = dict(_CHILD_FIELDS)
    _CHILD_FIELDS.clear()
    try:
        TreeIndex(cst.parse_module(first))
        _check(UNUSUAL + 'f"{a} {b:{c}} {d!s:>10}"\nfrom m import *\n')
    finally:
        _CHILD_FIELDS.clear()
        _CHILD_FIELDS.update(saved)


def test_attribute_visitors_fall_back_to_libcst() -> None:
    seen: list[str] = []

    class FuncOnly(cst.BatchableCSTVisitor):
        def visit_Call_func(self, node: cst.Call) -> None:
            seen.append("func")

        def visit_Name(self, node: cst.Name) -> None:
            seen.append(node.value)

    module = cst.parse_module("f(a)\n")
    visit_batched(TreeIndex(module), [FuncOnly()])
    assert seen == ["func", "f", "a"]


def test_visitors_of_layout_leaves_fall_back_to_libcst() -> None:
    """The index leaves whitespace leaves out; a rule that asks for them still gets them."""
    seen: list[str] = []

    class Spaces(cst.BatchableCSTVisitor):
        def visit_SimpleWhitespace(self, node: cst.SimpleWhitespace) -> None:
            seen.append(node.value)

    module = cst.parse_module("f(a,  b)\n")
    index = TreeIndex(module)
    assert not any(isinstance(n, cst.SimpleWhitespace) for n in index.preorder)
    visit_batched(index, [Spaces()])
    assert "  " in seen


def test_an_index_without_layout_leaves_tokens_out() -> None:
    """In a tree built without layout (memlint.fastcst) commas and operators hold nothing,
    and its index leaves them out; a rule that visits them still gets every one, from
    libcst's walk. libcst's own tree keeps them: the space after a comma may hold comments."""
    seen: list[str] = []

    class Punctuation(cst.BatchableCSTVisitor):
        def visit_Comma(self, node: cst.Comma) -> None:
            seen.append(",")

        def visit_Add(self, node: cst.Add) -> None:
            seen.append("+")

    module = cst.parse_module("f(a, b + c, # note\n  d)\n")
    bare, full = TreeIndex(module, layout=False), TreeIndex(module)
    assert not any(type(n) in LEFT_OUT for n in bare.preorder)
    outside_tokens = [n for n in full.preorder if not any(
        type(a) in LEFT_OUT for a in [n, *full.ancestors(n)])]
    assert [id(n) for n in outside_tokens] == [id(n) for n in bare.preorder]
    assert any(isinstance(n, cst.Comment) for n in full.preorder)
    assert all(bare.parent(n) is full.parent(n) for n in bare.preorder)
    visit_batched(bare, [Punctuation()])
    assert sorted(seen) == ["+", ",", ","]

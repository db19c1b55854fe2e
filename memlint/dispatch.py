"""Batched rule dispatch over the shared TreeIndex, with libcst's batched-visitor semantics.

``libcst.visit_batched`` walks the tree through ``CSTNode.visit``, which rebuilds every node
it passes. The TreeIndex already holds the nodes in the same visiting order, so dispatching
from it calls the same ``visit_<Node>``/``leave_<Node>`` methods in the same order without
a second walk. Rules with attribute visitors (``visit_Call_func``) go through libcst itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import libcst as cst

from memlint.analysis.tree import LAYOUT_LEAVES, LEFT_OUT, TreeIndex

Method = Callable[[cst.CSTNode], object]


@cache
def _visitor_names(cls: type[cst.BatchableCSTVisitor]) -> tuple[str, ...]:
    """The ``visit_*``/``leave_*`` methods ``cls`` really defines (libcst's no-op stubs excluded).

    ``BatchableCSTVisitor.get_visitors`` finds the same set with ``inspect.getmembers`` on
    every instance, which costs more than linting a small file.
    """
    names = []
    for name in dir(cls):
        if not name.startswith(("visit_", "leave_")):
            continue
        value = getattr(cls, name)
        if callable(value) and not getattr(value, "_is_no_op", False):
            names.append(name)
    return tuple(names)


_LAYOUT_NAMES = frozenset(t.__name__ for t in LAYOUT_LEAVES)
_LEFT_OUT_NAMES = frozenset(t.__name__ for t in LEFT_OUT)


def _needs_libcst(name: str, layout: bool) -> bool:
    """Callbacks the index cannot serve: on one field of a node (``visit_Call_func``), or on
    the node types it leaves out (see :class:`TreeIndex`)."""
    return _is_attribute_visitor(name) or name.split("_", 1)[1] in (
        _LAYOUT_NAMES if layout else _LEFT_OUT_NAMES)


def _is_attribute_visitor(name: str) -> bool:
    """``visit_Call_func`` (runs around one field of a node) as opposed to ``visit_Call``."""
    parts = name.split("_")
    return len(parts) > 2 and isinstance(getattr(cst, parts[1], None), type)


def visit_batched(index: TreeIndex, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """Run ``visitors`` over the indexed module as ``libcst.visit_batched`` would."""
    methods: dict[str, list[Method]] = {}
    for visitor in visitors:
        for name in _visitor_names(type(visitor)):
            methods.setdefault(name, []).append(getattr(visitor, name))
    if not methods:
        return
    if any(_needs_libcst(name, index.layout) for name in methods):
        cst.visit_batched(index.module, visitors)
        return

    # Per node type: the visit methods and the leave methods to call (None when neither).
    table: dict[type[cst.CSTNode], tuple[list[Method], list[Method]] | None] = {}
    empty: list[Method] = []
    # Nodes whose leave methods are still owed: (end of subtree, methods, node).
    open_nodes: list[tuple[int, list[Method], cst.CSTNode]] = []
    ends = index.subtree_end
    for position, node in enumerate(index.preorder):
        while open_nodes and open_nodes[-1][0] <= position:
            _, leaves, done = open_nodes.pop()
            for leave in leaves:
                leave(done)
        kind = type(node)
        if kind in table:
            entry = table[kind]
        else:
            visits = methods.get(f"visit_{kind.__name__}", empty)
            leaves = methods.get(f"leave_{kind.__name__}", empty)
            entry = table[kind] = (visits, leaves) if visits or leaves else None
        if entry is None:
            continue
        for visit in entry[0]:
            visit(node)
        if entry[1]:
            open_nodes.append((ends[position], entry[1], node))
    while open_nodes:
        _, leaves, done = open_nodes.pop()
        for leave in leaves:
            leave(done)

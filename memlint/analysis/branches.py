"""Which code runs instead of a node, and under which tests: branches and guards.

Rules that accept a version fallback (MEM011's ``use_reentrant``, MEM014's device branches)
ask the same questions: what are the other branches of the ``if``/``try``/conditional
expression around this call, and which tests guard it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from memlint.analysis.tree import TreeIndex


def _exits(block: cst.BaseSuite) -> bool:
    """The block ends in `return`, `raise`, `continue` or `break`: what follows is its else."""
    last: cst.CSTNode | None = None
    if isinstance(block, cst.IndentedBlock) and block.body:
        last = block.body[-1]
        if isinstance(last, cst.SimpleStatementLine):
            last = last.body[-1]
    elif isinstance(block, cst.SimpleStatementSuite) and block.body:
        last = block.body[-1]
    return isinstance(last, cst.Return | cst.Raise | cst.Continue | cst.Break)


def alternatives(
    tree: TreeIndex, node: cst.CSTNode, *, handlers: bool = True
) -> Iterator[cst.CSTNode]:
    """Code that runs *instead of* ``node``.

    The other branches of each `if`/`elif`/`else` and conditional expression around it, the
    `try` body for code in an `except` handler (and the handlers for code in the body), the
    statements after an `if` whose branch holding ``node`` ends in `return` (and the branch of
    an earlier such `if`, for code after it). Enclosing functions are crossed: a function
    defined in one branch is the alternative of one defined in the other. ``handlers=False``
    leaves `try`/`except` out.
    """
    child = node
    for anc in tree.ancestors(node):
        if isinstance(anc, cst.If | cst.IfExp) and child is not anc.test:
            other = anc.orelse if child is anc.body else anc.body
            if other is not None:
                yield other
            if isinstance(anc, cst.If) and child is anc.body and _exits(anc.body):
                yield from _siblings(tree, anc, after=True)
        elif handlers and isinstance(anc, cst.Try | cst.TryStar):
            if child is anc.body:
                yield from anc.handlers
            elif child in anc.handlers:
                yield anc.body
        elif isinstance(anc, cst.IndentedBlock | cst.Module):
            for stmt in _siblings(tree, child, after=False):
                if isinstance(stmt, cst.If) and _exits(stmt.body):
                    yield stmt.body
        child = anc


def _siblings(tree: TreeIndex, stmt: cst.CSTNode, *, after: bool) -> list[cst.CSTNode]:
    """The statements after (or before) ``stmt`` in its block."""
    block = tree.parent(stmt)
    if not isinstance(block, cst.IndentedBlock | cst.Module):
        return []
    body: list[cst.CSTNode] = list(block.body)
    index = next((i for i, s in enumerate(body) if s is stmt), None)
    if index is None:
        return []
    return body[index + 1 :] if after else body[:index]


def guarding_tests(tree: TreeIndex, node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The tests of the `if`s, conditional expressions and `while`s ``node`` runs under,
    including those around the functions it is defined in."""
    child = node
    for anc in tree.ancestors(node):
        if isinstance(anc, cst.If | cst.IfExp | cst.While) and child is not anc.test:
            yield anc.test
        child = anc


def mentions(tree: TreeIndex, expr: cst.BaseExpression, pattern: re.Pattern[str]) -> bool:
    """A name, attribute or string literal in ``expr`` matches ``pattern``."""
    for n in [expr, *tree.walk(expr)]:
        if isinstance(n, cst.Name) and pattern.search(n.value):
            return True
        if isinstance(n, cst.Attribute) and pattern.search(n.attr.value):
            return True
        if isinstance(n, cst.SimpleString) and pattern.search(n.value):
            return True
    return False

"""The second prefilter: rules dropped for a file whose code cannot hold their finding.

The byte prefilter (:mod:`memlint.prefilter`) also matches words in docstrings and comments:
a library's docstrings show ``loss.backward()`` and ``model.eval()`` in their examples. Once
the scan pass has the file's stdlib ``ast`` (the module summary needs it anyway), a rule's
``code_gate`` is checked against what the code itself does, before libcst parses the file.

A gate states a necessary condition of the rule's findings, in two kinds of token:
``call:NAME`` (a call whose callee's last name is NAME: ``x.NAME(...)`` or ``NAME(...)``, as
the libcst analyses index calls) and ``node:TYPE`` (a stdlib ``ast`` node type, ``node:Try``).
The rule stays when the code holds any one of its tokens; a gate that is too narrow loses
findings, so ``tests/memlint/test_gates.py`` checks every gate against the rule's own
examples and the labelled corpus.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Protocol, TypeVar

from memlint.astwalk import walk


class Gated(Protocol):
    @property
    def code_gate(self) -> tuple[str, ...]: ...


G = TypeVar("G", bound=Gated)


def code_facts(tree: ast.AST) -> frozenset[str]:
    """The gate tokens a parsed file holds: every callee's last name and every node type."""
    called: set[str] = set()
    kinds: set[type[ast.AST]] = set()
    call_t, attribute_t, name_t = ast.Call, ast.Attribute, ast.Name
    for node in walk(tree):
        kind = type(node)
        kinds.add(kind)
        if kind is call_t:
            func = node.func  # type: ignore[attr-defined]  # an ast.Call: checked above
            if type(func) is attribute_t:
                called.add(func.attr)
            elif type(func) is name_t:
                called.add(func.id)
    return frozenset([*(f"call:{name}" for name in called),
                      *(f"node:{kind.__name__}" for kind in kinds)])


def gated(rules: Iterable[G], facts: frozenset[str]) -> list[G]:
    """The rules whose gate the code passes (a rule without a gate always does)."""
    return [r for r in rules if not r.code_gate or any(t in facts for t in r.code_gate)]

"""Fast walks of stdlib ``ast`` trees, for the scan pass (module summaries, rule gates).

``ast.walk`` and ``ast.iter_child_nodes`` look every field up by name and test every value,
and they also yield the ``Load``/``Store`` context objects hanging off every name: about
half of a module summary's time went there. Here each node type's child fields are found
once, contexts are left out, and the walk is one loop over a stack.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

# Fields that never hold child nodes (names, flags, constants, the expression context).
_SCALAR_FIELDS = frozenset({
    "ctx", "id", "attr", "arg", "name", "asname", "module", "level", "kind", "is_async",
    "conversion", "type_comment", "tag", "rest", "names", "n", "s",
})

_child_fields: dict[type[ast.AST], tuple[str, ...]] = {}


def fields_of(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a node type that hold child nodes, in declaration order."""
    known = _child_fields.get(kind)
    return known if known is not None else _fields_of(kind)


def _fields_of(kind: type[ast.AST]) -> tuple[str, ...]:
    fields = tuple(f for f in kind._fields if f not in _SCALAR_FIELDS)
    if kind is ast.Constant:
        fields = ()
    elif kind in (ast.Import, ast.ImportFrom):
        fields = ("names",)  # the alias nodes
    _child_fields[kind] = fields
    return fields


def walk(node: ast.AST, stop: frozenset[type[ast.AST]] = frozenset(),
         kinds: frozenset[type[ast.AST]] | None = None) -> Iterator[ast.AST]:
    """``node`` and its descendants (order unspecified, as ``ast.walk``), contexts left out;
    a descendant whose type is in ``stop`` is yielded but not entered (nested scopes).
    ``kinds``: only nodes of these types are yielded (a caller that reads the calls of every
    expression pays for no others), in the same order."""
    stack = [node]
    pop, push, extend = stack.pop, stack.append, stack.extend
    known = _child_fields
    ast_type = ast.AST
    while stack:
        current = pop()
        kind = type(current)
        if kinds is None or kind in kinds:
            yield current
        if kind in stop and current is not node:
            continue
        fields = known.get(kind)
        if fields is None:
            fields = _fields_of(kind)
        for name in fields:
            value = getattr(current, name)
            if type(value) is list:
                extend([v for v in value if isinstance(v, ast_type)])
            elif isinstance(value, ast_type):
                push(value)


def statement_lines(body: list[ast.stmt]) -> tuple[tuple[int, int], ...]:
    """Per statement: the first line of its own text (its first decorator, for a definition)
    and its last line. The lint pass places findings with these (:mod:`memlint.positions`)
    instead of parsing the file with the stdlib a second time."""
    spans = []
    for statement in body:
        first = statement.lineno
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([first, *(d.lineno for d in statement.decorator_list)])
        spans.append((first, statement.end_lineno or statement.lineno))
    return tuple(spans)


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a name or a chain of attributes on one; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))

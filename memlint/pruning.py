"""Function bodies a lint can leave out of its libcst parse.

libcst's parse is most of what a lint costs. A *function-local* rule
(``Rule.function_local``) reads only the function it reports in, the module's top-level
code and imports, and the file's bindings of the names its moves send tensors to. When every
rule a file is linted for is one, a function whose text no such rule's prefilter admits
can neither hold a finding nor change one, unless it imports a name or binds a name that the
code kept moves to (``device = "cpu"`` decides whether ``.to(device)`` is a copy at all).
The bodies of the other functions are blanked before the parse: their first line becomes
``...`` at the body's indentation and the rest empty lines, so every line and column of the
code that is parsed stays where it was, and so does every finding's position.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from memlint.astwalk import dotted, fields_of
from memlint.prefilter import Triggered, applicable_rules

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MOVES = frozenset({"to", "cuda", "type_as"})

Blank = tuple[tuple[int, int], ...]  # (first, last) line of each blanked body, 1-based


def blank_ranges(tree: ast.Module, source: bytes, rules: Sequence[Triggered]) -> Blank:
    """The bodies (line ranges) the lint may blank for these function-local rules."""
    lines = source.splitlines(keepends=True)
    units = [u for u in _units(tree.body) if _blankable(u, lines)]
    if not units:
        return ()
    facts = [_Facts(u) for u in units]
    kept = [f.imports or bool(applicable_rules(b"".join(lines[_first(u) - 1:_last(u)]), rules))
            for u, f in zip(units, facts, strict=True)]
    targets = _Facts(tree, skip={id(u) for u in units}).moves
    moves = [f.moves for f in facts]
    bound = [f.bound for f in facts]
    while True:
        for keep, moved in zip(kept, moves, strict=True):
            if keep:
                targets |= moved
        more = [not keep and bool(names & targets)
                for keep, names in zip(kept, bound, strict=True)]
        if not any(more):
            break
        kept = [a or b for a, b in zip(kept, more, strict=True)]
    return tuple((_first(u.body[0]), _last(u))
                 for u, keep in zip(units, kept, strict=True) if not keep)


def blanked(source: bytes, ranges: Blank) -> bytes:
    """``source`` with these bodies blanked, every other line as it was."""
    if not ranges:
        return source
    lines = source.splitlines(keepends=True)
    for first, last in ranges:
        line = lines[first - 1]
        indent = line[:len(line) - len(line.lstrip(b" \t"))]
        lines[first - 1] = indent + b"..." + _ending(line)
        for number in range(first, last):
            lines[number] = _ending(lines[number])
    return b"".join(lines)


def _units(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's functions and its classes' methods (nested classes' too)."""
    for node in body:
        if isinstance(node, _FUNCTIONS):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _units(node.body)


def _blankable(unit: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[bytes]) -> bool:
    """A body that starts a line of its own (not ``def f(): return x``) and spans more than
    that line; its end is known."""
    first = unit.body[0]
    start = _first(first)
    if unit.end_lineno is None or start >= unit.end_lineno:
        return False
    line = lines[start - 1]
    return not line[:first.col_offset].strip()


def _first(node: ast.stmt) -> int:
    """The first line of a statement's own text: its first decorator's, for a definition."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _last(unit: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return unit.end_lineno or unit.lineno


def _ending(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return line[-1:] if line[-1:] in (b"\n", b"\r") else b""


class _Facts:
    """What one walk of a function (or of the module around the functions in ``skip``)
    shows: whether it imports, the dotted names its moves are given, the names it binds."""

    def __init__(self, node: ast.AST, skip: frozenset[int] | set[int] = frozenset()) -> None:
        self.imports = False
        self.moves: set[str] = set()
        targets: list[ast.AST] = []
        stack = [node]
        while stack:
            current = stack.pop()
            kind = type(current)
            if kind is ast.Call:
                call: ast.Call = current  # type: ignore[assignment]  # by the type test
                func = call.func
                if type(func) is ast.Attribute and func.attr in _MOVES:
                    for value in [*call.args, *(k.value for k in call.keywords)]:
                        name = dotted(value.value if isinstance(value, ast.Starred) else value)
                        if name is not None:
                            self.moves.add(name)
            elif kind is ast.Assign:
                targets.extend(current.targets)  # type: ignore[attr-defined]  # an Assign
            elif kind in _ONE_TARGET:
                targets.append(current.target)  # type: ignore[attr-defined]  # by the type
            elif kind is ast.withitem and current.optional_vars is not None:  # type: ignore[attr-defined]
                targets.append(current.optional_vars)  # type: ignore[attr-defined]
            elif kind is ast.Import or kind is ast.ImportFrom:
                self.imports = True
            for field in fields_of(kind):
                value = getattr(current, field)
                if type(value) is list:
                    stack.extend(v for v in value
                                 if isinstance(v, ast.AST) and id(v) not in skip)
                elif isinstance(value, ast.AST) and id(value) not in skip:
                    stack.append(value)
        self.bound = _names(targets)


_ONE_TARGET = (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr,
               ast.comprehension)


def _names(targets: list[ast.AST]) -> set[str]:
    """The dotted names assignment targets bind (``a, (b, self.c)``)."""
    found: set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        else:
            name = dotted(target)
            if name is not None:
                found.add(name)
    return found

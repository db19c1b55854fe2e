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
from collections.abc import Iterable, Iterator, Sequence

from memlint.astwalk import walk
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
    kept = [bool(applicable_rules(b"".join(lines[_first(u) - 1:_last(u)]), rules))
            or any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in walk(u))
            for u in units]
    inside = {id(n) for u in units for n in walk(u)}
    targets = _move_targets(n for n in walk(tree) if id(n) not in inside)
    moves = [_move_targets(walk(u)) for u in units]
    bound = [_bound(u) for u in units]
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


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _move_targets(nodes: Iterable[ast.AST]) -> set[str]:
    """The dotted names given to ``.to()``/``.cuda()``/``.type_as()`` calls."""
    found: set[str] = set()
    for node in nodes:
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MOVES):
            for value in [*node.args, *(k.value for k in node.keywords)]:
                name = _dotted(value.value if isinstance(value, ast.Starred) else value)
                if name is not None:
                    found.add(name)
    return found


def _bound(unit: ast.AST) -> set[str]:
    """The dotted names a function binds: assignment, loop, ``with`` and walrus targets."""
    targets: list[ast.AST] = []
    for node in walk(unit):
        if isinstance(node, ast.Assign):
            targets.extend(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor,
                               ast.NamedExpr, ast.comprehension)):
            targets.append(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets.append(node.optional_vars)
    found: set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        else:
            name = _dotted(target)
            if name is not None:
                found.add(name)
    return found

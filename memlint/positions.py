"""Line and column of the nodes a file's findings name, rendering only the statements they are in.

libcst computes positions by regenerating the code of the whole module, and
``MetadataWrapper.resolve`` then walks the whole tree once more for batchable providers, even
when there are none. A finding sits in one top-level statement, so only those statements are
regenerated here, each starting at the line the stdlib parser gives it. Every statement
rendered is checked to end where the next one starts; when anything does not line up (a
file the stdlib cannot parse) the module is rendered from its top down to the last statement
with a finding, and a node outside the statements (a header comment) renders the whole
module, so the answer is always libcst's own.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodeRange
from libcst.metadata import PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from memlint.analysis.tree import TreeIndex
from memlint.astwalk import statement_lines

_LINE_BREAK = re.compile(r"\r\n?|\n")


def _state(module: cst.Module, provider: PositionProvider,
           line: int = 1) -> PositionProvidingCodegenState:
    return PositionProvidingCodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline,
        provider=provider, line=line)


def module_positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range, as ``MetadataWrapper(module).resolve(PositionProvider)`` gives."""
    provider = PositionProvider()
    module._codegen(_state(module, provider))
    return provider._computed  # type: ignore[return-value]  # ranges, computed eagerly


def _stdlib_body(source: str) -> list[ast.stmt] | None:
    try:
        return ast.parse(source.removeprefix("\ufeff")).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _width(statement: cst.CSTNode) -> int:
    """How many stdlib statements a libcst statement is: ``a = 1; b = 2`` is two."""
    return len(statement.body) if type(statement) is cst.SimpleStatementLine else 1


def _statement_starts(module: cst.Module, source: str,
                      spans: Sequence[tuple[int, int]] | None = None) -> list[int] | None:
    """Per statement of ``module.body``, the line its leading blank and comment lines start
    on, and one more entry: the line after the last statement. None when the stdlib's
    statements (``spans``, :func:`~memlint.astwalk.statement_lines`; parsed here when not
    given) do not match libcst's."""
    if spans is None:
        body = _stdlib_body(source)
        if body is None:
            return None
        spans = statement_lines(body)
    starts: list[int] = []
    i = 0
    for statement in module.body:
        if i >= len(spans):
            return None
        starts.append(spans[i][0] - len(statement.leading_lines))
        i += _width(statement)
    if i != len(spans):
        return None
    # libcst renders a newline after the last statement even when the file lacks one.
    ends_broken = source.endswith(("\n", "\r"))
    starts.append(len(_LINE_BREAK.findall(source)) + 1 - len(module.footer)
                  + (0 if ends_broken else 1))
    return starts


def _top_twins(module: cst.Module) -> list[int]:
    """Per statement of ``module.body``, the index of its first stdlib twin."""
    firsts: list[int] = []
    i = 0
    for statement in module.body:
        firsts.append(i)
        i += _width(statement)
    return firsts


def _clause_statements(owner: cst.CSTNode, clause: cst.CSTNode,
                       twin: ast.AST) -> list[ast.stmt] | None:
    """The statements of ``twin`` (the stdlib twin of the compound statement ``owner``) in
    the block libcst keeps under ``clause``: the owner's own body, its ``else``/``finally``,
    or one of its ``except``/``case`` clauses (libcst keeps those as nodes, the stdlib as
    lists on the statement)."""
    found: object = None
    kind = type(clause)
    if clause is getattr(owner, "body", None):
        found = getattr(twin, "body", None)
    elif kind is cst.Else:
        found = getattr(twin, "orelse", None)
    elif kind is cst.Finally:
        found = getattr(twin, "finalbody", None)
    elif kind in (cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase):
        field = "cases" if kind is cst.MatchCase else "handlers"
        mine = list(getattr(owner, field, ()))
        theirs = getattr(twin, field, None)
        k = next((i for i, c in enumerate(mine) if c is clause), None)
        if k is not None and type(theirs) is list and k < len(theirs):
            found = getattr(theirs[k], "body", None)
    return found if type(found) is list else None


def _inner_twin(chain: list[cst.CSTNode], top: ast.stmt) -> tuple[list[ast.stmt], int] | None:
    """Where the stdlib keeps ``chain[0]``, a simple statement line inside the top-level
    statement ``chain[-1]`` (whose twin is ``top``), ``chain`` being every node between:
    the stdlib statement list and the index of its first statement there. None where the
    two trees do not line up."""
    twin: ast.AST = top
    statements: list[ast.stmt] = []
    index = 0
    k = len(chain) - 1
    while k > 0:
        owner = chain[k]
        below = chain[k - 1]
        if type(owner) is cst.If and type(below) is cst.If and below is owner.orelse:
            # `elif`: libcst's orelse is the If itself, the stdlib's a list holding it.
            found = getattr(twin, "orelse", None)
            if type(found) is not list or not found:
                return None
            statements, index = found, 0
            k -= 1
        else:
            clause, step = below, 2
            if type(below) is not cst.IndentedBlock:  # else/except/finally/case
                step = 3
                if k < 3:
                    return None
                below = chain[k - 2]
            if k < step or type(below) is not cst.IndentedBlock:
                return None
            found_list = _clause_statements(owner, clause, twin)
            target = chain[k - step]
            listed = below.body
            position = next((i for i, s in enumerate(listed) if s is target), None)
            if found_list is None or position is None:
                return None
            statements = found_list
            index = sum(_width(s) for s in listed[:position])
            k -= step
        if index >= len(statements):
            return None
        twin = statements[index]
    return statements, index


_INDENTING = frozenset({cst.IndentedBlock, cst.Match})


def _render_line(module: cst.Module, provider: PositionProvider,
                 chain: list[cst.CSTNode], top: ast.stmt) -> bool:
    """Render the simple statement line ``chain[0]`` on its own, from the line the stdlib
    gives it and with the indentation of the blocks around it. False where what it renders
    does not start and end where the stdlib says (nothing it rendered is then trusted)."""
    line = chain[0]
    assert isinstance(line, cst.SimpleStatementLine)
    found = _inner_twin(chain, top)
    if found is None:
        return False
    statements, index = found
    last = index + len(line.body) - 1
    if last >= len(statements):
        return False
    first = statements[index]
    state = _state(module, provider, first.lineno - len(line.leading_lines))
    # The indentation libcst's renderer would hold here: each indented block's and each
    # ``match`` statement's (its cases are indented by the statement itself).
    state.indent_tokens = [
        module.default_indent if node.indent is None else node.indent  # type: ignore[attr-defined]
        for node in reversed(chain) if type(node) in _INDENTING]
    line._codegen(state)
    placed = provider._computed.get(line)
    return (isinstance(placed, CodeRange) and placed.start.line == first.lineno
            and placed.start.column == first.col_offset
            and state.line == (statements[last].end_lineno or 0) + 1)


class _Twins:
    """The stdlib twins of top-level statements, parsed from the whole file, or (given the
    statements' lines from the scan pass) each from its own lines, only where one is asked
    for: a file with a finding in one function parses that function, not the file."""

    def __init__(self, source: str, spans: Sequence[tuple[int, int]] | None) -> None:
        self.source = source
        self.spans = spans
        self.body: list[ast.stmt] | None = None
        self._line_starts: list[int] | None = None
        self._parsed: dict[int, ast.stmt | None] = {}
        if spans is None:
            self.body = _stdlib_body(source)
            if self.body is not None:
                self.spans = statement_lines(self.body)

    def twin(self, index: int) -> ast.stmt | None:
        """The stdlib statement ``index`` of the module's body; None where its lines do not
        parse on their own."""
        if self.body is not None:
            return self.body[index]
        if index not in self._parsed:
            self._parsed[index] = self._parse(index)
        return self._parsed[index]

    def _parse(self, index: int) -> ast.stmt | None:
        assert self.spans is not None
        first, last = self.spans[index]
        if self._line_starts is None:
            self._line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(self.source))]
        starts = self._line_starts
        if last > len(starts):
            return None
        end = starts[last] if last < len(starts) else len(self.source)
        text = self.source[starts[first - 1]:end]
        try:
            parsed = ast.parse(text.removeprefix("\ufeff") if first == 1 else text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if not parsed.body:
            return None
        ast.increment_lineno(parsed, first - 1)
        return parsed.body[0]


def finding_positions(module: cst.Module, source: str, tree: TreeIndex,
                      nodes: Iterable[cst.CSTNode],
                      spans: Sequence[tuple[int, int]] | None = None,
                      ) -> Mapping[cst.CSTNode, CodeRange]:
    """Ranges for (at least) ``nodes`` and the statements that hold them; ``source`` is the
    module's text; ``spans``: its top-level statements' lines as the scan pass found them
    (:func:`~memlint.astwalk.statement_lines`), or None to parse the file here.

    A node inside a simple statement line (most findings: a call in a loop body) costs only
    that line's rendering; any other node costs its top-level statement's."""
    index = {id(statement): k for k, statement in enumerate(module.body)}
    tops: set[int] = set()
    lines: dict[int, list[cst.CSTNode]] = {}  # the chain of each line to render
    for node in nodes:
        chain: list[cst.CSTNode] = []
        current: cst.CSTNode | None = node
        while current is not None and id(current) not in index:
            if chain or type(current) is cst.SimpleStatementLine:
                chain.append(current)
            current = tree.parent(current)
        if current is None:
            return module_positions(module)
        if chain:
            chain.append(current)
            lines[id(chain[0])] = chain
        else:
            tops.add(index[id(current)])
    twins = _Twins(source, spans)
    starts = None if twins.spans is None else _statement_starts(module, source, twins.spans)
    if starts is None:
        wanted = tops | {index[id(c[-1])] for c in lines.values()}
        return _leading_positions(module, max(wanted))
    provider = PositionProvider()
    firsts = _top_twins(module)
    for chain in lines.values():
        k = index[id(chain[-1])]
        top = twins.twin(firsts[k])
        if top is None or not _render_line(module, provider, chain, top):
            tops.add(k)
    for k in sorted(tops):
        state = _state(module, provider, starts[k])
        module.body[k]._codegen(state)
        if state.line != starts[k + 1]:
            wanted = tops | {index[id(c[-1])] for c in lines.values()}
            return _leading_positions(module, max(wanted))
    return provider._computed  # type: ignore[return-value]


def render_top_down(module: cst.Module, state: CodegenState,
                    done: Callable[[cst.BaseStatement], bool]) -> None:
    """Render ``module`` into ``state`` as libcst does, from the header down, stopping after
    the first statement for which ``done`` holds (the footer only if it never does). What
    follows cannot move what comes before, and a deeply nested statement further down (past
    Python 3.12's C recursion limit for libcst's renderer) is never rendered at all."""
    for line in module.header:
        line._codegen(state)
    for statement in module.body:
        statement._codegen(state)
        if done(statement):
            return
    for line in module.footer:
        line._codegen(state)


def _leading_positions(module: cst.Module, last: int) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions from rendering the module only down to statement ``last``."""
    provider = PositionProvider()
    stop = module.body[last]
    render_top_down(module, _state(module, provider), lambda statement: statement is stop)
    return provider._computed  # type: ignore[return-value]

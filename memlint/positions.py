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
from collections.abc import Callable, Iterable, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodeRange
from libcst.metadata import PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from memlint.analysis.tree import TreeIndex

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


def _own_first_line(statement: ast.stmt) -> int:
    """The first line of the statement's own text: its first decorator for a definition."""
    lines = [statement.lineno]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        lines.extend(d.lineno for d in statement.decorator_list)
    return min(lines)


def _statement_starts(module: cst.Module, source: str) -> list[int] | None:
    """Per statement of ``module.body``, the line its leading blank and comment lines start
    on, and one more entry: the line after the last statement. None when the stdlib parse
    does not match libcst's statements."""
    try:
        body = ast.parse(source.removeprefix("\ufeff")).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts: list[int] = []
    i = 0
    for statement in module.body:
        if i >= len(body):
            return None
        first = _own_first_line(body[i])
        starts.append(first - len(statement.leading_lines))
        i += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    if i != len(body):
        return None
    # libcst renders a newline after the last statement even when the file lacks one.
    ends_broken = source.endswith(("\n", "\r"))
    starts.append(len(_LINE_BREAK.findall(source)) + 1 - len(module.footer)
                  + (0 if ends_broken else 1))
    return starts


def finding_positions(module: cst.Module, source: str, tree: TreeIndex,
                      nodes: Iterable[cst.CSTNode]) -> Mapping[cst.CSTNode, CodeRange]:
    """Ranges for (at least) ``nodes`` and every node of the top-level statements that hold
    them; ``source`` is the module's text."""
    index = {id(statement): k for k, statement in enumerate(module.body)}
    wanted: set[int] = set()
    for node in nodes:
        top: cst.CSTNode | None = node
        while top is not None and id(top) not in index:
            top = tree.parents.get(top)
        if top is None:
            return module_positions(module)
        wanted.add(index[id(top)])
    starts = _statement_starts(module, source)
    if starts is None:
        return _leading_positions(module, max(wanted))
    provider = PositionProvider()
    for k in sorted(wanted):
        state = _state(module, provider, starts[k])
        module.body[k]._codegen(state)
        if state.line != starts[k + 1]:
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

"""``--fix`` and ``--diff`` on a notebook: fix the program of its code cells, then write the
changed cell sources back into the file and touch nothing else.

The fixer works on the joined program (:mod:`memlint.notebook`), so a fix sees the same
cross-cell facts as the lint. The fixed program is split back into cells; a cell whose text
changed gets its ``source`` value rewritten in place, in the style it had, and every other
byte of the notebook stays identical. The result is read back as a notebook before anything
is written, and the diff shows the changed cells, not the JSON.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from memlint.fixer import FindingFilter, FixResult, fix_source, standing_findings
from memlint.notebook import NotebookError, read_notebook
from memlint.rules.base import Rule


def fix_notebook(path: str, data: bytes, rules: Sequence[type[Rule]], *, unsafe: bool = False,
                 keep: FindingFilter = standing_findings) -> FixResult:
    """Fix a notebook in memory; ``problem`` says why it was left as it was, if it was."""
    result = FixResult(path=path, original=data, fixed=data)
    try:
        notebook = read_notebook(data)
    except NotebookError as exc:
        result.problem = f"not fixed: {exc}"
        return result
    program = fix_source(path, notebook.program_bytes, rules, unsafe=unsafe, keep=keep)
    result.problem = program.problem
    if not program.changed:
        result.remaining = [notebook.to_cells(d) for d in program.remaining]
        result.failed = [notebook.to_cells(d) for d in program.failed]
        return result
    try:
        sources = notebook.split(program.fixed.decode("utf-8"))
        fixed = notebook.with_sources(sources).encode("utf-8")
        after = read_notebook(fixed)
    except (NotebookError, UnicodeDecodeError) as exc:
        result.problem = f"not fixed: {exc}"
        return result
    result.fixed = fixed
    result.applied = program.applied
    result.remaining = [after.to_cells(d) for d in program.remaining]
    result.failed = [after.to_cells(d) for d in program.failed]
    result.cells = [(cell.number, cell.source, sources[cell.number])
                    for cell in notebook.cells if sources[cell.number] != cell.source]
    return result


def cell_diff(path: str, cells: Sequence[tuple[int, str, str]]) -> str:
    """A unified diff per changed cell, each headed ``a/PATH:cell N``, as ruff shows it."""
    def lines(text: str) -> list[str]:
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += "\n\\ No newline at end of cell\n"
        return out

    return "".join(
        "".join(difflib.unified_diff(lines(old), lines(new), fromfile=f"a/{path}:cell {number}",
                                     tofile=f"b/{path}:cell {number}"))
        for number, old, new in cells)

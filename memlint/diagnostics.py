"""The records a lint run produces, shared by the engine, the cache and every output format."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memlint.measured import Measured

# Codes the engine and runner emit themselves. They are valid in `select`/`noqa` spellings,
# but a broken file is always reported: rule selection does not hide it.
ENGINE_CODES: dict[str, str] = {
    "MEM996": "io-error",
    "MEM997": "internal-error",
    "MEM999": "parse-error",
}

T = TypeVar("T")


class FixSafety(enum.Enum):
    """Ruff's model: safe fixes keep runtime behaviour, unsafe ones may change it."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Diagnostic:
    """One finding, with 1-based lines and columns as editors and ruff show them."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    fix: FixSafety | None = None
    # The line of the enclosing statement's start, so a noqa comment there also applies.
    statement_line: int | None = field(default=None, compare=False)
    # In a notebook: the 1-based number of the cell (among all its cells), and the lines
    # and columns above are within that cell. None for a plain Python file.
    cell: int | None = None
    # Memory a pytest-gpumem report measured behind this finding (--gpumem-report); never cached.
    measured: Measured | None = field(default=None, compare=False)
    # Set by --fix/--diff when the fix this diagnostic offers could not be made: why.
    fix_problem: str | None = field(default=None, compare=False)

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    @property
    def location(self) -> str:
        """``line:column``, after ``cell N:`` in a notebook, as ruff prints positions."""
        where = f"{self.line}:{self.column}"
        return where if self.cell is None else f"cell {self.cell}:{where}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fix": None if self.fix is None else {
                "applicability": self.fix.value,
                **({} if self.fix_problem is None
                   else {"applied": False, "problem": self.fix_problem}),
            },
        }
        if self.cell is not None:  # lines and columns are then within this cell
            data["cell"] = self.cell
        if self.measured is not None:
            data["measured"] = self.measured.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        """Rebuild a cached diagnostic; ValueError for anything of the wrong type, so that a
        damaged cache entry is dropped instead of breaking the run later."""
        fix = data.get("fix")
        statement_line = data.get("statement_line")
        cell = data.get("cell")
        return cls(
            path=_typed(data["path"], str),
            line=_typed(data["line"], int),
            column=_typed(data["column"], int),
            end_line=_typed(data["end_line"], int),
            end_column=_typed(data["end_column"], int),
            code=_typed(data["code"], str),
            name=_typed(data["name"], str),
            message=_typed(data["message"], str),
            fix=None if fix is None else FixSafety(fix["applicability"]),
            statement_line=None if statement_line is None else _typed(statement_line, int),
            cell=None if cell is None else _typed(cell, int),
        )


def _typed(value: Any, kind: type[T]) -> T:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value

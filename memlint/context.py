"""Per-file state handed to every rule: the source, its tree and lazily built shared analysis."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis import ModuleAnalysis

if TYPE_CHECKING:
    from memlint.project.view import ModuleView


@dataclass
class FileContext:
    path: str
    source: str
    module: cst.Module
    # Facts from the rest of the project (None: the file is judged on its own).
    project: ModuleView | None = None
    # The top-level statements' lines as the scan pass's stdlib parse found them (None:
    # not known, parsed again where findings are placed).
    statements: tuple[tuple[int, int], ...] | None = None

    @cached_property
    def analysis(self) -> ModuleAnalysis:
        return ModuleAnalysis(self.module, self.project)

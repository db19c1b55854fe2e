"""Per-file state handed to every rule: the source, its tree and lazily built shared analysis."""

from __future__ import annotations

from collections.abc import Callable
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
    # The source text of a node when the tree has no layout to render it from
    # (memlint.fastcst); None: the tree renders it.
    text_of: Callable[[cst.CSTNode], str] | None = None

    def code_for(self, node: cst.CSTNode) -> str:
        """The node's code as written, as ``Module.code_for_node`` renders it."""
        if self.text_of is not None:
            return self.text_of(node)
        return self.module.code_for_node(node)

    @cached_property
    def analysis(self) -> ModuleAnalysis:
        return ModuleAnalysis(self.module, self.project, layout=self.text_of is None)

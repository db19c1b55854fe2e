"""Per-file state handed to every rule: the source, its tree and lazily built shared analysis."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from memlint.analysis import ModuleAnalysis


@dataclass
class FileContext:
    path: str
    source: str
    module: cst.Module

    @cached_property
    def analysis(self) -> ModuleAnalysis:
        return ModuleAnalysis(self.module)

"""Shared analysis that rules reuse, built once per file on first use.

- ``calls``: what a call is (backward, optimizer step, zero_grad, loss, model forward).
- ``tree``: parents, enclosing function/loops/statements, call sites by name, imports.
- ``grad``: whether autograd is off at a point (context managers, decorators, same-file callers).
- ``graph``: whether an expression still carries an autograd graph.
- ``loops``: what a loop is (training, evaluation).
- ``dataflow``: DataLoader provenance of loop data, and where ``.to()`` sends a tensor.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.calls import CallClassifier
from memlint.analysis.dataflow import DataflowAnalysis
from memlint.analysis.grad import GradModeAnalysis
from memlint.analysis.graph import GraphAnalysis
from memlint.analysis.imports import ImportTable
from memlint.analysis.loops import LoopAnalysis
from memlint.analysis.tree import TreeIndex

if TYPE_CHECKING:
    from memlint.project.view import ModuleView


class ModuleAnalysis:
    """``project``: the project model's answers for this module (None: this file alone);
    ``layout``: the tree holds whitespace and comments (False: built by memlint.fastcst)."""

    def __init__(self, module: cst.Module, project: ModuleView | None = None,
                 layout: bool = True) -> None:
        self.module = module
        self.project = project
        self.layout = layout  # see TreeIndex

    @cached_property
    def tree(self) -> TreeIndex:
        tree = TreeIndex(self.module, self.layout)
        if self.project is not None and any(
                isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)
                for line in self.module.body if isinstance(line, cst.SimpleStatementLine)
                for small in line.body):
            # `from .dqn import *` where `dqn` did `import torch as t`: the star import binds
            # `t` too (the project model knows what it binds); only torch's names matter here.
            for local, absolute in self.project.imports.items():
                if (absolute == "torch" or absolute.startswith("torch.")) and (
                        local not in tree.imports.aliases):
                    tree.imports.aliases[local] = absolute
        return tree

    @property
    def imports(self) -> ImportTable:
        return self.tree.imports

    @cached_property
    def calls(self) -> CallClassifier:
        return CallClassifier(self.tree, self.project)

    @cached_property
    def grad(self) -> GradModeAnalysis:
        return GradModeAnalysis(self.tree, self.project)

    @cached_property
    def graph(self) -> GraphAnalysis:
        return GraphAnalysis(self.tree, self.grad, self.calls, self.project)

    @cached_property
    def loops(self) -> LoopAnalysis:
        return LoopAnalysis(self.tree)

    @cached_property
    def dataflow(self) -> DataflowAnalysis:
        return DataflowAnalysis(self.tree, self.project, self.loops)

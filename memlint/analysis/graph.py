"""Graph-carrying value inference: does this expression still hold an autograd graph?

Contract (owned by the core-rules work; keep the public methods stable):
- ``carries_graph(expr) -> bool``: True for values bound from a loss/criterion call,
  ``outputs.loss`` / ``out["loss"]``, a model forward, arithmetic on such values, or the
  receiver of ``.backward()``; False after ``.item()``, ``.detach()``, ``float()``,
  ``.tolist()``, ``.cpu().numpy()``, for Python numbers, or when produced under no-grad.
"""

from __future__ import annotations

import libcst as cst

from memlint.analysis.grad import GradModeAnalysis
from memlint.analysis.tree import TreeIndex


class GraphAnalysis:
    def __init__(self, tree: TreeIndex, grad: GradModeAnalysis) -> None:
        self.tree = tree
        self.grad = grad

    def carries_graph(self, expr: cst.BaseExpression) -> bool:
        raise NotImplementedError

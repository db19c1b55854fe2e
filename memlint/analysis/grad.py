"""Grad mode at a point: is autograd switched off where this node runs?

Contract (owned by the core-rules work; keep the public methods stable):
- ``no_grad_at(node) -> bool``: True when ``node`` runs under ``torch.no_grad()``,
  ``torch.inference_mode()`` (not ``inference_mode(False)``), ``torch.set_grad_enabled(False)``
  as a ``with`` context or as a decorator of an enclosing function, or when every same-file
  call site of the enclosing function is itself under no-grad.
"""

from __future__ import annotations

import libcst as cst

from memlint.analysis.tree import TreeIndex

NO_GRAD_NAMES = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})


class GradModeAnalysis:
    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree

    def _disables_grad(self, expr: cst.BaseExpression) -> bool:
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call is not None else expr
        name = self.tree.imports.qualified_name(target)
        if name in NO_GRAD_NAMES:
            return True
        if name == "torch.set_grad_enabled" and call is not None and call.args:
            value = call.args[0].value
            return isinstance(value, cst.Name) and value.value == "False"
        return False

    def no_grad_at(self, node: cst.CSTNode) -> bool:
        for anc in self.tree.ancestors(node):
            if isinstance(anc, cst.With) and any(self._disables_grad(i.item) for i in anc.items):
                return True
            if isinstance(anc, cst.FunctionDef) and any(
                self._disables_grad(d.decorator) for d in anc.decorators
            ):
                return True
        return False

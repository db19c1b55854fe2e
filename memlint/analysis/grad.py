"""Grad mode at a point: is autograd switched off where this node runs?

Contract (owned by the core-rules work; keep the public methods stable):
- ``no_grad_at(node) -> bool``: True when ``node`` runs under ``torch.no_grad()``,
  ``torch.inference_mode()`` (not ``inference_mode(False)``), ``torch.set_grad_enabled(False)``
  as a ``with`` context or as a decorator of an enclosing function, or when every same-file
  call site of the enclosing function is itself under no-grad.
- ``grad_mode_at(node) -> "off" | "on" | "unknown"``: the same question with a third answer
  for ``set_grad_enabled(<expression>)`` (``phase == "train"``), which only runtime knows.

The nearest switch wins, so ``enable_grad()`` inside ``no_grad()`` is "on". A function with
no switch of its own takes the mode of its same-file call sites: "off" if all are off, "on"
if any is on, otherwise "unknown"; a function nobody in the file calls runs with grad "on".
"""

from __future__ import annotations

import libcst as cst

from memlint.analysis.tree import TreeIndex
from memlint.vocabulary import GradMode, grad_switch


def _bool_literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


class GradModeAnalysis:
    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree
        self._function_modes: dict[cst.FunctionDef, GradMode] = {}
        self._in_progress: set[cst.FunctionDef] = set()

    def switch_mode(self, expr: cst.BaseExpression) -> GradMode | None:
        """The mode a ``with`` item or decorator sets, or None when it does not touch grad."""
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call is not None else expr
        name = self.tree.imports.qualified_name(target)
        if name is None:
            return None
        has_args = call is not None and bool(call.args)
        flag = _bool_literal(call.args[0].value) if call is not None and call.args else None
        return grad_switch(name, call is not None, has_args, flag)

    def _disables_grad(self, expr: cst.BaseExpression) -> bool:
        return self.switch_mode(expr) == "off"

    def grad_mode_at(self, node: cst.CSTNode) -> GradMode:
        """Whether autograd records operations where ``node`` runs."""
        for anc in self.tree.ancestors(node):
            if isinstance(anc, (cst.With)):
                # Items apply left to right; the last one that touches grad wins.
                modes = [self.switch_mode(i.item) for i in anc.items]
                decided = [m for m in modes if m is not None]
                if decided:
                    return decided[-1]
            elif isinstance(anc, cst.FunctionDef):
                return self.function_mode(anc)
            elif isinstance(anc, cst.Lambda):
                continue
        return "on"

    def no_grad_at(self, node: cst.CSTNode) -> bool:
        """True only when autograd is certainly off at ``node``."""
        return self.grad_mode_at(node) == "off"

    def function_mode(self, func: cst.FunctionDef) -> GradMode:
        """The mode a function body starts in: its decorators, else its same-file callers."""
        cached = self._function_modes.get(func)
        if cached is not None:
            return cached
        for deco in reversed(func.decorators):
            mode = self.switch_mode(deco.decorator)
            if mode is not None:
                self._function_modes[func] = mode
                return mode
        if func in self._in_progress:
            return "unknown"
        self._in_progress.add(func)
        try:
            mode = self._mode_from_callers(func)
        finally:
            self._in_progress.discard(func)
        self._function_modes[func] = mode
        return mode

    def _mode_from_callers(self, func: cst.FunctionDef) -> GradMode:
        modes: list[GradMode] = []
        for call in self.tree.calls_by_name.get(func.name.value, ()):
            if self.tree.is_inside(call, func):
                continue  # recursion says nothing about how the outside world calls it
            caller = self.tree.enclosing_function(call)
            if caller is not None and caller in self._in_progress:
                continue  # a call cycle: let the other call sites decide
            modes.append(self.grad_mode_at(call))
        if not modes or "on" in modes:
            return "on"
        if all(m == "off" for m in modes):
            return "off"
        return "unknown"

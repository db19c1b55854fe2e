"""Grad mode at a point: is autograd switched off where this node runs?

Contract (owned by the core-rules work; keep the public methods stable):
- ``no_grad_at(node) -> bool``: True when ``node`` runs under ``torch.no_grad()``,
  ``torch.inference_mode()`` (not ``inference_mode(False)``), ``torch.set_grad_enabled(False)``
  as a ``with`` context or as a decorator of an enclosing function, or when every same-file
  call site of the enclosing function is itself under no-grad.
- ``grad_mode_at(node) -> "off" | "on" | "unknown"``: the same question with a third answer
  for ``set_grad_enabled(<expression>)`` (``phase == "train"``), which only runtime knows.

The nearest switch wins, so ``enable_grad()`` inside ``no_grad()`` is "on";
``stack.enter_context(torch.no_grad())`` switches for the rest of its block. A function with
no switch of its own takes the mode of its call sites: with a project model, every call
site in the project (and switches defined in other modules: a decorator factory that returns
``torch.inference_mode()`` or ``torch.no_grad()``, a wrapper that calls the function under
one); without one, its same-file call sites. "off" if all are off, "on" if any is on,
otherwise "unknown"; a function nobody calls runs with grad "on".
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import TreeIndex
from memlint.vocabulary import GradMode, grad_switch

if TYPE_CHECKING:
    from memlint.project.view import ModuleView

Block = cst.IndentedBlock | cst.Module


def _bool_literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None



# The ancestors grad_mode_at looks at; every other node type passes straight through.
_MODE_TYPES: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.IndentedBlock, cst.Module, cst.With, cst.FunctionDef, cst.Lambda})


class GradModeAnalysis:
    def __init__(self, tree: TreeIndex, project: ModuleView | None = None) -> None:
        self.tree = tree
        self.project = project
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
        mode = grad_switch(name, call is not None, has_args, flag)
        if mode is None and self.project is not None:
            written = dotted_name(target)
            if written is not None:
                mode = self.project.switch_mode(written, call is not None)
        return mode

    @cached_property
    def _entered(self) -> dict[Block, list[tuple[int, GradMode]]]:
        """``stack.enter_context(<switch>)`` statements: block -> (statement index, mode)."""
        found: dict[Block, list[tuple[int, GradMode]]] = {}
        for call in self.tree.calls_by_name.get("enter_context", ()):
            if len(call.args) != 1:
                continue
            mode = self.switch_mode(call.args[0].value)
            expr = self.tree.parent(call)
            line = None if expr is None else self.tree.parent(expr)
            block = None if line is None else self.tree.parent(line)
            if mode is None or not isinstance(expr, cst.Expr) or not isinstance(
                    block, (cst.IndentedBlock, cst.Module)):
                continue
            assert line is not None
            index = next(i for i, stmt in enumerate(block.body) if stmt is line)
            found.setdefault(block, []).append((index, mode))
        return found

    def _entered_before(self, block: Block, statement: cst.CSTNode) -> GradMode | None:
        entered = self._entered.get(block)
        if not entered:
            return None
        index = next((i for i, stmt in enumerate(block.body) if stmt is statement), -1)
        earlier = [mode for at, mode in entered if at < index]
        return earlier[-1] if earlier else None

    def _disables_grad(self, expr: cst.BaseExpression) -> bool:
        return self.switch_mode(expr) == "off"

    def grad_mode_at(self, node: cst.CSTNode) -> GradMode:
        """Whether autograd records operations where ``node`` runs."""
        child = node
        for anc in self.tree.ancestors(node):
            if type(anc) not in _MODE_TYPES:  # an exact type test: most ancestors stop here
                child = anc
                continue
            if isinstance(anc, (cst.IndentedBlock, cst.Module)) and self._entered:
                entered = self._entered_before(anc, child)
                if entered is not None:
                    return entered
            child = anc
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
        if self.project is not None:
            # Every call site in the project, this file's included, already weighed.
            known = self.project.function_modes.get(self.tree.qualname(func))
            if known is not None:
                self._function_modes[func] = known
                return known
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

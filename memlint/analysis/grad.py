"""Grad mode at a point: is autograd switched off where this node runs?

Contract (owned by the core-rules work; keep the public methods stable):
- ``no_grad_at(node) -> bool``: True when ``node`` runs under ``torch.no_grad()``,
  ``torch.inference_mode()`` (not ``inference_mode(False)``), ``torch.set_grad_enabled(False)``
  as a ``with`` context or as a decorator of an enclosing function, or when every same-file
  call site of the enclosing function is itself under no-grad.
- ``grad_mode_at(node) -> "off" | "on" | "unknown"``: the same question with a third answer
  for ``set_grad_enabled(<expression>)`` (``phase == "train"``), which only runtime knows.

A same-file ``@contextmanager`` whose ``yield`` sits under a switch is that switch
(``with evaluating(model):``), a parameter it passes to the switch read from the call.

The nearest switch wins, so ``enable_grad()`` inside ``no_grad()`` is "on";
``stack.enter_context(torch.no_grad())`` switches for the rest of its block. A function with
no switch of its own takes the mode of its call sites: with a project model, every call
site in the project (and switches defined in other modules: a decorator factory that returns
``torch.inference_mode()`` or ``torch.no_grad()``, a wrapper that calls the function under
one); without one, its same-file call sites. "off" if all are off, "on" if any is on,
otherwise "unknown"; a function nobody calls runs with grad "on", except a framework's
evaluation hook (Lightning's ``validation_step``, ``test_step``, ``predict_step`` methods),
which the framework runs with grad off.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import TreeIndex
from memlint.vocabulary import GradMode, framework_eval_hook, grad_switch

if TYPE_CHECKING:
    from memlint.project.view import ModuleView

Block = cst.IndentedBlock | cst.Module


def bool_literal(expr: cst.BaseExpression) -> bool | None:
    """``True`` / ``False`` written as such (a switch's flag), else None."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None



def _argument_of(call: cst.Call, function: cst.FunctionDef,
                 param: str) -> cst.BaseExpression | None:
    """The expression ``call`` passes for ``function``'s parameter ``param`` (``self`` of a
    method not counted), or None when it is not passed plainly."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if param not in params and param not in {p.name.value for p in function.params.kwonly_params}:
        return None
    if params and params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None]
    if param in params and params.index(param) < len(positional):
        return positional[params.index(param)]
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
        self._entering: set[cst.FunctionDef] = set()  # context managers being read

    def switch_mode(self, expr: cst.BaseExpression) -> GradMode | None:
        """The mode a ``with`` item or decorator sets, or None when it does not touch grad."""
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call is not None else expr
        name = self.tree.imports.qualified_name(target)
        if name is None:
            return None
        has_args = call is not None and bool(call.args)
        flag = bool_literal(call.args[0].value) if call is not None and call.args else None
        mode = grad_switch(name, call is not None, has_args, flag)
        if mode is None and self.project is not None:
            written = dotted_name(target)
            if written is not None:
                mode = self.project.switch_mode(written, call is not None)
        if mode is None and call is not None:
            mode = self._context_manager_mode(call)
        return mode

    def _context_manager_mode(self, call: cst.Call) -> GradMode | None:
        """A same-file ``@contextmanager`` (a function, or a method called on ``self``) that
        yields inside a switch: ``with evaluating(model):`` where ``evaluating`` does
        ``model.eval(); with torch.no_grad(): yield``. A switch given one of its parameters
        (``with torch.set_grad_enabled(training): yield``) takes the argument of this call.
        Every ``yield`` must sit under the same mode."""
        function = self._local_callee(call)
        if function is None or function in self._entering or not any(
                (self.tree.imports.qualified_name(d.decorator) or "").endswith("contextmanager")
                for d in function.decorators):
            return None
        self._entering.add(function)
        try:
            modes = [self._mode_at_yield(node, function, call)
                     for node in self.tree.walk(function.body)
                     if isinstance(node, cst.Yield)
                     and self.tree.enclosing_function(node) is function]
        finally:
            self._entering.discard(function)
        return modes[0] if modes and all(m == modes[0] for m in modes) else None

    def _local_callee(self, call: cst.Call) -> cst.FunctionDef | None:
        func = call.func
        if isinstance(func, cst.Name):
            found = self.tree.functions_by_name.get(func.value, ())
            top = [f for f in found if self.tree.enclosing_class(f) is None]
            return top[0] if len(top) == 1 else None
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value == "self"):
            cls = self.tree.enclosing_class(call)
            methods = [f for f in self.tree.functions_by_name.get(func.attr.value, ())
                       if cls is not None and self.tree.enclosing_class(f) is cls]
            return methods[0] if len(methods) == 1 else None
        return None

    def _mode_at_yield(self, node: cst.CSTNode, function: cst.FunctionDef,
                       call: cst.Call) -> GradMode | None:
        for anc in self.tree.ancestors(node):
            if anc is function:
                return None
            if isinstance(anc, cst.With):
                modes = [self._bound_switch_mode(i.item, function, call) for i in anc.items]
                decided = [m for m in modes if m is not None]
                if decided:
                    return decided[-1]
        return None

    def _bound_switch_mode(self, expr: cst.BaseExpression, function: cst.FunctionDef,
                           call: cst.Call) -> GradMode | None:
        """The mode a ``with`` item inside the context manager sets, its first argument
        read from ``call`` when it is one of the manager's parameters."""
        if isinstance(expr, cst.Call) and expr.args and isinstance(expr.args[0].value, cst.Name):
            argument = _argument_of(call, function, expr.args[0].value.value)
            if argument is not None:
                name = self.tree.imports.qualified_name(expr.func)
                if name is not None:
                    return grad_switch(name, True, True, bool_literal(argument))
        return self.switch_mode(expr)

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

    def grad_mode_at(self, node: cst.CSTNode, *, callers: bool = True) -> GradMode:
        """Whether autograd records operations where ``node`` runs. ``callers`` False: as a
        caller outside the project would run it, the mode the project's call sites give a
        module-level function or a method (not a nested function) left out."""
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
                if callers or self.tree.enclosing_function(anc) is not None:
                    return self.function_mode(anc)
                return self.decorated_mode(anc) or "on"
            elif isinstance(anc, cst.Lambda):
                continue
        return "on"

    def decorated_mode(self, func: cst.FunctionDef) -> GradMode | None:
        """The mode the function's own decorators set (the outermost that sets one)."""
        for deco in reversed(func.decorators):
            mode = self.switch_mode(deco.decorator)
            if mode is not None:
                return mode
        return None

    def no_grad_at(self, node: cst.CSTNode) -> bool:
        """True only when autograd is certainly off at ``node``."""
        return self.grad_mode_at(node) == "off"

    def function_mode(self, func: cst.FunctionDef) -> GradMode:
        """The mode a function body starts in: its decorators, else its same-file callers."""
        cached = self._function_modes.get(func)
        if cached is not None:
            return cached
        mode = self.decorated_mode(func)
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
        for call in self.tree.calls_of(func):
            if self.tree.is_inside(call, func):
                continue  # recursion says nothing about how the outside world calls it
            caller = self.tree.enclosing_function(call)
            if caller is not None and caller in self._in_progress:
                continue  # a call cycle: let the other call sites decide
            modes.append(self.grad_mode_at(call))
        if not modes and framework_eval_hook(
                func.name.value, self.tree.enclosing_class(func) is not None):
            return "off"  # Lightning's validation_step & co., called by the framework alone
        if not modes or "on" in modes:
            return "on"
        if all(m == "off" for m in modes):
            return "off"
        return "unknown"

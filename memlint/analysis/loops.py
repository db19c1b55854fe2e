"""What a loop is: training or not, what it binds and calls.

Contract (owned by the core-rules work; keep the public methods stable):
- ``is_training_loop(loop) -> bool``: the loop body (within its function) calls
  ``.backward()`` or ``<optimizer>.step()`` / ``scaler.step(opt)``, directly or through a
  same-file function that does (``for batch in loader: train_step(batch)``).
- Where a loop's data comes from is ``dataflow.DataflowAnalysis.is_dataloader_loop``.
- ``loop_targets(loop) -> set[str]``: names bound by the loop header.
- ``loop_calls(loop)``: every call in the body, nested functions excluded (cached).
- ``function_trains(func)``: the function does backward/step itself or through a same-file
  callee; ``training_callers(func)``: it is called from a training loop in this file.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from memlint.analysis.calls import is_backward_call, is_optimizer_step
from memlint.analysis.tree import Loop, TreeIndex


def target_names(target: cst.BaseExpression) -> set[str]:
    """Plain names a loop or comprehension target binds (``i, (x, y)`` -> i, x, y)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= target_names(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


class LoopAnalysis:
    """Answers from the call index rather than by walking loops: the few backward/step calls
    in a file are found by name once, and their enclosing loops and functions marked."""

    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree
        self._calls: dict[Loop, list[cst.Call]] = {}
        self._training_callers: dict[cst.FunctionDef, list[cst.Call]] = {}

    def loop_calls(self, loop: Loop) -> list[cst.Call]:
        """Calls in the loop's body and header, nested functions and classes excluded."""
        calls = self._calls.get(loop)
        if calls is None:
            calls = [n for n in self.tree.walk(loop) if isinstance(n, cst.Call)]
            self._calls[loop] = calls
        return calls

    def _direct(self, names: tuple[str, ...], backward_only: bool) -> list[cst.Call]:
        return [
            call
            for name in names
            for call in self.tree.calls_by_name.get(name, ())
            if is_backward_call(call) or (not backward_only and is_optimizer_step(call))
        ]

    @cached_property
    def training_calls(self) -> list[cst.Call]:
        """Every ``backward()`` and optimizer ``step()`` call in the file."""
        return self._direct(("backward", "manual_backward", "step"), backward_only=False)

    @cached_property
    def backward_calls(self) -> list[cst.Call]:
        """Every backward call in the file."""
        return self._direct(("backward", "manual_backward"), backward_only=True)

    def _propagate(
        self, direct: list[cst.Call]
    ) -> tuple[frozenset[cst.FunctionDef], list[cst.Call]]:
        """Functions that run ``direct`` calls themselves or through same-file callees, and
        the calls that reach them (the direct calls plus calls of those functions)."""
        functions: set[cst.FunctionDef] = set()
        reaching: list[cst.Call] = list(direct)
        todo = [f for f in (self.tree.enclosing_function(c) for c in direct) if f is not None]
        seen_names: set[str] = set()
        while todo:
            func = todo.pop()
            if func in functions:
                continue
            functions.add(func)
            name = func.name.value
            if name in seen_names:
                continue
            seen_names.add(name)
            for call in self.tree.calls_by_name.get(name, ()):
                if self.tree.is_inside(call, func):
                    continue
                reaching.append(call)
                caller = self.tree.enclosing_function(call)
                if caller is not None and caller not in functions:
                    todo.append(caller)
        return frozenset(functions), reaching

    @cached_property
    def _training(self) -> tuple[frozenset[cst.FunctionDef], frozenset[Loop]]:
        functions, reaching = self._propagate(self.training_calls)
        loops = {loop for call in reaching for loop in self.tree.enclosing_loops(call)}
        return functions, frozenset(loops)

    @cached_property
    def _backprop(self) -> tuple[frozenset[cst.FunctionDef], frozenset[Loop]]:
        functions, reaching = self._propagate(self.backward_calls)
        loops = {loop for call in reaching for loop in self.tree.enclosing_loops(call)}
        return functions, frozenset(loops)

    def is_training_loop(self, loop: Loop) -> bool:
        """The loop runs backward or an optimizer step, itself or via a same-file helper."""
        return loop in self._training[1]

    def runs_backward(self, loop: Loop) -> bool:
        """The loop runs a backward pass, itself or via a same-file helper."""
        return loop in self._backprop[1]

    def function_trains(self, func: cst.FunctionDef) -> bool:
        """The function calls backward/step, directly or through same-file callees."""
        return func in self._training[0]

    def function_backprops(self, func: cst.FunctionDef) -> bool:
        """The function calls backward, directly or through same-file callees."""
        return func in self._backprop[0]

    def training_callers(self, func: cst.FunctionDef) -> list[cst.Call]:
        """Same-file calls of ``func`` that run inside a training loop (kept per function:
        every statement of a long function may ask)."""
        known = self._training_callers.get(func)
        if known is None:
            known = self._training_callers[func] = [
                call
                for call in self.tree.calls_of(func)
                if not self.tree.is_inside(call, func)
                and any(self.is_training_loop(loop) for loop in self.tree.enclosing_loops(call))
            ]
        return known

    def loop_targets(self, loop: Loop) -> set[str]:
        """Names the header binds: ``for i, (x, y) in ...`` -> {i, x, y}; walrus names for while."""
        if isinstance(loop, cst.For):
            return target_names(loop.target)
        return {
            n.target.value
            for n in self.tree.walk(loop.test)
            if isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name)
        } | (
            {loop.test.target.value}
            if isinstance(loop.test, cst.NamedExpr) and isinstance(loop.test.target, cst.Name)
            else set()
        )


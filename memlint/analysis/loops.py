"""What a loop is and where its data comes from.

Contract (owned by the core-rules work; keep the public methods stable):
- ``is_training_loop(loop) -> bool``: the loop body (within its function) calls
  ``.backward()`` or ``<optimizer>.step()`` / ``scaler.step(opt)``, directly or through a
  same-file function that does (``for batch in loader: train_step(batch)``).
- ``is_dataloader_loop(loop) -> bool``: the loop iterates a DataLoader (or a value that
  plainly is one: ``*loader*`` names, ``enumerate(loader)``, ``tqdm(loader)``).
- ``loop_targets(loop) -> set[str]``: names bound by the loop header.
- ``loop_calls(loop)``: every call in the body, nested functions excluded (cached).
- ``function_trains(func)``: the function does backward/step itself or through a same-file
  callee; ``training_callers(func)``: it is called from a training loop in this file.
"""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from memlint.analysis.calls import first_arg, is_backward_call, is_optimizer_step, last_name
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop, TreeIndex

# Wrappers that iterate their first argument: `enumerate(loader)`, `tqdm(loader, ...)`.
_ITER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "islice", "zip", "trange", "track"})
_LOADER_NAME = re.compile(r"loader|(?:^|_)dl$|^dl_|dataloader", re.IGNORECASE)


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= _target_names(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


class LoopAnalysis:
    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree
        self._calls: dict[Loop, list[cst.Call]] = {}
        self._trains: dict[cst.FunctionDef, bool] = {}
        self._in_progress: set[cst.FunctionDef] = set()

    def loop_calls(self, loop: Loop) -> list[cst.Call]:
        """Calls in the loop's body and header, nested functions and classes excluded."""
        calls = self._calls.get(loop)
        if calls is None:
            calls = [n for n in self.tree.walk(loop) if isinstance(n, cst.Call)]
            self._calls[loop] = calls
        return calls

    def _trains_directly(self, calls: list[cst.Call]) -> bool:
        return any(is_backward_call(c) or is_optimizer_step(c) for c in calls)

    def is_training_loop(self, loop: Loop) -> bool:
        """The loop runs backward or an optimizer step, itself or via a same-file helper."""
        calls = self.loop_calls(loop)
        if self._trains_directly(calls):
            return True
        return any(self._calls_training_helper(c) for c in calls)

    def _calls_training_helper(self, call: cst.Call) -> bool:
        name = last_name(call.func)
        if name is None:
            return False
        return any(self.function_trains(f) for f in self.tree.functions_by_name.get(name, ()))

    def function_trains(self, func: cst.FunctionDef) -> bool:
        """The function calls backward/step, directly or through same-file callees."""
        cached = self._trains.get(func)
        if cached is not None:
            return cached
        if func in self._in_progress:
            return False
        self._in_progress.add(func)
        try:
            calls = [n for n in self.tree.walk(func) if isinstance(n, cst.Call)]
            result = self._trains_directly(calls) or any(
                self._calls_training_helper(c) for c in calls
            )
        finally:
            self._in_progress.discard(func)
        self._trains[func] = result
        return result

    def training_callers(self, func: cst.FunctionDef) -> list[cst.Call]:
        """Same-file calls of ``func`` that run inside a training loop."""
        return [
            call
            for call in self.tree.calls_by_name.get(func.name.value, ())
            if not self.tree.is_inside(call, func)
            and any(self.is_training_loop(loop) for loop in self.tree.enclosing_loops(call))
        ]

    def loop_targets(self, loop: Loop) -> set[str]:
        """Names the header binds: ``for i, (x, y) in ...`` -> {i, x, y}; walrus names for while."""
        if isinstance(loop, cst.For):
            return _target_names(loop.target)
        return {
            n.target.value
            for n in self.tree.walk(loop.test)
            if isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name)
        } | (
            {loop.test.target.value}
            if isinstance(loop.test, cst.NamedExpr) and isinstance(loop.test.target, cst.Name)
            else set()
        )

    def is_dataloader_loop(self, loop: Loop) -> bool:
        """The loop iterates a DataLoader or something named like one."""
        if not isinstance(loop, cst.For):
            return False
        source = self.iterated_value(loop)
        return source is not None and self._is_loader(source)

    def iterated_value(self, loop: cst.For) -> cst.BaseExpression | None:
        """What the loop really iterates, through ``enumerate``/``tqdm``/``zip`` wrappers."""
        value: cst.BaseExpression | None = loop.iter
        while isinstance(value, cst.Call) and last_name(value.func) in _ITER_WRAPPERS:
            value = first_arg(value)
        return value

    @cached_property
    def _loader_names(self) -> frozenset[str]:
        """Names assigned from a ``DataLoader(...)`` call anywhere in the file."""
        names: set[str] = set()
        for call in self.tree.calls_by_name.get("DataLoader", ()):
            parent = self.tree.parent(call)
            if isinstance(parent, cst.Assign):
                for target in parent.targets:
                    name = dotted_name(target.target)
                    if name is not None:
                        names.add(name)
        return frozenset(names)

    def _is_loader(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call) and last_name(value.func) == "DataLoader":
            return True
        while isinstance(value, cst.Subscript):  # `dataloaders[phase]`
            value = value.value
        name = dotted_name(value)
        if name is None:
            return False
        return name in self._loader_names or bool(_LOADER_NAME.search(name.rsplit(".", 1)[-1]))

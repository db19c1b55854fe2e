"""MEM004 missing-zero-grad: a training loop never clears gradients, or clears them on every
micro-step of a gradient-accumulation loop."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.calls import (
    first_arg,
    is_grad_clearing_assign,
    is_grad_clearing_call,
    is_optimizer_name,
    is_optimizer_step,
    is_scaler_step,
    is_zero_grad,
    last_name,
    method_name,
    receiver_name,
    step_optimizer,
)
from memlint.analysis.tree import Loop
from memlint.rules.base import Invalid, Rule, Valid

if TYPE_CHECKING:
    from memlint.context import FileContext

# `if (i + 1) % accum_steps == 0:` and friends; NaN/inf guards are not accumulation.
_ACCUMULATION_TEST = re.compile(r"%|accum", re.IGNORECASE)
_NOT_ACCUMULATION = re.compile(r"nan|isinf|finite|overflow", re.IGNORECASE)


class MissingZeroGrad(Rule):
    """
    ## What it does
    Flags an optimizer ``step()`` in a training loop that runs ``backward()`` but never clears
    gradients (no ``zero_grad()``, no ``p.grad = None``, no helper that does either, in the
    loop or a loop around it). Also flags a ``zero_grad()`` that runs on every micro-step of a
    gradient-accumulation loop whose ``step()`` only runs every N steps.

    ## Why is this bad?
    ``backward()`` adds into ``.grad``. Without clearing, every step applies the sum of all
    gradients so far, and training silently diverges. In an accumulation loop, clearing on
    every micro-step throws away all but the last micro-batch, so the effective batch is N
    times smaller than intended (and the scaled-down loss makes it worse).

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        (criterion(model(x), y) / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
    ```

    ## How to fix
    Clear once per optimizer step, right after it:
    ```python
    for i, (x, y) in enumerate(loader):
        (criterion(model(x), y) / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    Closures (``LBFGS``), ``accelerator.accumulate(model)``, DeepSpeed engines and Lightning's
    automatic optimization clear gradients themselves; the rule leaves them alone.
    """

    code = "MEM004"
    name = "missing-zero-grad"
    message = "training loop steps the optimizer but never clears gradients"
    triggers = ("backward(",)
    requires = (("step(",),)

    valid = (
        Valid("""
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        """),
        Valid("""
            def reset_grad():
                g_opt.zero_grad()
                d_opt.zero_grad()

            for x, _ in loader:
                d_loss(x).backward()
                d_opt.step()
                reset_grad()
                g_loss(x).backward()
                g_opt.step()
                reset_grad()
        """),
        Valid("""
            for x, y in loader:
                def closure():
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    return loss
                optimizer.step(closure)
        """),
        Valid("""
            for x, y in loader:
                for p in model.parameters():
                    p.grad = None
                criterion(model(x), y).backward()
                optimizer.step()
        """),
        Valid("""
            for x, y in loader:
                with accelerator.accumulate(model):
                    optimizer.zero_grad()
                    accelerator.backward(criterion(model(x), y))
                    optimizer.step()
        """),
    )
    invalid = (
        Invalid(
            """
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
            """,
            lines=(5,),
        ),
        Invalid(
            """
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
            """,
            lines=(3,),
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._clears: dict[cst.FunctionDef, bool] = {}
        self._reported: set[cst.CSTNode] = set()

    # ------------------------------------------------------------------ visitor

    def visit_Call(self, node: cst.Call) -> None:
        if not is_optimizer_step(node):
            return
        if not is_scaler_step(node) and first_arg(node) is not None:
            return  # `optimizer.step(closure)`: the closure owns backward and zero_grad
        tree = self.context.analysis.tree
        loops = tree.enclosing_loops(node)
        training = next((i for i, loop in enumerate(loops) if self._has_backward(loop)), None)
        if training is None:
            return
        loop = loops[training]
        optimizer = step_optimizer(node)
        if optimizer is not None and self._created_inside(optimizer, node, loop):
            return  # a fresh optimizer per iteration: a one-off check, not a training loop
        searched = loops[training:]
        clears = [c for outer in searched for c in self._clearing_calls(outer)]
        generic = any(self._assigns_none(outer) for outer in searched) or any(
            not is_zero_grad(c) or not is_optimizer_name(receiver_name(c)) for c in clears
        )
        if not clears and not generic:
            self.report(node)
            return
        if not generic:
            stepped = {
                step_optimizer(c) for c in self.context.analysis.loops.loop_calls(loop)
                if is_optimizer_step(c)
            }
            cleared = {receiver_name(c) for c in clears}
            if len(stepped) > 1 and optimizer not in cleared:
                self.report(
                    node,
                    f"`{optimizer}` is stepped in a training loop but its gradients are never "
                    "cleared",
                )
                return
        self._check_microstep(node, loop, optimizer)

    # ------------------------------------------------------------------ missing

    def _created_inside(self, optimizer: str, node: cst.CSTNode, loop: Loop) -> bool:
        graph = self.context.analysis.graph
        tree = self.context.analysis.tree
        bindings = graph.facts(graph.scope_of(node)).bindings.get(optimizer, ())
        return any(
            b.kind == "assign" and tree.is_inside(b.node, loop) for b in bindings
        )

    def _has_backward(self, loop: Loop) -> bool:
        return self.context.analysis.loops.runs_backward(loop)

    def _clearing_calls(self, loop: Loop) -> list[cst.Call]:
        """zero_grad-like calls in the loop, and calls of same-file helpers that clear."""
        out: list[cst.Call] = []
        for call in self.context.analysis.loops.loop_calls(loop):
            if is_grad_clearing_call(call):
                out.append(call)
                continue
            name = last_name(call.func)
            if name is not None and any(
                self._function_clears(f)
                for f in self.context.analysis.tree.functions_by_name.get(name, ())
            ):
                out.append(call)
        return out

    def _assigns_none(self, loop: Loop) -> bool:
        return any(is_grad_clearing_assign(n) for n in self.context.analysis.tree.walk(loop))

    def _function_clears(self, func: cst.FunctionDef) -> bool:
        cached = self._clears.get(func)
        if cached is not None:
            return cached
        self._clears[func] = False  # a recursion cycle clears nothing by itself
        tree = self.context.analysis.tree
        result = False
        for node in tree.walk(func):
            if is_grad_clearing_assign(node):
                result = True
            elif isinstance(node, cst.Call):
                if is_grad_clearing_call(node):
                    result = True
                else:
                    name = last_name(node.func)
                    result = name is not None and any(
                        self._function_clears(f) for f in tree.functions_by_name.get(name, ())
                    )
            if result:
                break
        self._clears[func] = result
        return result

    # ------------------------------------------------------------------ misplaced

    def _check_microstep(self, step: cst.Call, loop: Loop, optimizer: str | None) -> None:
        if not self._accumulation_guard(step, loop):
            return
        tree = self.context.analysis.tree
        for call in self.context.analysis.loops.loop_calls(loop):
            if not is_zero_grad(call) or call in self._reported:
                continue
            target = receiver_name(call)
            if is_optimizer_name(target) and target != optimizer:
                continue
            nearest = tree.enclosing_loops(call)
            if not nearest or nearest[0] is not loop:
                continue
            if self._conditional_within(call, loop) or self._in_accumulate_context(call):
                continue
            self._reported.add(call)
            self.report(
                call,
                "`zero_grad()` runs on every micro-step but `step()` only every N steps, so "
                "gradient accumulation keeps only the last micro-batch; clear after `step()`",
            )

    def _accumulation_guard(self, step: cst.Call, loop: Loop) -> bool:
        module = self.context.module
        for anc in self.context.analysis.tree.ancestors(step):
            if anc is loop:
                return False
            if isinstance(anc, (cst.If, cst.While)):
                text = module.code_for_node(anc.test)
                if _ACCUMULATION_TEST.search(text) and not _NOT_ACCUMULATION.search(text):
                    return True
        return False

    def _conditional_within(self, node: cst.CSTNode, loop: Loop) -> bool:
        for anc in self.context.analysis.tree.ancestors(node):
            if anc is loop:
                return False
            if isinstance(anc, (cst.If, cst.Try, cst.IfExp)):
                return True
        return False

    def _in_accumulate_context(self, node: cst.CSTNode) -> bool:
        for anc in self.context.analysis.tree.ancestors(node):
            if isinstance(anc, cst.With) and any(
                isinstance(i.item, cst.Call) and method_name(i.item) in ("accumulate", "no_sync")
                for i in anc.items
            ):
                return True
        return False

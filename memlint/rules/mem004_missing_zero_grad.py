"""MEM004 missing-zero-grad: a training loop never clears gradients, clears them on every
micro-step of a gradient-accumulation loop, or clears them between ``backward()`` and
``step()``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.calls import (
    first_arg,
    is_backward_call,
    is_grad_clearing_assign,
    is_grad_clearing_call,
    is_optimizer_name,
    is_optimizer_step,
    is_scaler_step,
    is_zero_grad,
    last_name,
    method_name,
    receiver,
    receiver_name,
    step_optimizer,
)
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop
from memlint.rules.base import Invalid, Rule, Valid

if TYPE_CHECKING:
    from memlint.context import FileContext

# `if (i + 1) % accum_steps == 0:` and friends; NaN/inf guards are not accumulation.
_ACCUMULATION_TEST = re.compile(r"%|accum", re.IGNORECASE)
_NOT_ACCUMULATION = re.compile(r"nan|isinf|finite|overflow", re.IGNORECASE)
# Nodes under which a statement runs only sometimes, or one of two statements excludes the other.
_BRANCHES = (cst.If, cst.Try, cst.TryStar, cst.Match, cst.IfExp, cst.BooleanOperation)


class MissingZeroGrad(Rule):
    """
    ## What it does
    Flags an optimizer ``step()`` in a training loop that runs ``backward()`` but never clears
    gradients (no ``zero_grad()``, no ``p.grad = None``, no helper that does either, in the
    loop or a loop around it). Also flags a ``zero_grad()`` that runs on every micro-step of a
    gradient-accumulation loop whose ``step()`` only runs every N steps, and a ``zero_grad()``
    placed between ``backward()`` and the ``step()`` it feeds, in a loop body or in a per-step
    function (``loss.backward(); optimizer.zero_grad(); optimizer.step()``).

    ## Why is this bad?
    ``backward()`` adds into ``.grad``. Without clearing, every step applies the sum of all
    gradients so far, and training silently diverges. In an accumulation loop, clearing on
    every micro-step throws away all but the last micro-batch, so the effective batch is N
    times smaller than intended (and the scaled-down loss makes it worse). Clearing between
    ``backward()`` and ``step()`` wipes the gradients just computed, so the step applies
    nothing (or only weight decay and stale momentum) and the model does not learn.

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
    Keep ``zero_grad()`` before ``backward()`` or after ``step()``, never between them.
    Closures (``LBFGS``), ``accelerator.accumulate(model)``, DeepSpeed engines and Lightning's
    automatic optimization clear gradients themselves; the rule leaves them alone. A helper
    that clears gradients counts wherever it is defined: in this file, or (with the project
    model) in another module of the package (``zero_grads(params)`` from a utilities module).

    A ``zero_grad()`` between ``backward()`` and ``step()`` is only reported when the step that
    follows is of the optimizer it clears, or, for ``model.zero_grad()``, of an optimizer built
    in this file from that model's parameters alone. It is left alone when another
    ``backward()`` runs before the step (the first gradients are discarded on purpose), when it
    clears a different optimizer (a GAN's ``d_opt.zero_grad()`` before ``g_opt.step()``), when
    it runs only under a condition the step is outside of (a NaN guard that skips the update),
    when the backward is in a closure passed to ``step()``, in ``test_*`` functions, and when the
    accumulation message above already covers it. Backward, clear and step must sit in one loop
    body or one function; a helper that clears and steps, called after ``backward()``, is not
    followed.
    """

    code = "MEM004"
    name = "missing-zero-grad"
    message = "training loop steps the optimizer but never clears gradients"
    triggers = ("backward(",)
    requires = (("step(",),)
    # Findings need a backward pass in this file (memlint.analysis.loops).
    code_gate = ("call:backward", "call:manual_backward")

    valid = (
        Valid("""
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        """),
        # A weight average stepped after the real optimizer reads no gradient.
        Valid("""
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                ema_optimizer.step()
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
        Valid("""
            for real, z in loader:
                d_opt.zero_grad()
                d_loss(real, z).backward()
                d_opt.step()
                g_opt.zero_grad()
                g_loss(z).backward()
                d_opt.zero_grad()
                g_opt.step()
        """),
        Valid("""
            optimizer = torch.optim.Adam(generator.parameters())
            for x, y in loader:
                optimizer.zero_grad()
                criterion(generator(x), y).backward()
                discriminator.zero_grad()
                optimizer.step()
        """),
        Valid("""
            for x, y in loader:
                aux_loss(model(x)).backward(retain_graph=True)
                aux_norms.append(grad_norm(model))
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        """),
        Valid("""
            for x, y in loader:
                def closure():
                    loss = criterion(model(x), y)
                    loss.backward()
                    return loss
                optimizer.zero_grad()
                optimizer.step(closure)
        """),
        Valid("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                if not torch.isfinite(loss):
                    optimizer.zero_grad()
                    continue
                optimizer.step()
                optimizer.zero_grad()
        """),
        Valid(
            # Accumulation over minibatches: cleared once per epoch before the loader loop
            # and after each step; the epoch's guarded step flushes the last partial batch.
            """
            for epoch in range(epochs):
                optimizer.zero_grad()
                accumulated = 0
                for x, y in loader:
                    criterion(model(x), y).backward()
                    accumulated += len(x)
                    if accumulated >= batch_size:
                        optimizer.step()
                        optimizer.zero_grad()
                        accumulated = 0
                if accumulated != 0:
                    optimizer.step()
            """
        ),
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
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.zero_grad()
                optimizer.step()
            """,
            lines=(5,),
        ),
        Invalid(
            """
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)

            def train_step(x, y):
                with torch.autocast("cuda"):
                    loss = criterion(net(x), y)
                scaler.scale(loss).backward()
                net.zero_grad()
                scaler.step(optimizer)
                scaler.update()

            for x, y in loader:
                train_step(x, y)
            """,
            lines=(8,),
        ),
        Invalid(
            """
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.zero_grad()
                    optimizer.step()
            """,
            lines=(5,),
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._clears: dict[cst.FunctionDef, bool] = {}
        self._reported: set[cst.CSTNode] = set()
        # (target, value) source of every assignment in the file, built on first need.
        self._assignments: list[tuple[str, cst.BaseExpression]] | None = None

    # ------------------------------------------------------------------ visitor

    def visit_Call(self, node: cst.Call) -> None:
        if is_zero_grad(node):
            self._check_between(node)
            return
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
            if (name is not None and any(
                self._function_clears(f)
                for f in self.context.analysis.tree.functions_by_name.get(name, ())
            )) or self._project_clears(call):
                out.append(call)
        return out

    def _project_clears(self, call: cst.Call) -> bool:
        """A helper from another module of the project that clears gradients."""
        project = self.context.project
        written = dotted_name(call.func)
        return project is not None and written is not None and written in project.grad_clearers

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
        if not self._accumulation_guard(step, loop) or self._steps_after_inner_loop(step, loop):
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

    def _steps_after_inner_loop(self, step: cst.Call, loop: Loop) -> bool:
        """The backward passes run in a loop nested in ``loop`` that ``step`` is not part of:
        ``loop``'s iterations are epochs, not micro-steps, and a guarded step after the inner
        loop flushes what is left (``if accumulated != 0: optimizer.step()``)."""
        tree = self.context.analysis.tree
        loops = self.context.analysis.loops
        for call in loops.loop_calls(loop):
            inner = tree.enclosing_loops(call)
            if (
                inner
                and inner[0] is not loop
                and tree.is_inside(inner[0], loop)
                and not tree.is_inside(step, inner[0])
                and loops.runs_backward(inner[0])
            ):
                return True
        return False

    def _accumulation_guard(self, step: cst.Call, loop: Loop) -> bool:
        for anc in self.context.analysis.tree.ancestors(step):
            if anc is loop:
                return False
            if isinstance(anc, (cst.If, cst.While)):
                text = self.context.code_for(anc.test)
                if _ACCUMULATION_TEST.search(text) and not _NOT_ACCUMULATION.search(text):
                    return True
        return False

    def _conditional_within(self, node: cst.CSTNode, loop: Loop) -> bool:
        """``node`` runs only on some iterations of ``loop``: under an ``if``, a conditional
        expression or an ``except`` handler. A ``try`` body (an out-of-memory hint around the
        step) runs on every iteration that does not fail."""
        child = node
        for anc in self.context.analysis.tree.ancestors(node):
            if anc is loop:
                return False
            if isinstance(anc, (cst.If, cst.IfExp)):
                return True
            if isinstance(anc, (cst.Try, cst.TryStar)) and any(child is h for h in anc.handlers):
                return True
            child = anc
        return False

    def _in_accumulate_context(self, node: cst.CSTNode) -> bool:
        for anc in self.context.analysis.tree.ancestors(node):
            if isinstance(anc, cst.With) and any(
                isinstance(i.item, cst.Call) and method_name(i.item) in ("accumulate", "no_sync")
                for i in anc.items
            ):
                return True
        return False

    # ------------------------------------------------------------------ between

    def _check_between(self, zero: cst.Call) -> None:
        """``backward()``, then this ``zero_grad()``, then the ``step()`` it starves."""
        tree = self.context.analysis.tree
        loops = tree.enclosing_loops(zero)
        calls: list[cst.Call]
        if loops:
            calls = self.context.analysis.loops.loop_calls(loops[0])
        else:
            func = tree.enclosing_function(zero)
            if func is None or func.name.value.startswith("test"):
                return
            calls = [n for n in tree.walk(func) if isinstance(n, cst.Call)]
        index = next((i for i, call in enumerate(calls) if call is zero), None)
        if index is None:
            return  # in a lambda: not part of this iteration's straight-line code
        before = next((c for c in reversed(calls[:index]) if self._is_event(c)), None)
        after = next((c for c in calls[index + 1:] if self._is_event(c)), None)
        if before is None or after is None:
            return
        if not is_backward_call(before) or not is_optimizer_step(after):
            return
        if not is_scaler_step(after) and first_arg(after) is not None:
            return  # `step(closure)`: the closure recomputes the gradients
        if not self._same_loops(tree.enclosing_loops(after), loops):
            return
        if not self._on_one_path(before, zero) or self._branches_between(zero, after):
            return
        if self._guarded_against_nan(zero, loops[0] if loops else None):
            return
        optimizer = first_arg(after) if is_scaler_step(after) else receiver(after)
        target = receiver(zero)
        if optimizer is None or target is None:
            return
        code = self.context.code_for
        optimizer_text, target_text = code(optimizer), code(target)
        if target_text != optimizer_text and (
            is_optimizer_name(receiver_name(zero))
            or not self._built_only_from(optimizer_text, target_text)
        ):
            return
        if loops and self._microstep_claims(zero, after, loops[0]):
            return
        self._reported.add(zero)
        step_text = code(after)
        if "\n" in step_text:
            step_text = f"{optimizer_text}.step()"
        self.report(
            zero,
            f"`{target_text}.zero_grad()` runs after `backward()` and before `{step_text}`, "
            "so the step applies no gradients; clear before `backward()` or after the step",
        )

    @staticmethod
    def _is_event(call: cst.Call) -> bool:
        return is_backward_call(call) or is_optimizer_step(call)

    @staticmethod
    def _same_loops(first: list[Loop], second: list[Loop]) -> bool:
        return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))

    def _common_ancestor(self, first: cst.CSTNode, second: cst.CSTNode) -> cst.CSTNode | None:
        tree = self.context.analysis.tree
        around = {id(a) for a in tree.ancestors(second)}
        return next((a for a in tree.ancestors(first) if id(a) in around), None)

    def _on_one_path(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Not in the two arms of one ``if``/``try``: both can run in the same pass."""
        common = self._common_ancestor(first, second)
        return common is not None and not isinstance(common, _BRANCHES)

    def _branches_between(self, node: cst.CSTNode, other: cst.CSTNode) -> bool:
        """Does ``node`` run only under a condition that ``other`` is outside of?"""
        common = self._common_ancestor(node, other)
        for anc in self.context.analysis.tree.ancestors(node):
            if anc is common:
                return False
            if isinstance(anc, _BRANCHES):
                return True
        return True

    def _guarded_against_nan(self, node: cst.CSTNode, loop: Loop | None) -> bool:
        """``if not torch.isfinite(loss): optimizer.zero_grad(); ...``: a deliberate skip."""
        for anc in self.context.analysis.tree.ancestors(node):
            if anc is loop or isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(anc, (cst.If, cst.While)) and _NOT_ACCUMULATION.search(
                self.context.code_for(anc.test)
            ):
                return True
        return False

    def _microstep_claims(self, zero: cst.Call, step: cst.Call, loop: Loop) -> bool:
        """The accumulation check reports this ``zero_grad()`` with its own message."""
        target = receiver_name(zero)
        if is_optimizer_name(target) and target != step_optimizer(step):
            return False
        return (
            self._accumulation_guard(step, loop)
            and not self._steps_after_inner_loop(step, loop)
            and not self._conditional_within(zero, loop)
            and not self._in_accumulate_context(zero)
        )

    def _built_only_from(self, optimizer: str, model: str) -> bool:
        """``optimizer = SGD(model.parameters(), ...)`` somewhere in the file, and no other
        module's parameters in it: clearing ``model`` clears what the optimizer steps."""
        code = self.context.code_for
        if self._assignments is None:
            # Targets only: a value's source is rendered when its target is the optimizer.
            self._assignments = [
                (code(target.target), node.value)
                for node in self.context.analysis.tree.preorder
                if isinstance(node, cst.Assign)
                for target in node.targets
            ]
        own = re.compile(rf"(?<![\w.]){re.escape(model)}\s*\.\s*(?:named_)?parameters\s*\(")
        any_params = re.compile(r"parameters\s*\(")
        return any(
            own.search(value) is not None
            and len(own.findall(value)) == len(any_params.findall(value))
            for value in (code(v) for target, v in self._assignments if target == optimizer)
        )

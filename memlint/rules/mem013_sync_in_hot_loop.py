"""MEM013 sync-in-hot-loop."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from memlint.analysis.calls import last_name, method_name
from memlint.analysis.steps import StepAnalysis
from memlint.rules.base import Invalid, Rule, Valid

SYNC_METHODS = frozenset({"item", "cpu", "tolist"})
# Checks that must see every step's value: NaN guards and early stopping.
VALUE_CHECKS = frozenset({"isnan", "isinf", "isfinite", "is_nonzero"})
# `if step % log_every == 0`, `if should_log:`, `if i == print_freq - 1`.
INTERVAL_NAME = re.compile(r"log|interval|every|freq|period|verbose|debug|display", re.IGNORECASE)

MESSAGES = {
    "item": "`.item()` every training step waits for the GPU; accumulate `loss.detach()` "
    "and call `.item()` once per logging interval",
    "cpu": "`.cpu()` every training step waits for the GPU; copy to the host once per "
    "logging interval",
    "tolist": "`.tolist()` every training step waits for the GPU; convert once per "
    "logging interval",
    "print": "printing a tensor every training step waits for the GPU; print at a logging "
    "interval",
}


class SyncInHotLoop(Rule):
    """
    ## What it does
    Flags host synchronisations that run on every training step: `.item()`, `.cpu()`,
    `.tolist()` and `print(tensor)` in the innermost training loop (or in a step function
    that loop calls), unless they sit under a logging-interval condition such as
    `if step % log_every == 0`.

    ## Why is this bad?
    CUDA runs asynchronously: the Python loop normally queues the next step's kernels
    while the GPU is still busy. Reading a value on the host makes the CPU wait until
    every queued kernel has finished, so the queue drains every step and the GPU idles
    while Python prepares the next batch.

    Checks that must see every value (`torch.isnan(loss)`, `math.isfinite(loss.item())`,
    early stopping on the step's loss) are not flagged: they are syncs on purpose. Neither
    is a sync in a branch of an `if` whose test already synced: the GPU is idle there.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    ```

    Use instead:
    ```python
    running = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % log_every == 0:
            print(running.item() / (step + 1))
    ```

    ## How to fix
    Accumulate on the device with `.detach()` and read the value once per logging
    interval or once per epoch.

    This rule is off by default; enable it with `select`.
    """

    code = "MEM013"
    name = "sync-in-hot-loop"
    message = MESSAGES["item"]
    default_enabled = False
    triggers = (".item(", ".cpu(", ".tolist(", "print(")
    # Only a training step (backward or an optimizer step) is a hot loop here.
    requires = (("backward(", "step("),)
    valid = (
        Valid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running += loss.detach()
                if step % args.log_every == 0:
                    print(f"loss {running.item() / (step + 1):.4f}")
            """
        ),
        Valid(
            """
            import math, torch
            for x, y in loader:
                loss = criterion(model(x), y)
                if not math.isfinite(loss.item()):
                    raise FloatingPointError("loss diverged")
                if torch.isnan(loss):
                    break
                loss.backward()
                optimizer.step()
            """
        ),
        Valid(
            # Once per epoch, outside the batch loop.
            """
            for epoch in range(epochs):
                total = 0.0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                print(epoch, total.item())
            """
        ),
    )
    invalid = (
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss.item()
                preds.extend(model(x).argmax(1).cpu().tolist())
                print(loss)
            """,
            lines=(6, 7, 8),
        ),
        Invalid(
            """
            def train_step(batch):
                loss = criterion(model(batch.x), batch.y)
                loss.backward()
                optimizer.step()
                return loss.item()

            for batch in loader:
                history.append(train_step(batch))
            """,
            lines=(6,),
        ),
    )

    @cached_property
    def _steps(self) -> StepAnalysis:
        return StepAnalysis(self.context.analysis)

    def visit_Call(self, node: cst.Call) -> None:
        kind = self._sync_kind(node)
        if kind is None or self._outer_call_reports(node):
            return
        loop = self._steps.step_loop(node)
        if loop is None and not self._steps.in_step_helper(node):
            return
        if self._deliberate(node, loop):
            return
        self.report(node, MESSAGES[kind])

    def _sync_kind(self, call: cst.Call) -> str | None:
        method = method_name(call)
        if method in SYNC_METHODS and not call.args:
            return method
        if isinstance(call.func, cst.Name) and call.func.value == "print":
            graph = self.context.analysis.graph
            for arg in call.args:
                values: list[cst.BaseExpression] = [arg.value]
                if isinstance(arg.value, cst.FormattedString):
                    values = [
                        part.expression
                        for part in arg.value.parts
                        if isinstance(part, cst.FormattedStringExpression)
                    ]
                if any(graph.carries_graph(v) for v in values):
                    return "print"
        return None

    def _outer_call_reports(self, call: cst.Call) -> bool:
        """In `x.cpu().tolist()` only the outermost sync is reported."""
        parent = self.context.analysis.tree.parent(call)
        if not isinstance(parent, cst.Attribute) or parent.value is not call:
            return False
        outer = self.context.analysis.tree.parent(parent)
        return isinstance(outer, cst.Call) and self._sync_kind(outer) is not None

    def _deliberate(self, node: cst.CSTNode, loop: cst.CSTNode | None) -> bool:
        """Gated by a logging interval, or a value check that must see every step."""
        tree = self.context.analysis.tree
        child = node
        for anc in tree.ancestors(node):
            if anc is loop or isinstance(anc, cst.FunctionDef):
                return False
            if isinstance(anc, cst.Call) and last_name(anc.func) in VALUE_CHECKS:
                return True
            if isinstance(anc, cst.If | cst.While) and child is anc.test:
                return True  # the step's value decides control flow
            if isinstance(anc, cst.Assert):
                return True
            if isinstance(anc, cst.If) and child is anc.body and self._interval_test(anc.test):
                return True
            if isinstance(anc, cst.If) and child is not anc.test and self._syncs(anc.test):
                return True  # the test already waited for the GPU; either branch is free
            child = anc
        return False

    def _syncs(self, test: cst.BaseExpression) -> bool:
        return any(
            isinstance(n, cst.Call)
            and (last_name(n.func) in VALUE_CHECKS or method_name(n) in SYNC_METHODS)
            for n in [test, *self.context.analysis.tree.walk(test)]
        )

    def _interval_test(self, test: cst.BaseExpression) -> bool:
        for n in [test, *self.context.analysis.tree.walk(test)]:
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo):
                return True
            if isinstance(n, cst.Name) and INTERVAL_NAME.search(n.value):
                return True
            if isinstance(n, cst.Attribute) and INTERVAL_NAME.search(n.attr.value):
                return True
        return False

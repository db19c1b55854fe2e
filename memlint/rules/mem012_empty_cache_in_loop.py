"""MEM012 empty-cache-in-loop."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from memlint.analysis.calls import last_name
from memlint.analysis.steps import StepAnalysis
from memlint.rules.base import Invalid, Rule, Valid

EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"})


class EmptyCacheInLoop(Rule):
    """
    ## What it does
    Flags `torch.cuda.empty_cache()` called unconditionally in every iteration of a
    training loop or of a loop over a DataLoader, or in a framework's per-batch
    `training_step` (Lightning, the Hugging Face `Trainer`).

    ## Why is this bad?
    `empty_cache()` only hands *unused* cached blocks back to the driver; it cannot free a
    single live tensor, so it does not prevent an out-of-memory error. Called every step it
    makes the caching allocator ask the driver for the same memory again on the next step
    (slow `cudaMalloc` calls and synchronisation) for no gain.

    It is reasonable at a phase change: after `del` of a large model, between training and
    evaluation, or when the GPU is shared with another process. Those uses are not flagged.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
    ```

    Use instead:
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    torch.cuda.empty_cache()  # once, before the next phase
    ```

    ## How to fix
    Remove the call from the loop. If memory really runs out, free references (`del`,
    `zero_grad(set_to_none=True)`, detach accumulated values) instead.

    This rule is off by default; enable it with `select`.
    """

    code = "MEM012"
    name = "empty-cache-in-loop"
    message = (
        "`torch.cuda.empty_cache()` every iteration frees no live tensor and forces re-allocation"
    )
    default_enabled = False
    triggers = ("empty_cache",)
    # Reported only in a loop of its own function or in a per-batch hook's body.
    code_gate = ("fact:looped-empty-cache",)
    valid = (
        Valid(
            """
            import torch
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            torch.cuda.empty_cache()
            """
        ),
        Valid(
            # One model per shard: the large model is deleted before the cache is released.
            """
            import torch
            for shard in shard_loader:
                model = load_model(shard.checkpoint)
                scores.append(model(shard.inputs).cpu())
                del model
                torch.cuda.empty_cache()
            """
        ),
        Valid(
            """
            import torch
            for x, y in loader:
                try:
                    criterion(model(x), y).backward()
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
                optimizer.step()
            """
        ),
        Valid(
            """
            import torch
            for step, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                optimizer.step()
                if step % 1000 == 0:
                    torch.cuda.empty_cache()
            """
        ),
    )
    invalid = (
        # Lightning calls `training_step` for every batch.
        Invalid(
            """
            import torch
            import lightning as L
            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.loss(self.model(batch[0]), batch[1])
                    torch.cuda.empty_cache()
                    return loss
            """,
            lines=(7,),
        ),
        Invalid(
            """
            import torch
            for x, y in train_loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch.cuda.empty_cache()
            """,
            lines=(7,),
        ),
        Invalid(
            """
            from torch.cuda import empty_cache
            def evaluate(model, val_loader):
                for batch in val_loader:
                    preds = model(batch)
                    empty_cache()
            """,
            lines=(6,),
        ),
    )

    @cached_property
    def _steps(self) -> StepAnalysis:
        return StepAnalysis(self.context.analysis)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.analysis.imports.qualified_name(node.func) not in EMPTY_CACHE:
            return
        # A training loop's iteration, or a framework's `training_step` (run every batch).
        loop: cst.CSTNode | None = self._steps.step_loop(node, eval_loops=True)
        if loop is None:
            loop = self._steps.framework_step(node)
        if loop is None or self._conditional(node, loop) or self._after_del(node):
            return
        self.report(node)

    def _conditional(self, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
        """Under an `if` or an `except` inside the loop: not every iteration."""
        for anc in self.context.analysis.tree.ancestors(node):
            if anc is loop:
                return False
            if isinstance(anc, (cst.If, cst.ExceptHandler)):
                return True
        return False

    def _after_del(self, node: cst.CSTNode) -> bool:
        """A `del` of a model earlier in the same block marks a deliberate release.

        `del loss, out` followed by `empty_cache()` every step is the pattern this rule is
        about, so only deleting a model (by name, or an instance of a module class defined
        here) counts.
        """
        tree = self.context.analysis.tree
        stmt = tree.enclosing_statement(node)
        block = tree.parent(stmt)
        if not isinstance(block, cst.IndentedBlock | cst.Module):
            return False
        for sibling in block.body:
            if sibling is stmt:
                return False
            if isinstance(sibling, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Del) and self._deletes_model(small.target)
                for small in sibling.body
            ):
                return True
        return False

    def _deletes_model(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Tuple | cst.List):
            return any(self._deletes_model(e.value) for e in target.elements)
        name = last_name(target)
        if name is None:
            return False
        return "model" in name.lower() or name in self.context.analysis.calls.module_instances

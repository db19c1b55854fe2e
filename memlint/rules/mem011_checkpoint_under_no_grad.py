"""MEM011 checkpoint-under-no-grad."""

from __future__ import annotations

import re

import libcst as cst

from memlint.analysis.branches import alternatives, guarding_tests, mentions
from memlint.context import FileContext
from memlint.edits import has_keyword, has_star_args
from memlint.rules.base import Invalid, Rule, Valid

CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)
NO_GRAD_MESSAGE = (
    "activation checkpoint under no-grad: it saves no memory and no gradient flows through it"
)
REENTRANT_MESSAGE = (
    "pass `use_reentrant=` explicitly to `checkpoint`; `use_reentrant=False` is recommended"
)
# A test about the installed torch: `torch.__version__ >= "1.11"`, `is_torch_version(...)`,
# `TORCH_GE_1_11`, `_TORCH_GREATER_EQUAL_2_0`, `"use_reentrant" in signature(...).parameters`.
VERSION_WORD = re.compile(
    r"version|reentrant|torch_?(?:ge|gt|le|lt|greater|less|newer|older|at_least|\d)",
    re.IGNORECASE,
)


class CheckpointUnderNoGrad(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` (and `checkpoint_sequential`) called where
    autograd is off: inside `torch.no_grad()`, `torch.inference_mode()`,
    `torch.set_grad_enabled(False)` or a function decorated with one of them. It also flags a
    `checkpoint` call that leaves `use_reentrant` to its default.

    A checkpoint in the branch of a test that the module trains (`if self.training:`) or
    that autograd is on (`if torch.is_grad_enabled():`) never runs where autograd is off,
    whatever the callers this file or project shows: it is not reported as under no-grad.

    Code that supports old torch releases (before 1.11, which reject the keyword) is left
    alone: a call that passes `**kwargs` (`{"use_reentrant": False} if new_torch else {}`), a
    call under a test about the torch version (`torch.__version__`, `is_torch_version(...)`,
    `TORCH_GE_1_11`, `"use_reentrant" in signature(checkpoint).parameters`), and the fallback
    branch of code that passes the keyword in its other branch (`if`/`else`, an early
    `return`, `try: ... except TypeError:`).

    ## Why is this bad?
    Activation checkpointing trades compute for memory during *training*: it drops the
    activations of a segment and recomputes them in the backward pass. Under no-grad no
    activations are kept anyway, so the wrapper only adds overhead; worse, code that
    meant to train through the segment silently gets no gradients from it.

    Without an explicit `use_reentrant`, PyTorch warns on every call and picks the legacy
    reentrant variant, which does not support keyword arguments, ignores inputs that do not
    require grad, and is slated to stop being the default.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    with torch.no_grad():
        h = checkpoint(block, x)
    ```

    Use instead:
    ```python
    h = checkpoint(block, x, use_reentrant=False)  # under autograd, in training
    with torch.no_grad():
        h = block(x)  # evaluation: call the block directly
    ```

    ## How to fix
    Call the block directly where gradients are off, and only checkpoint in code that
    trains. Pass `use_reentrant=False` (or `True`, to keep the legacy behaviour) explicitly.
    """

    code = "MEM011"
    name = "checkpoint-under-no-grad"
    message = NO_GRAD_MESSAGE
    # Only torch's checkpoint counts, and every way of naming it mentions one of these.
    triggers = ("utils.checkpoint", "import checkpoint")
    code_gate = ("call:checkpoint", "call:checkpoint_sequential")
    valid = (
        Valid(
            """
            from torch.utils.checkpoint import checkpoint
            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=False)
            """
        ),
        Valid(
            # A project's own `checkpoint()` that saves training state is not torch's.
            """
            import torch
            from trainer.io import checkpoint
            with torch.no_grad():
                checkpoint(model, "ckpt.pt")
            """
        ),
        Valid(
            """
            import torch.utils.checkpoint as cp
            def forward(self, x, **kw):
                return cp.checkpoint(self.block, x, **kw)
            """
        ),
        Valid(
            """
            import torch
            from torch.utils import checkpoint
            checkpoint.checkpoint_sequential(layers, 2, x, use_reentrant=False)
            """
        ),
        Valid(
            # The keyword only where the installed torch accepts it.
            """
            import torch
            from torch.utils.checkpoint import checkpoint
            NEW_TORCH = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (1, 11)
            CKPT_KWARGS = {"use_reentrant": False} if NEW_TORCH else {}

            def run(block, x):
                return checkpoint(block, x, **CKPT_KWARGS)

            def run_branches(block, x):
                if NEW_TORCH:
                    return checkpoint(block, x, use_reentrant=False)
                else:
                    return checkpoint(block, x)

            def run_early_return(block, x):
                if SUPPORTS_KWARG:
                    return checkpoint(block, x, use_reentrant=False)
                return checkpoint(block, x)

            def run_try(block, x):
                try:
                    return checkpoint(block, x, use_reentrant=False)
                except TypeError:
                    return checkpoint(block, x)
            """
        ),
        Valid(
            """
            import torch
            import torch.utils.checkpoint as cp
            from packaging import version
            def run(block, x):
                if version.parse(torch.__version__) < version.parse("1.11"):
                    return cp.checkpoint(block, x)
                return cp.checkpoint(block, x, use_reentrant=True)
            """
        ),
        Valid(
            # Run without grad by the one caller the file shows, but checkpointed only when
            # the module trains or autograd is on: the training loop calls it from elsewhere.
            """
            import torch
            from torch.utils.checkpoint import checkpoint

            def run_blocks(blocks, x, use_checkpoint):
                for block in blocks:
                    if use_checkpoint and block.training:
                        x = checkpoint(block, x, use_reentrant=False)
                    else:
                        x = block(x)
                return x

            def run(block, x):
                return checkpoint(block, x, use_reentrant=False) if (
                    torch.is_grad_enabled()) else block(x)

            @torch.no_grad()
            def encode(blocks, x):
                return run(blocks[0], run_blocks(blocks, x, True))
            """
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            from torch.utils.checkpoint import checkpoint
            with torch.no_grad():
                h = checkpoint(block, x, use_reentrant=False)
            """,
            lines=(5,),
        ),
        Invalid(
            """
            import torch
            import torch.utils.checkpoint as cp

            @torch.inference_mode()
            def encode(x):
                return cp.checkpoint(block, x)
            """,
            lines=(7, 7),
        ),
        Invalid(
            """
            import torch
            def forward(self, x):
                return torch.utils.checkpoint.checkpoint(self.block, x)
            """,
            lines=(4,),
        ),
        Invalid(
            # A branch about training, not about the torch version; the explicit call before
            # it is no alternative.
            """
            from torch.utils.checkpoint import checkpoint
            def forward(self, x):
                x = checkpoint(self.stem, x, use_reentrant=False)
                if self.grad_ckpt and self.training:
                    return checkpoint(self.body, x)
                return self.body(x)
            """,
            lines=(6,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.analysis.imports.qualified_name(node.func)
        if qualified not in CHECKPOINT_FUNCTIONS:
            return
        if self.context.analysis.grad.no_grad_at(node) and not self._training_only(node):
            self.report(node, NO_GRAD_MESSAGE)
        if not self._passes_reentrant(node) and not self._version_fallback(node):
            self.report(node, REENTRANT_MESSAGE)

    def _training_only(self, call: cst.Call) -> bool:
        """The call sits in the branch of a test that the module trains (``if
        self.gradient_checkpointing and self.training:``) or that autograd is on
        (``torch.is_grad_enabled()``): it never runs where the callers turned autograd off,
        only where they train (the grad mode inferred from a module's known callers misses
        the training loop that calls it through an attribute or a parameter)."""
        tree = self.context.analysis.tree
        child: cst.CSTNode = call
        for anc in tree.ancestors(call):
            if isinstance(anc, cst.If | cst.IfExp) and child is anc.body and any(
                    _means_training(self.context, part) for part in _conjuncts(anc.test)):
                return True
            child = anc
        return False

    def _passes_reentrant(self, call: cst.Call) -> bool:
        """`use_reentrant=` is given, or may be (`**kwargs`)."""
        return has_keyword(call, "use_reentrant") or has_star_args(call)

    def _version_fallback(self, call: cst.Call) -> bool:
        """The call is the old-torch branch of version-aware code, which cannot pass the
        keyword (torch < 1.11 rejects it): under a test about the torch version, or the
        alternative to a branch that passes it (`if`/`else`, early `return`, `try`/`except`).
        """
        tree = self.context.analysis.tree
        if any(mentions(tree, test, VERSION_WORD) for test in guarding_tests(tree, call)):
            return True
        imports = self.context.analysis.imports
        for alt in alternatives(tree, call):
            for n in [alt, *tree.walk(alt)]:
                if (
                    isinstance(n, cst.Call)
                    and imports.qualified_name(n.func) in CHECKPOINT_FUNCTIONS
                    and self._passes_reentrant(n)
                ):
                    return True
        return False


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and b and c`` -> its operands; any other test -> itself."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _means_training(context: FileContext, test: cst.BaseExpression) -> bool:
    """``self.training``, ``model.training``, ``torch.is_grad_enabled()``."""
    if isinstance(test, cst.Attribute):
        return test.attr.value == "training"
    return isinstance(test, cst.Call) and context.analysis.imports.qualified_name(
        test.func) == "torch.is_grad_enabled"

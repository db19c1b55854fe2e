"""MEM011 checkpoint-under-no-grad."""

from __future__ import annotations

import libcst as cst

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


class CheckpointUnderNoGrad(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` (and `checkpoint_sequential`) called where
    autograd is off: inside `torch.no_grad()`, `torch.inference_mode()`,
    `torch.set_grad_enabled(False)` or a function decorated with one of them. It also flags a
    `checkpoint` call that leaves `use_reentrant` to its default.

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
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.analysis.imports.qualified_name(node.func)
        if qualified not in CHECKPOINT_FUNCTIONS:
            return
        if self.context.analysis.grad.no_grad_at(node):
            self.report(node, NO_GRAD_MESSAGE)
        if not has_keyword(node, "use_reentrant") and not has_star_args(node):
            self.report(node, REENTRANT_MESSAGE)

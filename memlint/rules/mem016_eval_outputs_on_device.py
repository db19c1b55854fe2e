"""MEM016 eval-outputs-on-device (opt-in): evaluation outputs piled up in accelerator memory."""

from __future__ import annotations

import libcst as cst

from memlint.analysis.calls import method_name
from memlint.analysis.evaluation import Collection
from memlint.analysis.imports import dotted_name
from memlint.rules.base import Invalid, Valid
from memlint.rules.eval_collections import EvalCollectionRule
from memlint.rules.mem005_eval_outputs_retained import EvalOutputsRetained

# Methods after which the value lives on the host (or is a Python object).
_TO_HOST = frozenset({"cpu", "item", "tolist", "numpy"})
# Methods that keep the value where it is, so the search goes on through their receiver.
_KEEP_DEVICE = frozenset({
    "detach", "argmax", "argmin", "softmax", "log_softmax", "sigmoid", "float", "half", "long",
    "int", "view", "reshape", "squeeze", "unsqueeze", "flatten", "clone", "contiguous", "max",
    "min", "mean", "sum", "exp", "topk", "permute", "transpose",
})


# Reductions that, given no dimension, collapse the whole tensor into one number: what stays
# on the device per batch is a scalar (`losses.append(model(x).mean())`), not an output.
_FULL_REDUCTIONS = frozenset({
    "mean", "sum", "max", "min", "amax", "amin", "norm", "std", "var", "prod", "nansum",
    "nanmean", "logsumexp", "all", "any",
})


def _reduces_to_scalar(call: cst.Call, as_function: bool) -> bool:
    """``x.mean()``, ``torch.sum(x)``: a reduction given no dimension (positional after the
    tensor, or ``dim=``/``axis=``)."""
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return False
    if len(positional) > (1 if as_function else 0):
        return False
    return not any(a.keyword is not None and a.keyword.value in ("dim", "axis")
                   for a in call.args)


# torch functions whose result stays where their first argument is: `torch.stack(samples)`,
# `torch.softmax(logits, 1)`.
_KEEP_DEVICE_FUNCTIONS = frozenset({
    "stack", "cat", "concat", "vstack", "hstack", "mean", "sum", "softmax", "log_softmax",
    "sigmoid", "exp", "argmax", "squeeze", "unsqueeze", "flatten",
})


class EvalOutputsOnDevice(EvalCollectionRule):
    """
    ## What it does
    Flags model outputs that an evaluation or inference loop collects batch after batch into a
    list without moving them to the host: ``preds.append(model(x))`` under ``torch.no_grad()``.
    This is the opt-in companion of MEM005 (which reports collections that keep a graph).

    ## Why is this bad?
    Every stored output stays in accelerator memory until the loop ends, so memory grows with
    the size of the evaluation set. Large logits (language-model vocabularies, segmentation
    maps) collected over a full validation set are a classic out-of-memory at the end of the
    first epoch, while training itself fit.

    ## Example
    ```python
    model.eval()
    preds = []
    with torch.no_grad():
        for x, _ in val_loader:
            preds.append(model(x.cuda()))
    ```

    ## How to fix
    Move each output to the host as it is collected, or reduce it on the device first:
    ```python
    with torch.no_grad():
        for x, _ in val_loader:
            preds.append(model(x.cuda()).cpu())
    ```
    A value reduced to one number per batch (``model(x).mean()``, ``torch.sum(out)``, no
    dimension given) is not reported: what piles up is a scalar per batch.

    Device-resident accumulation is often deliberate (a fused metric computed once at the end,
    avoiding a synchronisation per batch), which is why this rule is off by default. It only
    runs on files that mention CUDA or a device (Lightning modules move batches with
    ``.to(self.device)`` and never name CUDA).
    """

    code = "MEM016"
    name = "eval-outputs-on-device"
    message = (
        "model output is collected across evaluation batches in device memory; move it to the "
        "host (`.cpu()`) or reduce it before storing"
    )
    default_enabled = False
    triggers = ("cuda", "device")
    # The same evaluation context MEM005 needs.
    trigger_pattern = EvalOutputsRetained.trigger_pattern
    # Every output it reports comes from a model call (`CallAnalysis.is_model_forward`).
    code_requires = (("fact:model-call",),)

    valid = (
        # A loop over models, not batches (one prompt through each text encoder): one
        # output per model, concatenated at once.
        Valid("""
            import torch
            class Backend:
                def __init__(self, pipe):
                    self.pipe = pipe
                    self.device = "cuda"
                def encode(self, prompts):
                    embeds = []
                    for prompt, tokenizer, text_encoder in zip(
                            prompts, self.pipe.tokenizers, self.pipe.text_encoders):
                        if isinstance(prompt, str):
                            prompt = [prompt]
                        ids = tokenizer(prompt).input_ids
                        hidden = text_encoder(ids.to(self.device))
                        embeds.append(hidden[0])
                    return torch.cat(embeds, dim=-1)
                def predict(self, prompts):
                    self.pipe.unet.eval()
                    with torch.no_grad():
                        return self.encode(prompts)
        """),
        Valid("""
            import torch
            def evaluate(model, val_loader, draws):
                model.eval()
                with torch.no_grad():
                    for x, _ in val_loader:
                        x = x.cuda(non_blocking=True)
                        samples = []  # one batch's Monte Carlo draws, made afresh
                        for _ in range(draws):
                            samples.append(model(x))
                        print(torch.stack(samples).mean(0).argmax(1).cpu())
        """),
        Valid("""
            import torch
            model.eval()
            preds = []
            with torch.no_grad():
                for x, _ in val_loader:
                    preds.append(model(x.cuda()).cpu())
                    scores.extend(model(x.cuda()).argmax(-1).tolist())
        """),
        # One number per batch stays on the device, not the batch's outputs.
        Valid("""
            import torch
            def evaluate(model, val_loader):
                model.eval()
                energies, norms = [], []
                with torch.no_grad():
                    for x, _ in val_loader:
                        out = model(x.cuda())
                        energies.append(out.sum())
                        norms.append(torch.norm(out))
                return torch.stack(energies), torch.stack(norms)
        """),
        Valid("""
            import torch
            correct = 0
            with torch.no_grad():
                for x, y in val_loader:
                    correct += (model(x.cuda()).argmax(-1) == y.cuda()).sum()
        """),
    )
    invalid = (
        Invalid("""
            import torch
            def evaluate(model, val_loader, draws):
                model.eval()
                outputs = []
                with torch.no_grad():
                    for x, _ in val_loader:
                        x = x.cuda(non_blocking=True)
                        samples = []
                        for _ in range(draws):
                            output, kl = model(x)
                            samples.append(output)
                        outputs.append(torch.stack(samples))
                return outputs
        """, lines=(13,)),
        Invalid(
            """
            import torch

            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                preds = []
                for x, _ in loader:
                    logits = model(x.cuda())
                    preds.append(logits.softmax(-1))
                return torch.cat(preds)
            """,
            lines=(10,),
        ),
        Invalid(
            # A Lightning module: the device is `self.device`, CUDA is never named.
            """
            import torch
            from torch.utils.data import DataLoader

            class EfficientAd(AnomalyModule):
                @torch.no_grad()
                def teacher_statistics(self, dataloader: DataLoader):
                    teacher_outputs = []
                    for batch in dataloader:
                        y = self.model.teacher(batch["image"].to(self.device))
                        teacher_outputs.append(y)
                    return teacher_outputs
            """,
            lines=(11,),
        ),
    )

    def check(self, found: Collection) -> None:
        if self.context.analysis.grad.grad_mode_at(found.site) == "on" and (
            self.context.analysis.graph.graph_state(found.value) is True
        ):
            return  # MEM005's finding: the graph is the bigger problem
        if self._device_model_output(found.value, found.site, depth=0):
            self.report(found.site)

    def _device_model_output(self, expr: cst.BaseExpression, site: cst.CSTNode,
                             depth: int) -> bool:
        """Is ``expr`` a model output (or a same-device view of one) not moved to the host?"""
        if depth > 8:
            return False
        calls = self.context.analysis.calls
        if isinstance(expr, (cst.List, cst.ListComp)) and isinstance(site, cst.AugAssign):
            inner: cst.BaseExpression | None = None
            if isinstance(expr, cst.ListComp):
                inner = expr.elt
            elif expr.elements:
                inner = expr.elements[0].value
            return inner is not None and self._device_model_output(inner, site, depth + 1)
        if isinstance(expr, cst.Call):
            qualified = self.context.analysis.imports.qualified_name(expr.func) or ""
            if (qualified.startswith("torch.") and qualified.count(".") == 1
                    and qualified[len("torch."):] in _FULL_REDUCTIONS
                    and _reduces_to_scalar(expr, as_function=True)):
                return False  # `torch.mean(out)`: one number per batch
            if (method_name(expr) in _FULL_REDUCTIONS and isinstance(expr.func, cst.Attribute)
                    and not qualified.startswith("torch.")
                    and _reduces_to_scalar(expr, as_function=False)):
                return False  # `model(x).sum()`: one number per batch
            if (qualified.startswith("torch.") and expr.args
                    and qualified.rsplit(".", 1)[-1] in _KEEP_DEVICE_FUNCTIONS):
                first = expr.args[0].value
                if isinstance(first, cst.Name) and self._list_of_outputs(first.value, site,
                                                                         depth):
                    return True
                return self._device_model_output(first, site, depth + 1)
            method = method_name(expr)
            if method in _TO_HOST:
                return False
            if method == "to":
                return False  # a device or dtype we cannot judge: stay silent
            if method in _KEEP_DEVICE and isinstance(expr.func, cst.Attribute):
                return self._device_model_output(expr.func.value, site, depth + 1)
            return calls.is_model_forward(expr)
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return self._device_model_output(expr.value, site, depth + 1)
        if isinstance(expr, cst.Name):
            return self._name_is_model_output(expr.value, site, depth)
        return False

    def _list_of_outputs(self, name: str, site: cst.CSTNode, depth: int) -> bool:
        """Earlier in the loop body, ``name`` was filled with model outputs
        (``samples.append(model(x))`` in an inner loop over Monte Carlo draws)."""
        tree = self.context.analysis.tree
        loops = tree.enclosing_loops(site)
        if not loops:
            return False
        for node in tree.walk(loops[0].body):
            if node is site:
                break
            if (isinstance(node, cst.Call) and method_name(node) == "append"
                    and len(node.args) == 1 and isinstance(node.func, cst.Attribute)
                    and dotted_name(node.func.value) == name
                    and self._device_model_output(node.args[0].value, node, depth + 1)):
                return True
        return False

    def _name_is_model_output(self, name: str, site: cst.CSTNode, depth: int) -> bool:
        """The latest assignment to ``name`` in the loop body binds a model output."""
        tree = self.context.analysis.tree
        loops = tree.enclosing_loops(site)
        root: cst.CSTNode | None = loops[0].body if loops else None
        if root is None:
            return False
        value: cst.BaseExpression | None = None
        binding: cst.CSTNode = site
        for node in tree.walk(root):
            if node is site:
                break
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if dotted_name(target) == name:
                    value, binding = node.value, node
                elif (isinstance(target, cst.Tuple) and isinstance(node.value, cst.Call)
                      and any(dotted_name(e.value) == name for e in target.elements)
                      and self.context.analysis.calls.is_model_forward(node.value)):
                    value, binding = node.value, node  # `output, kl = model(x)`: a piece
        # Earlier bindings of the value's own names are searched from the binding on
        # (`output = model(x)` ... `output = torch.softmax(output, 1)`).
        return value is not None and self._device_model_output(value, binding, depth + 1)

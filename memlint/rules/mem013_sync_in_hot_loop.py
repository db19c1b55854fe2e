"""MEM013 sync-in-hot-loop."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from memlint.analysis.calls import last_name, method_name, receiver
from memlint.analysis.dataflow import names_in
from memlint.analysis.steps import StepAnalysis
from memlint.rules.base import Invalid, Rule, Valid

SYNC_METHODS = frozenset({"item", "cpu", "tolist"})
# Checks that must see every step's value: NaN guards and early stopping.
VALUE_CHECKS = frozenset({"isnan", "isinf", "isfinite", "is_nonzero"})
# `if step % log_every == 0`, `if should_log:`, `if i == print_freq - 1`.
INTERVAL_NAME = re.compile(r"log|interval|every|freq|period|verbose|debug|display", re.IGNORECASE)
# Reductions to one truth value: `if mask.any():` and `if torch.equal(a, b):` read a tensor's
# value on the host (`Tensor.__bool__`) just as `.item()` does.
TRUTH_REDUCTIONS = frozenset({"any", "all", "equal", "allclose"})
# `model.cpu()`, `self.net.cpu()`, `netG.cpu()`, `ema_model.cpu()`, `model.module.cpu()`.
MODULE_NAME = re.compile(
    r"^_*(?:model|net|network|module|generator|discriminator|encoder|decoder|backbone"
    r"|classifier|critic|actor|policy|teacher|student|unet|vae|ema)s?$"
    r"|model$|_net$|_module$|^net[A-Z_\d]|^ema_",
    re.IGNORECASE,
)
# Methods only a module has: `model.cpu().state_dict()`, `net.cpu().eval()`.
MODULE_METHODS = frozenset({
    "state_dict", "load_state_dict", "eval", "train", "parameters", "named_parameters",
    "buffers", "named_buffers", "modules", "named_modules", "children", "requires_grad_",
})

MESSAGES = {
    "item": "`.item()` every training step waits for the GPU; accumulate `loss.detach()` "
    "and call `.item()` once per logging interval",
    "cpu": "`.cpu()` every training step waits for the GPU; copy to the host once per "
    "logging interval",
    "tolist": "`.tolist()` every training step waits for the GPU; convert once per "
    "logging interval",
    "print": "printing a tensor every training step waits for the GPU; print at a logging "
    "interval",
    "float": "`float(tensor)` every training step waits for the GPU (it is `.item()`); "
    "accumulate `loss.detach()` and convert once per logging interval",
}


class SyncInHotLoop(Rule):
    """
    ## What it does
    Flags host synchronisations that run on every training step: `.item()`, `.cpu()`,
    `.tolist()`, `float(tensor)` (of a value that carries a graph, such as the loss) and
    `print(tensor)` in the innermost training loop (or in a step function
    that loop calls, a helper such a step function calls outside its own loops, as
    detectron2's `run_step` writes its metrics through `self._write_metrics(loss_dict)`, or
    the closure its optimizer step runs: `optimizer.step(closure)`),
    unless they sit under a logging-interval condition such as `if step % log_every == 0`
    (a test that picks a logging backend by name, `if args.logger == "tensorboard"`, is
    none: it holds on every step).
    A loop that trains only through same-file helpers holding their own batch loop, a few
    calls deep (`train()` -> `self.train_epoch()` ->
    `self.play_steps()`), runs once per epoch and is not the innermost training loop; a step
    function (one that runs backward or the optimizer step itself, outside any loop of its
    own) is part of the step, and what it calls is not searched for a batch loop. A loop
    over the parts of one step (`for loss in losses: loss.backward()`, `for opt in
    optimizers.values(): opt.step()`) is no batch loop either. A mode
    switch (`self.model.train()`, `net.eval()`, `model.train(False)`) is no such helper,
    even in a file whose own `def train` holds the loop (`model.train(fold)`, given data,
    still is). A step
    function's sync behind an early return on a parameter being `None` (`if eval_res is
    None: return`) runs per step only when the step loop passes that argument, and a
    helper's sync only when some step loop calls it outside a logging interval (`if step %
    every == 0: self.evaluate()` runs it now and then). Lightning's and the Hugging Face
    `Trainer`'s `training_step` methods, and `train_on_batch` methods (the Keras-style hook
    DeepPavlov's trainer and many wrappers call), run once per batch and are checked as a
    step function. A loop that steps the optimizer itself around a counted gradient-accumulation
    loop (`for _ in range(accum):` with only backward passes in it, or a loop over the
    micro-batches of its own item: `for i, mb in enumerate(micro_batches):`) runs once per
    step too, like the loop inside it. A loop over the parts of one step's loss (`for name in
    criterion_names:`, `for k, v in losses.items():`) runs every step: a sync in it is
    checked as one in the step. Reading a tensor the step already copied to the host
    (`preds.cpu()` then `preds.detach().cpu()`), or a batch value no copy moved (the labels
    of `for x, y in loader:` turned into a list), is no sync; a chain
    (`out.cpu().numpy().tolist()`) is reported once.

    ## Why is this bad?
    CUDA runs asynchronously: the Python loop normally queues the next step's kernels
    while the GPU is still busy. Reading a value on the host makes the CPU wait until
    every queued kernel has finished, so the queue drains every step and the GPU idles
    while Python prepares the next batch.

    Checks that must see every value (`torch.isnan(loss)`, `math.isfinite(loss.item())`,
    early stopping on the step's loss) are not flagged: they are syncs on purpose, in an
    `if`, `while` or conditional-expression test or an `assert`. Neither is a sync in a
    branch of an `if` (or conditional expression) whose test already synced: the GPU is idle
    there. A test syncs when it calls `.item()`, `.cpu()`, `.tolist()` or a value check, or
    reduces a tensor to one truth value (`if mask.any():`, `if (x > 0).all():`,
    `if torch.equal(a, b):`, a comparison of a tensor that carries a graph).

    A value the step already copied to the host (`preds = logits.argmax(1).cpu()`, then
    `preds.detach().cpu()`) is not read from the GPU again and is not flagged.

    `.cpu()` on a model (`model.cpu()`, `self.net.cpu()` as a statement, `netG.cpu().eval()`,
    `model.cpu().state_dict()`) moves parameters to the host to offload or save them; it is
    not a read of a step's value and is not flagged.

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
    triggers = (".item(", ".cpu(", ".tolist(", "print(", "float(")
    # Only a training step (backward or an optimizer step) is a hot loop here, or a
    # framework's per-batch hook (`training_step`, `train_on_batch`).
    requires = (("backward(", "step(", "train_on_batch("),)
    # Findings are in training code, a loop or function that runs backward or an optimizer
    # step (memlint.analysis.loops: a step on a receiver named like an optimizer or a
    # scaler, not a scheduler's or an environment's), so the code calls one of them, or in
    # a framework's per-batch hook.
    code_gate = ("call:backward", "call:manual_backward", "fact:optimizer-step",
                 "fact:train-hook")
    valid = (
        # An inner loop whose backward is on an index of one output (`out[0, k]`), not on a
        # loss its header binds, is a loop of its own: the loop around it is no single step.
        Valid(
            """
            def deepfool(model, x, max_iter, classes):
                out = model(x)
                for i in range(max_iter):
                    out[0, 0].backward(retain_graph=True)
                    first = x.grad.data.cpu().numpy()
                    for k in range(1, classes):
                        out[0, k].backward(retain_graph=True)
                return first
            """
        ),
        # `model.train(fold)` given data is the file's own training method (each call runs a
        # whole training), not a mode switch: the loop around it runs once per fold.
        Valid(
            """
            class Trainer:
                def train(self, loader):
                    for batch in loader:
                        loss = self.model(batch)
                        loss.backward()
                        self.optimizer.step()
            def cross_validate(model, folds):
                for fold in folds:
                    model.train(fold)
                    print(model.score.item())
            """
        ),
        # A helper the step loop runs only every few steps (an evaluation during training)
        # syncs now and then, not per step.
        Valid(
            """
            class Trainer:
                def eval_model(self, data):
                    preds = self.predict(data)
                    return self.score(preds.cpu())
                def train(self, loader, every):
                    for step, batch in enumerate(loader):
                        self.model.train()
                        loss = self.model(batch)
                        loss.backward()
                        self.optimizer.step()
                        if step % every == 0:
                            self.eval_model(batch)
            """
        ),
        # The step helper reads the metric only after returning when it was not given, and
        # the batch loop gives none: once per epoch, from the evaluation's caller.
        Valid(
            """
            class Trainer:
                def update_lr(self, eval_res=None):
                    if self.kind == "plateau":
                        if eval_res is None:
                            return
                        self.scheduler.step(eval_res["loss"].item())
                    else:
                        self.scheduler.step()
                def train(self, loader, epochs):
                    for epoch in range(epochs):
                        for x, y in loader:
                            loss = self.model(x, y)
                            loss.backward()
                            self.optimizer.step()
                            self.update_lr()
                        self.update_lr(self.evaluate())
            """
        ),
        # The epoch loop around a helper whose own helper holds the batch loop: per epoch.
        Valid(
            """
            class Agent:
                def play_steps(self):
                    losses = []
                    for _ in range(self.steps):
                        loss = self.update()
                        loss.backward()
                        self.optimizer.step()
                        losses.append(loss.detach())
                    return losses
                def train_epoch(self):
                    return self.play_steps()
                def train(self):
                    while True:
                        losses = self.train_epoch()
                        self.writer.add_scalar("loss", torch.stack(losses).mean().item())
            """
        ),
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
        Valid(
            # Offloading a module is no read of the step's value.
            """
            for x, y in loader:
                loss = criterion(student(x), y)
                loss.backward()
                optimizer.step()
                teacher.cpu()
                self.ema_model = self.ema_model.cpu()
                snapshot = model.cpu().state_dict()
                model.cuda()
            """
        ),
        Valid(
            # Tests that already read a tensor: the GPU is idle in their branches.
            """
            import torch
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                if (out.abs() > 1e4).any():
                    print("overflow in", out.abs().max().item())
                if bad.any().item():
                    skipped += bad.sum().item()
                if torch.all(finite):
                    last = loss.item()
                ratio = hits.sum().item() if hits.any() else 0.0
                while not torch.isfinite(scale).all():
                    scale = scale / 2
                assert not torch.isnan(out).any(), f"NaN in {out.isnan().sum().item()} outputs"
            """
        ),
        Valid(
            # NumPy arrays live on the host.
            """
            import numpy as np
            for batch in loader:
                masks = np.transpose(batch.masks()).tolist()
                loss = criterion(model(batch.x), masks)
                loss.backward()
                optimizer.step()
            """
        ),
    )
    invalid = (
        # A helper the step function calls: it runs on every step too.
        Invalid(
            """
            import torch
            class Trainer:
                def train(self, iters):
                    for _ in range(iters):
                        self.run_step()
                def run_step(self):
                    loss_dict = self.model(next(self.data))
                    self.optimizer.zero_grad()
                    sum(loss_dict.values()).backward()
                    self._write_metrics(loss_dict)
                    self.optimizer.step()
                def _write_metrics(self, loss_dict):
                    self.storage.put({k: v.detach().cpu().item() for k, v in loss_dict.items()})
            """,
            lines=(14,),
        ),
        Invalid(
            # The Keras-style per-batch hook a framework's trainer calls (DeepPavlov's): its
            # sync runs every step, though the step itself is the base class's.
            """
            import torch
            class Classifier(TorchModel):
                def train_on_batch(self, texts, labels):
                    inputs = torch.from_numpy(texts).to(self.device)
                    loss = self.criterion(self.model(inputs), labels)
                    self._make_step(loss)
                    return loss.item()
            """,
            lines=(8,),
        ),
        Invalid(
            # One optimizer step per batch over its micro-batches: the clipped norm's `.item()`
            # after the micro-batch loop runs every step, as the loss's inside it does.
            """
            import torch
            def fit(model, loader, optimizer):
                for batch in loader:
                    step_loss = 0.0
                    for i, micro in enumerate(batch.split(4)):
                        loss = model(micro).mean()
                        loss.backward()
                        step_loss += loss.item()
                    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            lines=(9, 10),
        ),
        Invalid(
            # A loop over the parts of one step's loss runs every step: each part's `.item()`
            # waits, in the step helper as in the batch loop.
            """
            class Driver:
                def train_one_iteration(self, batch):
                    loss = {}
                    total = 0
                    for name in self.criterion_names:
                        loss[name] = self.criterion[name](self.model(batch), batch)
                        total = total + loss[name]
                    total.backward()
                    self.optimizer.step()
                    for name in self.criterion_names:
                        self.meters[name].update(loss[name].item())

                def train(self, loader):
                    for batch in loader:
                        self.train_one_iteration(batch)
                        for key, value in self.loss_parts.items():
                            self.log(key, value.item())
            """,
            lines=(12, 18),
        ),
        Invalid(
            # One sync per chain: `.cpu()` waits, the conversions after it do not. The
            # labels of the batch are never moved, so their `.cpu().numpy()` waits for nothing.
            """
            def encode(labels):
                return labels.cpu().numpy().tolist()

            def train(model, loader, optimizer, device):
                preds = []
                for x, y in loader:
                    x = x.to(device)
                    words = encode(y)
                    out = model(x, words)
                    loss = criterion(out, x)
                    loss.backward()
                    optimizer.step()
                    preds.append(out.argmax(1).cpu().numpy().tolist())
                return preds
            """,
            lines=(14,),
        ),
        # An update that runs backward over its list of losses and steps each optimizer in
        # a loop is still one step: the batch loop calling it syncs every step.
        Invalid(
            """
            class Algorithm:
                def update(self, sample):
                    losses = self.losses(sample)
                    for loss in losses:
                        self.scaler.scale(loss).backward()
                    for optimizer in self.optimizers.values():
                        self.scaler.step(optimizer)
                    return losses[0]
                def train(self, buffer):
                    for sample in buffer.batches():
                        loss = self.update(sample)
                        self.info["loss"] += loss.item()
            """,
            lines=(13,),
        ),
        # A framework's `training_step` runs every batch: its syncs are per step, unless
        # under a logging-interval condition.
        Invalid(
            """
            import lightning as L
            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    out = self.model(batch[0])
                    loss = self.loss(out, batch[1])
                    self.train_losses.append(loss.detach().cpu())
                    if batch_idx % self.log_every == 0:
                        print(loss.item())
                    return loss
            """,
            lines=(7,),
        ),
        # The batch loop passes what the helper's early return asks for: per step.
        Invalid(
            """
            class Trainer:
                def log_loss(self, loss=None):
                    if loss is None:
                        return
                    self.history.append(loss.item())
                def train(self, loader):
                    for x, y in loader:
                        loss = self.model(x, y)
                        loss.backward()
                        self.optimizer.step()
                        self.log_loss(loss)
            """,
            lines=(6,),
        ),
        # `self.model_s.train()` in a helper the batch loop calls is a mode switch, not the
        # file's `def train` holding the epoch loop.
        Invalid(
            """
            class Distiller:
                def train(self, loader, epochs):
                    return self.run_epochs(loader, epochs)
                def run_epochs(self, loader, epochs):
                    for epoch in range(epochs):
                        self.train_epoch(loader)
                def train_epoch(self, loader):
                    for batch in loader:
                        loss = self.model_s(batch).mean()
                        loss.backward()
                        self.optimizer.step()
                        self.log_and_resume(loss)
                def log_and_resume(self, loss):
                    self.writer.add_scalar("loss", loss.item())
                    self.model_s.train()
                def fit(self, graph, labels, steps):
                    for step in range(steps):
                        self.net.train()
                        loss = self.net(graph, labels)
                        loss.backward()
                        self.optimizer.step()
                        total += loss.item()
            """,
            lines=(15, 23),
        ),
        # A test that picks a logging backend by name is no interval: it holds every step.
        Invalid(
            """
            def fit(model, loader, optimizer, args, writer):
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    if args.logger == "tensorboard":
                        writer.add_scalar("loss", loss.item())
                    if args.report_to in ("wandb", "all"):
                        wandb.log({"loss": loss.item()})
            """,
            lines=(8, 10),
        ),
        # The file's `def train` holds the batch loop itself, and that loop switches the
        # model back to training mode after sampling (`self.model.train()`): a mode switch,
        # not a call of `train`, so the loop is still the per-step loop.
        Invalid(
            """
            class Trainer:
                def train(self, loader, epochs):
                    for epoch in range(epochs):
                        self.model.train()
                        for batch in loader:
                            loss = self.model(batch)
                            self.accelerator.backward(loss)
                            self.optimizer.step()
                            progress.set_postfix(loss=loss.item())
                            if step % self.sample_every == 0:
                                self.sample()
                                self.model.train()
            """,
            lines=(10,),
        ),
        # The batch loop of `def train` switches the model back with `self.model.train()`
        # after a validation pass: a mode switch, and in any case a function is no helper of
        # its own loop.
        Invalid(
            """
            class UNetTrainer:
                def train(self):
                    for batch in self.loaders["train"]:
                        loss = self.model(batch)
                        self.losses.update(loss.item())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                        if self.iteration % self.validate_every == 0:
                            self.model.eval()
                            self.validate()
                            self.model.train()
                def validate(self):
                    for batch in self.loaders["val"]:
                        self.model(batch)
            """,
            lines=(6,),
        ),
        # The second `.cpu()` reads a tensor the step already copied to the host.
        Invalid(
            """
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                preds = torch.argmax(out, 1).cpu()
                all_preds.extend(preds.detach().cpu())
            """,
            lines=(7,),
        ),
        # Gradient accumulation: the outer loop steps the optimizer once per iteration after
        # a counted loop of micro-batch backward passes, so both loops run per step.
        Invalid(
            """
            class Trainer:
                def train(self):
                    while self.step < self.train_num_steps:
                        for _ in range(self.grad_accum):
                            loss = self.model(next(self.dl).cuda())
                            (loss / self.grad_accum).backward()
                            self.running += loss.item()
                        log = {"loss": loss.item()}
                        self.opt.step()
                        self.opt.zero_grad()
                        self.step += 1
            """,
            lines=(8, 9),
        ),
        # A step function reached from the batch loop does not make it an epoch loop, even
        # when something it calls leads back to the function holding the epoch loop.
        Invalid(
            """
            class Brain:
                def fit_batch(self, batch):
                    loss = self.compute(batch)
                    loss.backward()
                    self.optimizer.step()
                    self.on_fit_batch_end()
                    return loss.detach()
                def on_fit_batch_end(self):
                    self.fit()
                def fit(self):
                    for epoch in range(3):
                        self._fit_train()
                def _fit_train(self):
                    for batch in self.loader:
                        loss = self.fit_batch(batch)
                        print(loss.item())
            """,
            lines=(17,),
        ),
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
        # The closure an L-BFGS step runs (at least once per step).
        Invalid(
            """
            for epoch in range(epochs):
                def closure():
                    optimizer.zero_grad()
                    loss = criterion(model(X), y)
                    loss.backward()
                    history.append(loss.item())
                    return loss
                optimizer.step(closure)
            """,
            lines=(7,),
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
        Invalid(
            # `float(loss)` reads the value on the host just as `.item()` does.
            """
            for x, y in loader:
                output = model(x, targets=y)
                losses.append(float(output["loss"]))
                optimizer.zero_grad()
                output["loss"].backward()
                optimizer.step()
                total += float(len(x))
            """,
            lines=(4,),
        ),
        Invalid(
            # Tensors, not modules; a test that reads nothing from the GPU excuses nothing.
            """
            for x, y in loader:
                logits = model(x)
                loss = criterion(logits, y)
                loss.backward()
                optimizer.step()
                preds = logits.argmax(1).cpu()
                features = self.encoder(x).cpu()
                if use_wandb:
                    wandb.log({"loss": loss.item()})
            """,
            lines=(7, 8, 10),
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
        if loop is None and not self._steps.in_step_helper(node, self._deliberate):
            return
        if self._deliberate(node, loop):
            return
        self.report(node, MESSAGES[kind])

    def _sync_kind(self, call: cst.Call) -> str | None:
        method = method_name(call)
        if method in SYNC_METHODS and not call.args:
            if method == "cpu" and self._moves_module(call):
                return None
            if self._numpy_value(call):
                return None
            recv = receiver(call)
            dataflow = self.context.analysis.dataflow
            if recv is not None and dataflow.copied_to_host(recv, call):
                return None  # `preds = out.argmax(1).cpu()` ... `preds.cpu()`: already there
            root = recv
            while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute):
                root = root.func.value  # `labels.cpu().numpy()` -> `labels`
            if (isinstance(root, cst.Name) and not self._computed_before(root.value, call)
                    and dataflow.batch_origins(root)):
                return None  # labels of a loader batch that no copy moved: on the host
            return method
        if (isinstance(call.func, cst.Name) and call.func.value == "float"
                and len(call.args) == 1 and not call.args[0].star
                and self.context.analysis.graph.carries_graph(call.args[0].value)):
            return "float"  # `float(loss)`: `Tensor.__float__` is `.item()`
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

    def _computed_before(self, name: str, call: cst.Call) -> bool:
        """Is ``name`` assigned in the function before ``call`` (a value computed there,
        not the batch a loop or a caller hands in)?"""
        tree = self.context.analysis.tree
        scope = tree.enclosing_function(call) or self.context.module
        for node in tree.walk(scope):
            if node is call:
                return False
            if isinstance(node, cst.Assign | cst.AugAssign | cst.AnnAssign):
                targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                           else [node.target])
                if any(name in names_in(t) for t in targets):
                    return True
        return False

    def _numpy_value(self, call: cst.Call) -> bool:
        """`np.transpose(rows).tolist()`: the receiver is what a NumPy function returns, an
        array on the host, so nothing waits for the GPU."""
        recv = receiver(call)
        if not isinstance(recv, cst.Call):
            return False
        qualified = self.context.analysis.imports.qualified_name(recv.func) or ""
        return qualified.startswith("numpy.")

    def _moves_module(self, call: cst.Call) -> bool:
        """`.cpu()` on an nn.Module: a statement of its own (a tensor's `.cpu()` would be
        thrown away), chained into a module-only method, or called on a module's name."""
        tree = self.context.analysis.tree
        parent = tree.parent(call)
        if isinstance(parent, cst.Expr):
            return True
        if isinstance(parent, cst.Attribute) and parent.attr.value in MODULE_METHODS:
            return True
        recv = receiver(call)
        name = None if recv is None else last_name(recv)
        return name is not None and (
            name in self.context.analysis.calls.module_instances
            or MODULE_NAME.search(name) is not None
        )

    def _outer_call_reports(self, call: cst.Call) -> bool:
        """In `x.cpu().tolist()`, `x.cpu().numpy().tolist()` only the outermost sync of the
        chain is reported."""
        tree = self.context.analysis.tree
        current = call
        while True:
            parent = tree.parent(current)
            if not isinstance(parent, cst.Attribute) or parent.value is not current:
                return False
            outer = tree.parent(parent)
            if not isinstance(outer, cst.Call):
                return False
            if self._sync_kind(outer) is not None:
                return True
            current = outer

    def _deliberate(self, node: cst.CSTNode, loop: cst.CSTNode | None) -> bool:
        """Gated by a logging interval, or a value check that must see every step."""
        tree = self.context.analysis.tree
        child = node
        for anc in tree.ancestors(node):
            if anc is loop or isinstance(anc, cst.FunctionDef):
                return False
            if isinstance(anc, cst.Call) and last_name(anc.func) in VALUE_CHECKS:
                return True
            if isinstance(anc, cst.If | cst.IfExp | cst.While) and child is anc.test:
                return True  # the step's value decides control flow
            if isinstance(anc, cst.Assert):
                return True
            if (
                isinstance(anc, cst.If | cst.IfExp)
                and child is anc.body
                and self._interval_test(anc.test)
            ):
                return True
            if (
                isinstance(anc, cst.If | cst.IfExp)
                and child is not anc.test
                and self._syncs(anc.test)
            ):
                return True  # the test already waited for the GPU; either branch is free
            child = anc
        return False

    def _syncs(self, test: cst.BaseExpression) -> bool:
        """Evaluating ``test`` reads a tensor on the host."""
        graph = self.context.analysis.graph
        for n in [test, *self.context.analysis.tree.walk(test)]:
            if isinstance(n, cst.Call) and (
                last_name(n.func) in VALUE_CHECKS
                or method_name(n) in SYNC_METHODS
                or self._truth_reduction(n)
            ):
                return True
            if isinstance(n, cst.Comparison) and any(
                graph.carries_graph(v) for v in [n.left, *(c.comparator for c in n.comparisons)]
            ):
                return True
        return False

    def _truth_reduction(self, call: cst.Call) -> bool:
        """`mask.any()`, `torch.all(x)`, `a.equal(b)`: not the builtins `any()` / `all()`."""
        if isinstance(call.func, cst.Attribute):
            return call.func.attr.value in TRUTH_REDUCTIONS
        qualified = self.context.analysis.imports.qualified_name(call.func)
        return qualified is not None and qualified.startswith("torch.") and (
            qualified.rsplit(".", 1)[-1] in TRUTH_REDUCTIONS
        )

    def _interval_test(self, test: cst.BaseExpression) -> bool:
        nodes = [test, *self.context.analysis.tree.walk(test)]
        # `self.logger == "tensorboard"`, `args.report_to in ("wandb", "all")`: a setting
        # that picks a logging backend holds on every step, whatever it is called.
        tree = self.context.analysis.tree
        chosen = {
            id(inner) for n in nodes if isinstance(n, cst.Comparison)
            and any(_names_text(c.comparator) for c in n.comparisons)
            for side in (n.left, *(c.comparator for c in n.comparisons))
            for inner in (side, *tree.walk(side))
        }
        for n in nodes:
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo):
                return True
            if id(n) in chosen:
                continue
            if isinstance(n, cst.Name) and INTERVAL_NAME.search(n.value):
                return True
            if isinstance(n, cst.Attribute) and INTERVAL_NAME.search(n.attr.value):
                return True
        return False


def _names_text(expr: cst.BaseExpression) -> bool:
    """A string literal, or a tuple, list or set of them: a setting's named choice."""
    if isinstance(expr, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString):
        return True
    if isinstance(expr, cst.Tuple | cst.List | cst.Set):
        return bool(expr.elements) and all(
            isinstance(e.value, cst.SimpleString) for e in expr.elements)
    return False

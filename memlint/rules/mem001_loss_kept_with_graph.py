"""MEM001 loss-kept-with-graph: a graph-carrying tensor is kept beyond its training iteration."""

from __future__ import annotations

import re

import libcst as cst

from memlint.analysis.graph import Scope
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop, TreeIndex, class_methods
from memlint.diagnostics import FixSafety
from memlint.rules.base import Fix, Invalid, Rule, Valid
from memlint.vocabulary import JOINING_FUNCTION_NAMES

_STORE_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add", "update"})
# Classes whose `update(value, n)` keeps a running sum of `value`: `AverageMeter`,
# `AverageValueMeter`, `RunningAverage` (not metrics objects, which may detach inside).
_METER_CLASS = re.compile(r"(?:Meter|Averager|RunningAverage|RunningMean)$")
_ACCUMULATING_OPS = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign)


def _self_attribute(name: str | None) -> bool:
    return name is not None and name.startswith("self.")


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation):
        return [*_operands(expr.left), *_operands(expr.right)]
    return [expr]


_JOINS = frozenset(f"torch.{name}" for name in JOINING_FUNCTION_NAMES)


def _reads(expr: cst.BaseExpression, container: str) -> bool:
    """``expr`` reads the running value back: ``totals[k]`` or ``totals.get(k, 0)``."""
    if isinstance(expr, cst.Subscript):
        return dotted_name(expr.value) == container
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value == "get" and dotted_name(expr.func.value) == container
    return False


def _elementwise_terms(
    expr: cst.BaseExpression, name: str,
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]] | None:
    """``[s + l for s, l in zip(name, losses)]``: a list of running totals rebuilt from itself
    and the sequences zipped beside it; the element's terms drawn from those sequences (``l``,
    the new terms, where a fix detaches them) are returned beside the sequence each is drawn
    from (``losses``, whose graph decides). None for any other value."""
    if not (isinstance(expr, cst.ListComp) and expr.for_in.inner_for_in is None
            and isinstance(expr.elt, cst.BinaryOperation)
            and isinstance(expr.elt.operator, (cst.Add, cst.Subtract))):
        return None
    zipped = expr.for_in.iter
    if not (isinstance(zipped, cst.Call) and isinstance(zipped.func, cst.Name)
            and zipped.func.value == "zip"
            and isinstance(expr.for_in.target, (cst.Tuple, cst.List))):
        return None
    sequences = [a.value for a in zipped.args if a.keyword is None and not a.star]
    if not any(dotted_name(seq) == name for seq in sequences):
        return None
    names = [dotted_name(e.value) for e in expr.for_in.target.elements]
    if len(names) != len(sequences) or None in names:
        return None
    operands = _operands(expr.elt)
    used = {dotted_name(o) for o in operands}
    # Each zipped sequence must reach the element through its own loop name.
    if not all(n in used for n in names):
        return None
    drawn = {n: seq for n, seq in zip(names, sequences, strict=True) if dotted_name(seq) != name}
    return [(drawn[n], o) for o in operands if (n := dotted_name(o)) is not None and n in drawn]


# Statements whose body may not run in an iteration: a reset under one (`if i % 100 == 0:
# running = 0.0`) leaves the total to grow until it runs.
_CONDITIONAL = (cst.If, cst.Try, cst.TryStar, cst.For, cst.While, cst.Match)


def _rebinds_for(tree: TreeIndex, binding: cst.CSTNode, store: cst.CSTNode, loop: Loop) -> bool:
    """Does ``binding`` (inside ``loop``) run in every iteration in which ``store`` runs?
    It does when every block around it that may not run (an ``if`` branch, a ``try``, an
    inner loop) also holds the store: ``logs = {}`` then ``logs["loss"] = loss`` under the
    same logging condition."""
    child = binding
    for ancestor in tree.ancestors(binding):
        if ancestor is loop:
            return True
        if isinstance(ancestor, _CONDITIONAL) and not tree.is_inside(store, child):
            return False
        child = ancestor
    return False


class LossKeptWithGraph(Rule):
    """
    ## What it does
    Flags a loss (or any tensor that still carries its autograd graph) that a training loop
    stores somewhere that outlives the iteration: appended to a list, put in a dict, added to a
    running total (a per-key one in a dict too), joined onto a growing tensor (``acc =
    torch.cat((acc, logits))``), or kept on ``self``.

    ## Why is this bad?
    A loss tensor references the whole graph of the forward pass that produced it, with the
    saved activations. Keeping it keeps all of that alive: a list of losses grows by one graph
    per step until the GPU runs out of memory, and ``total_loss += loss`` chains every step's
    graph onto the next. The PyTorch FAQ calls this "accumulating history".

    ## Example
    ```python
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    ```

    ## How to fix
    Store a detached tensor, or a Python number when you need one on the host anyway:
    ```python
        losses.append(loss.detach())  # or loss.item(), which waits for the GPU
    ```
    The rule stays silent when the stored value is detached or converted, when the code runs
    under no-grad, when the accumulator is itself backpropagated later (a multi-term loss built
    across micro-steps), when the list is created inside the iteration, and for per-step state
    on ``self``: an attribute stored before the step's backward (which frees the graph), or one
    re-set earlier in the same step (``self.loss = zero; self.loss += term``).

    Running totals include per-key ones fed from a loss dict: ``totals[name] += value``
    in a loop over ``losses.items()``, ``meters[k] = meters.get(k, 0) + v``, and
    ``defaultdict(float)`` accumulators, and per-task ones kept in a list rebuilt from
    itself: ``sums = [s + l for s, l in zip(sums, losses)]``.

    What it resolves to stay quiet on correct code:
    - Host numbers: sizes and counts (``x.size(0)``, ``t.numel()``, ``len(batch)``,
      ``labels.shape[0]``, ``.sum().item()``) and ``sum(...)`` over them; a comprehension's
      elements decide, not the tensors it iterates over. The count a loss is divided by
      before ``backward()`` is no tensor; values loaded with ``yaml``/``json``/``pickle`` or
      computed by ``numpy``/``math`` carry no graph, nor does ``loss.detach().clone().mean()``.
    - A loss dict whose entries a loop replaces with detached values
      (``for k, v in d.items(): d[k] = v.detach() * scale``) holds no graph afterwards.
    - Kept on purpose for a later backward: a list of outputs a pipeline schedule pops and
      backpropagates (``output.backward(grad)``, ``torch.autograd.backward(tensors=...)``),
      in another method of the class or through a same-file helper such as
      ``backward_step(outputs.pop(0), grad)``; a per-step list backpropagated in its step;
      and gradients asked to keep their graph (``grads = torch.autograd.grad(loss, weights,
      create_graph=True)``), whose unrolled updates a meta-gradient differentiates through.
    - Same-file callees: ``loss, items = criterion(pred, y)`` reads what ``criterion``'s
      ``__call__`` (or the function) returns at each position, so ``items.detach()`` there is
      no graph; ``meter.add(loss)`` on a same-file class is judged in ``add``'s own body. A
      callee annotated to return host values (``-> float``, ``-> Dict[str, float]``) returns
      no graph, whatever its name says.
    - Callees in other files of the project: what they return at each position, computed
      under ``torch.no_grad()``, detached (also after reshapes of the detached value) or
      reduced from such values, is no graph. A method called on what no name types
      (``self.model["policy"].awr_loss(x)``) is read from the project's one method of that
      name, when only one class defines it and the name is not one every model or trainer
      has (``forward``, ``step``).
    - ``meter.update(loss, n)`` on an instance of a class defined elsewhere and named like a
      running average (``AverageMeter``, ``AverageValueMeter``, ``RunningAverage``) keeps a
      running sum of ``loss``; ``update`` on anything else (a dict, a metric) is left alone.

    What it leaves alone: values whose origin it cannot see (a callee from another file,
    an opaque helper) are not reported unless their name or call says loss or model output;
    an unpacked name that reads like a count (``ntokens``, ``n_samples``) is taken as a number,
    and one that reads like a log record (``logging_output``, ``stats``, ``metrics``) is not
    taken for the loss when only the call's name says loss
    (``loss, sample_size, logging_output = criterion(model, sample)``).

    ## Fix safety
    Appending ``.detach()`` is unsafe: code that later backpropagates through the stored
    tensors, or that reads their ``grad_fn``, stops working.
    """

    code = "MEM001"
    name = "loss-kept-with-graph"
    message = "graph-carrying tensor is kept beyond its training iteration"
    triggers = ("backward(", "step(")
    # Findings are in training code, a loop or function that runs backward or an optimizer
    # step (memlint.analysis.loops), so the code calls one of them.
    code_gate = ("call:backward", "call:manual_backward", "fact:optimizer-step")
    fix_safety = FixSafety.UNSAFE

    valid = (
        # `self.booster.train(params, data)` trains another library's model, no module's
        # mode switch: what `self.booster(data)` hands back carries no graph.
        Valid("""
            import torch
            class Stacker:
                def fit(self, loader, optimizer):
                    kept = None
                    for data in loader:
                        self.booster.train(self.params, data)
                        scores = self.booster(data)
                        loss = self.model(data).sum()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        kept = scores if kept is None else torch.cat((kept, scores))
        """),
        # A helper annotated to return a float, whatever its name says: the epoch's mean of
        # values already read with `.item()`.
        Valid("""
            class Trainer:
                def _mean_loss(self, losses: list[float]) -> float:
                    return sum(losses) / len(losses)

                def fit(self, loader):
                    for epoch in range(10):
                        losses = []
                        for x, y in loader:
                            loss = self.criterion(self.model(x), y)
                            loss.backward()
                            self.optimizer.step()
                            losses.append(loss.item())
                        mean_loss = self._mean_loss(losses)
                        if mean_loss < self.best_loss:
                            self.best_loss = mean_loss
        """),
        # The loop walks one step's auxiliary loss terms, each backpropagated on its own; the
        # sum is that step's value for the log.
        Valid("""
            def compute_aux_loss(aux_list, backward=False):
                aux_loss_sum = 0
                for aux_loss in aux_list:
                    aux_loss_sum += aux_loss
                    if backward is True:
                        aux_loss.backward()
                return aux_loss_sum
        """),
        # REINFORCE: each step's log-prob is kept for the episode's policy-gradient backward,
        # which `update` runs over the replay before emptying it.
        Valid("""
            import torch
            def update(replay, optimizer):
                terms = []
                for step in replay:
                    terms.append(-step.log_prob * step.reward)
                optimizer.zero_grad()
                torch.stack(terms).sum().backward()
                optimizer.step()
            def main(env, policy, optimizer, replay):
                for episode in range(100):
                    state = env.reset()
                    for t in range(1000):
                        dist = policy(state)
                        action = dist.sample()
                        state, reward, done = env.step(action)
                        replay.append(state, reward, log_prob=dist.log_prob(action))
                        if done:
                            break
                    update(replay, optimizer)
                    replay.empty()
        """),
        # In-place arithmetic on `.data` is outside autograd: the center-loss gradients are
        # rescaled by whatever the step computed, and nothing keeps a graph.
        Valid("""
            for images, pids in loader:
                optimizer.zero_grad()
                optimizer_center.zero_grad()
                features, scale = model(images)
                loss = criterion(features, pids) + center_loss(features, pids) * scale
                loss.backward()
                optimizer.step()
                for param in center_loss.parameters():
                    param.grad.data *= 1.0 / (weight * scale)
                optimizer_center.step()
        """),
        # `restore_model(...)` hands back the objects it restores (a model, a step count), not
        # a forward's outputs: neither the model nor what it returns beside it holds a graph.
        Valid(
            """
            class Trainer:
                def restore(self, path):
                    (self.model, self.restore_step) = self.restore_model(path, self.model)

                def train_epoch(self):
                    for batch in self.loader:
                        self.model(batch).backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()

                def fit(self):
                    self.total_steps_done = self.restore_step
                    for epoch in range(10):
                        self.train_epoch()
                        self.test_loader = self.get_test_loader(self.model)

                def get_test_loader(self, model):
                    return model.get_data_loader(is_eval=True)
            """
        ),
        Valid("""
            import torch
            class Trainer:
                def train_step(self, batch):
                    loss = self.model(batch)
                    self.distributed.backward(loss, self.model)  # the strategy takes the loss
                    self.optimizer.step()
                    return loss.item()

                def tune_batch_size(self, sizes):
                    self.model.train()
                    best = None
                    for size in sizes:
                        self.train_step(size)
                        best = size
                    self.batch_size = self.distributed.broadcast_object(best)
        """),
        Valid("""
            for step, batch in enumerate(loader):
                out = model(**batch)
                out.loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    logs = {"step": step}
                    logs["loss"] = out.loss
                    wandb.log(logs)
        """),
        Valid("""
            for inputs, labels in loader:
                optimizer.zero_grad()
                loss = criterion(net(inputs), labels)
                loss.backward()
                optimizer.step()
                step_total += loss
                log(step_total)
                step_total = 0.0
        """),
        Valid("""
            class Detector:
                def fit(self, loader):
                    for x in loader:
                        loss = self.model_(x).sum()
                        loss.backward()
                        self.opt.step()
                        self.opt.zero_grad()
                    self.net_ = self._train_model(loader)
                    self.crit_ = _FocalLoss()
        """),
        # `KL_Loss` is an `nn.Module` class spelled with underscores (FedML's FedGKT): its
        # constructor, in a method that switches the model to training, keeps no loss.
        Valid("""
            from .utils import KL_Loss
            class ServerTrainer:
                def __init__(self, model, args):
                    self.model = model
                    self.model.train()
                    self.criterion_KL = KL_Loss(args.temperature)
                def train(self, loader, optimizer):
                    for x, teacher in loader:
                        loss = self.criterion_KL(self.model(x), teacher)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
        """),
        Valid("""
            import torch
            seen = []
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                _, predicted = torch.max(out, 1)
                seen.append(predicted)
        """),
        Valid("""
            from torchmetrics import MeanMetric
            logs, mean_loss = {}, MeanMetric()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                logs.update({"loss": loss})
                mean_loss.update(loss)
        """),
        Valid("""
            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        """),
        Valid("""
            for x, y in loader:
                terms = []
                for head in heads:
                    terms.append(criterion(head(model(x)), y))
                total = sum(terms)
                total.backward()
                optimizer.step()
        """),
        Valid("""
            total = 0
            for chunk in chunks:
                total = total + loss_fn(model(chunk))
            total.backward()
            optimizer.step()
        """),
        Valid("""
            import torch
            history = []
            for x, y in loader:
                with torch.no_grad():
                    val = criterion(model(x), y)
                history.append(val)
                optimizer.step()
        """),
        Valid("""
            class GAN:
                def backward_g(self):
                    self.loss_g = self.criterion(self.net_d(self.fake), True)
                    self.loss_g.backward()
        """),
        Valid("""
            total_tokens, seen, correct = 0, 0, 0
            for batch in loader:
                optimizer.zero_grad()
                logits = model(batch["input_ids"])
                loss = criterion(logits, batch["labels"])
                loss.backward()
                optimizer.step()
                total_tokens += batch["input_ids"].numel()
                total_tokens += sum(len(row) for row in logits)
                seen += batch["labels"].shape[0]
                correct += (logits.argmax(-1) == batch["labels"]).sum().item()
        """),
        Valid("""
            import torch

            def backward_step(output, grad):
                torch.autograd.backward(output, grad_tensors=grad)

            def one_f_one_b(stage, micro_batches, recv_grad, optimizer, warmup):
                outputs = []
                for i, mb in enumerate(micro_batches):
                    outputs.append(stage.model(mb))
                    if i >= warmup:
                        backward_step(outputs.pop(0), recv_grad())
                while outputs:
                    backward_step(outputs.pop(0), recv_grad())
                optimizer.step()
        """),
        Valid("""
            class Trainer:
                def train_step(self, batch):
                    self.losses = []
                    self.optimizer.zero_grad()
                    for micro in batch.chunk(4):
                        self.losses.append(self.criterion(self.model(micro), micro.y))
                    sum(self.losses).backward()
                    self.optimizer.step()
        """),
        Valid("""
            import torch

            class DetectionLoss:
                def __call__(self, pred, target):
                    box = self.bce(pred[..., :4], target[..., :4])
                    obj = self.bce(pred[..., 4], target[..., 4])
                    return (box + obj) * pred.shape[0], torch.stack((box, obj)).detach()

            criterion = DetectionLoss()
            mean_items = torch.zeros(2)
            for i, (imgs, targets) in enumerate(loader):
                loss, loss_items = criterion(model(imgs), targets)
                loss.backward()
                optimizer.step()
                mean_items = (mean_items * i + loss_items) / (i + 1)
        """),
        Valid("""
            def train_microbatch(model, batch, scale):
                losses = model(batch)
                sum(losses.values()).backward()
                for k, value in losses.items():
                    losses[k] = value.detach().mean() * scale
                return losses

            totals = {}
            for batch in loader:
                for k, value in train_microbatch(model, batch, 0.5).items():
                    totals[k] = totals.get(k, 0) + value
                optimizer.step()
        """),
        Valid("""
            class Averager:
                def __init__(self):
                    self.n, self.total = 0, 0.0

                def add(self, v):
                    self.n += v.data.numel()
                    self.total += v.data.sum()

            loss_avg = Averager()
            for x, y in loader:
                cost = criterion(model(x), y)
                cost.backward()
                optimizer.step()
                loss_avg.add(cost)
        """),
        Valid(
            # Per-task running totals of host numbers.
            """
            sums = [0.0] * n_tasks
            for x, ys in loader:
                optimizer.zero_grad()
                losses = [criterion(p, y) for p, y in zip(model(x), ys)]
                sum(losses).backward()
                optimizer.step()
                sums = [s + l.item() for s, l in zip(sums, losses)]
            """
        ),
        Valid(
            # An unrolled inner optimisation kept differentiable on purpose (a meta-gradient
            # differentiates through every step).
            """
            import torch
            class MetaAttack:
                def inner_train(self, features, labels):
                    for _ in range(self.train_iters):
                        loss = criterion(forward(features, self.weights), labels)
                        grads = torch.autograd.grad(loss, self.weights, create_graph=True)
                        self.velocities = [
                            self.momentum * v + g for v, g in zip(self.velocities, grads)]
                        self.weights = [w - self.lr * v
                                        for w, v in zip(self.weights, self.velocities)]
                def attack(self, features, labels):
                    for _ in range(self.steps):
                        self.adj_optimizer.zero_grad()
                        self.inner_train(features, labels)
                        meta = meta_loss(self.weights)
                        self.adj.grad = torch.autograd.grad(meta, self.adj)[0]
                        self.adj_optimizer.step()
            """
        ),
    )
    invalid = (
        # Logits joined onto a tensor that grows over the epoch: every step's graph with it.
        Invalid(
            """
            import torch
            def train(model, loader, optimizer):
                acc = torch.empty(0)
                for x, y in loader:
                    logits = model(x)
                    loss = torch.nn.functional.cross_entropy(logits, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    acc = torch.cat((acc, logits))
                return acc.argmax(dim=1)
            """,
            lines=(11,),
            fixed="""
            import torch
            def train(model, loader, optimizer):
                acc = torch.empty(0)
                for x, y in loader:
                    logits = model(x)
                    loss = torch.nn.functional.cross_entropy(logits, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    acc = torch.cat((acc, logits.detach()))
                return acc.argmax(dim=1)
            """,
        ),
        Invalid(
            # A network named by its kind (`gnn`, `lm`, `rnn`, ...): its training outputs,
            # kept for the epoch, keep every step's activations.
            """
            class Trainer:
                def train_gnn(self, loader, optimizer):
                    all_out = []
                    for batch in loader:
                        out = self.gnn(batch.x, batch.edge_index)[:batch.batch_size]
                        loss = self.loss(out, batch.y)
                        loss.backward()
                        optimizer.step()
                        all_out.append(out)
                    return torch.cat(all_out)
            """,
            lines=(10,),
            fixed="""
            class Trainer:
                def train_gnn(self, loader, optimizer):
                    all_out = []
                    for batch in loader:
                        out = self.gnn(batch.x, batch.edge_index)[:batch.batch_size]
                        loss = self.loss(out, batch.y)
                        loss.backward()
                        optimizer.step()
                        all_out.append(out.detach())
                    return torch.cat(all_out)
            """,
        ),
        Invalid(
            # Per-task running totals rebuilt from the step's losses, graphs and all.
            """
            sums = [0.0] * n_tasks
            for x, ys in loader:
                optimizer.zero_grad()
                losses = [criterion(p, y) for p, y in zip(model(x), ys)]
                sums = [s + l for s, l in zip(sums, losses)]
                sum(losses).backward()
                optimizer.step()
            """,
            lines=(6,),
            fixed="""
            sums = [0.0] * n_tasks
            for x, ys in loader:
                optimizer.zero_grad()
                losses = [criterion(p, y) for p, y in zip(model(x), ys)]
                sums = [s + l.detach() for s, l in zip(sums, losses)]
                sum(losses).backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            for epoch in range(epochs):
                running_loss = 0.0
                for i, (inputs, labels) in enumerate(loader):
                    optimizer.zero_grad()
                    loss = criterion(net(inputs), labels)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss
                    if i % 2000 == 1999:
                        print(running_loss / 2000)
                        running_loss = 0.0
            """,
            lines=(9,),
            fixed="""
            for epoch in range(epochs):
                running_loss = 0.0
                for i, (inputs, labels) in enumerate(loader):
                    optimizer.zero_grad()
                    loss = criterion(net(inputs), labels)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss.detach()
                    if i % 2000 == 1999:
                        print(running_loss / 2000)
                        running_loss = 0.0
            """,
        ),
        Invalid(
            """
            from utils import AverageMeter
            losses, top1 = AverageMeter(), AverageMeter()
            for images, target in loader:
                loss = criterion(model(images), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.update(loss, images.size(0))
                top1.update(accuracy.item(), images.size(0))
            """,
            lines=(9,),
            fixed="""
            from utils import AverageMeter
            losses, top1 = AverageMeter(), AverageMeter()
            for images, target in loader:
                loss = criterion(model(images), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.update(loss.detach(), images.size(0))
                top1.update(accuracy.item(), images.size(0))
            """,
        ),
        Invalid(
            """
            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss)
            """,
            lines=(7,),
            fixed="""
            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
            """,
        ),
        Invalid(
            """
            total_loss = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total_loss += loss
            """,
            lines=(7,),
            fixed="""
            total_loss = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total_loss += loss.detach()
            """,
        ),
        Invalid(
            """
            class Trainer:
                def step(self, x, y):
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    self.last_loss = loss
            """,
            lines=(7,),
            fixed="""
            class Trainer:
                def step(self, x, y):
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    self.last_loss = loss.detach()
            """,
        ),
        Invalid(
            """
            from collections import defaultdict

            totals = defaultdict(float)
            for x, y in loader:
                optimizer.zero_grad()
                losses = criterion(model(x), y)
                losses["total"].backward()
                optimizer.step()
                for name, value in losses.items():
                    totals[name] += value * x.size(0)
            """,
            lines=(11,),
            fixed="""
            from collections import defaultdict

            totals = defaultdict(float)
            for x, y in loader:
                optimizer.zero_grad()
                losses = criterion(model(x), y)
                losses["total"].backward()
                optimizer.step()
                for name, value in losses.items():
                    totals[name] += (value * x.size(0)).detach()
            """,
        ),
        Invalid(
            """
            meters = {}
            for batch in loader:
                optimizer.zero_grad()
                loss_dict = model(batch)
                sum(loss_dict.values()).backward()
                optimizer.step()
                for k, v in loss_dict.items():
                    meters[k] = meters.get(k, 0) + v
            """,
            lines=(9,),
            fixed="""
            meters = {}
            for batch in loader:
                optimizer.zero_grad()
                loss_dict = model(batch)
                sum(loss_dict.values()).backward()
                optimizer.step()
                for k, v in loss_dict.items():
                    meters[k] = meters.get(k, 0) + v.detach()
            """,
        ),
        # A module held under any name: the class switches `self.gda` to training mode, so
        # `self.gda(data)` in another method is a forward, and its logits carry the graph.
        Invalid(
            """
            import torch
            class Adapter:
                def fit(self, loader, optimizer):
                    for epoch in range(3):
                        kept = None
                        for i, data in enumerate(loader):
                            self.gda.train()
                            loss, logits = self.forward_model(data)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                            if i == 0:
                                kept = logits
                            else:
                                kept = torch.cat((kept, logits))
                def forward_model(self, data):
                    logits = self.gda(data)
                    return torch.nn.functional.cross_entropy(logits, data.y), logits
            """,
            lines=(16,),
            fixed="""
            import torch
            class Adapter:
                def fit(self, loader, optimizer):
                    for epoch in range(3):
                        kept = None
                        for i, data in enumerate(loader):
                            self.gda.train()
                            loss, logits = self.forward_model(data)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                            if i == 0:
                                kept = logits
                            else:
                                kept = torch.cat((kept, logits.detach()))
                def forward_model(self, data):
                    logits = self.gda(data)
                    return torch.nn.functional.cross_entropy(logits, data.y), logits
            """,
        ),
    )

    # ------------------------------------------------------------------ visitors

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _STORE_METHODS):
            return
        if not node.args:
            return
        container = dotted_name(func.value)
        if container is None:
            return
        graph = self.context.analysis.graph
        if graph.callee_defs(node):
            # `meter.add(loss)` on a same-file class: its method's body is where anything is
            # kept, and the rule checks that body (`self.total += v.data.sum()`) on its own.
            return
        if func.attr.value == "update":
            # `losses.update(loss, n)` on a meter imported from elsewhere (`AverageMeter`):
            # a running sum of its first argument; any other `update` keeps nothing known.
            classes = graph.instance_classes(func.value)
            if classes and all(_METER_CLASS.search(c) for c in classes):
                self._check(node, container, node.args[0].value, accumulates=True)
            return
        self._check(node, container, node.args[-1].value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not isinstance(node.operator, _ACCUMULATING_OPS):
            return
        target = node.target
        if isinstance(target, cst.Subscript):
            container = dotted_name(target.value)
        else:
            container = dotted_name(target)
        if container is not None and not container.endswith(".data"):
            # `param.grad.data *= scale`: arithmetic on a tensor's storage, which autograd
            # does not record, so nothing it keeps can hold a graph.
            self._check(node, container, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Subscript):
                container = dotted_name(t.value)
                if container is None:
                    continue
                # `meters[k] = meters.get(k, 0) + v`: the new terms are what is kept.
                operands = _operands(node.value)
                others = [o for o in operands if not _reads(o, container)]
                if isinstance(node.value, cst.BinaryOperation) and len(others) < len(operands):
                    for value in others:
                        self._check(node, container, value, accumulates=True)
                else:
                    self._check(node, container, node.value)
                continue
            name = dotted_name(t)
            if name is None:
                continue
            # `total = total + loss`: the target also appears among the operands.
            operands = _operands(node.value)
            others = [o for o in operands if dotted_name(o) != name]
            if len(others) < len(operands) and isinstance(node.value, cst.BinaryOperation):
                for value in others:
                    self._check(node, name, value, accumulates=True)
            elif joined := self._joined_onto(node.value, name):
                # `acc = torch.cat((acc, logits))`: a growing tensor, as a list appended to.
                for value in joined:
                    self._check(node, name, value, accumulates=True)
            elif (terms := _elementwise_terms(node.value, name)) is not None:
                # `sums = [s + l for s, l in zip(sums, losses)]`: one running total per task.
                for sequence, term in terms:
                    self._check(node, name, sequence, accumulates=True, shown=term)
            elif _self_attribute(name):
                self._check(node, name, node.value, replaces=True)

    # ------------------------------------------------------------------ logic

    def _joined_onto(self, value: cst.BaseExpression, name: str) -> list[cst.BaseExpression]:
        """``torch.cat((acc, logits))``: the tensors joined onto the running value ``name``;
        empty when it joins nothing on."""
        if not isinstance(value, cst.Call) or not value.args or (
                self.context.analysis.imports.qualified_name(value.func) not in _JOINS):
            return []
        first = value.args[0]
        if first.keyword is not None or not isinstance(first.value, (cst.Tuple, cst.List)):
            return []
        elements = [e.value for e in first.value.elements
                    if not isinstance(e, cst.StarredElement)]
        others = [e for e in elements if dotted_name(e) != name]
        return others if len(others) < len(elements) else []

    def _check(
        self,
        node: cst.CSTNode,
        container: str,
        value: cst.BaseExpression,
        *,
        accumulates: bool = False,
        replaces: bool = False,
        shown: cst.BaseExpression | None = None,
    ) -> None:
        """``shown``: what the finding names and its fix detaches, when that is not ``value``
        itself (an element drawn from the sequence ``value`` in a comprehension)."""
        # Cheap structural checks first: graph inference runs only in training code.
        analysis = self.context.analysis
        tree = analysis.tree
        func = tree.enclosing_function(node)
        loops = tree.enclosing_loops(node)
        # The nearest training loop: `for k, v in losses.items(): totals[k] += v` runs
        # inside the batch loop, and it is that loop's iterations the value outlives.
        training = [loop for loop in loops if analysis.loops.is_training_loop(loop)
                    and not _over_loss_terms(loop)]
        on_self = _self_attribute(container)
        if on_self:
            if not self._training_method(func, training):
                return
        elif not training:
            return
        carried = self._graph_part(value)
        if not carried or analysis.grad.grad_mode_at(node) == "off":
            return
        graph = analysis.graph
        scope: Scope = func if func is not None else self.context.module
        if all(self._differentiable_gradients(part, scope) for part in carried):
            # `velocities = [m * v + g for v, g in zip(velocities, grads)]` where `grads =
            # torch.autograd.grad(loss, weights, create_graph=True)`: an unrolled optimisation
            # kept differentiable on purpose, to differentiate through it (meta-gradients).
            return
        if on_self:
            if replaces and graph.backward_follows(node, scope):
                return  # this step's own backward still needs it and then frees the graph
            if not replaces and self._reset_before(container, scope, node):
                return
            cls = tree.enclosing_class(node)
            scopes: list[Scope] = [scope]
            if cls is not None:
                scopes = [*class_methods(cls)] or [scope]
            if graph.flows_into_backward(container, scopes):
                return
        else:
            if self._bound_inside(container, scope, training[0], node, replaces or accumulates):
                return
            if graph.flows_into_backward(container, [scope]):
                return
        self._report(node, container, carried if shown is None else [shown])

    def _differentiable_gradients(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """A name bound, every time in this function, to ``torch.autograd.grad(...,
        create_graph=True)``: gradients asked to keep their graph."""
        if not isinstance(expr, cst.Name):
            return False
        graph = self.context.analysis.graph
        bindings = graph.facts(scope).bindings.get(expr.value, ())
        qualified = self.context.analysis.imports.qualified_name
        return bool(bindings) and all(
            isinstance(b.value, cst.Call) and qualified(b.value.func) == "torch.autograd.grad"
            and any(a.keyword is not None and a.keyword.value == "create_graph"
                    and not (isinstance(a.value, cst.Name) and a.value.value == "False")
                    for a in b.value.args)
            for b in bindings)

    def _graph_part(self, value: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The sub-expressions that carry the graph: elements of ``[loss, out]``, dict values.

        All of them, so that the one finding's fix detaches everything the store keeps.
        """
        graph = self.context.analysis.graph
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return [p for element in value.elements for p in self._graph_part(element.value)]
        if isinstance(value, cst.Dict):
            return [p for item in value.elements
                    if isinstance(item, cst.DictElement) for p in self._graph_part(item.value)]
        return [value] if graph.carries_graph(value) else []

    def _training_method(self, func: cst.FunctionDef | None, training: list[Loop]) -> bool:
        """``self.x`` outlives the step when stored from training code: inside a training
        loop (``training``), a method that runs backward/step, or one a training loop calls."""
        loop_analysis = self.context.analysis.loops
        if training:
            return True
        if func is None:
            return False
        return loop_analysis.function_trains(func) or bool(loop_analysis.training_callers(func))

    def _bound_inside(
        self, container: str, scope: Scope, loop: Loop, node: cst.CSTNode, skip_self: bool
    ) -> bool:
        """Is the container (re)created inside the loop, so each iteration starts afresh?"""
        tree = self.context.analysis.tree
        for binding in self.context.analysis.graph.facts(scope).bindings.get(container, ()):
            if binding.kind in ("aug", "param") or binding.node is node:
                continue
            if skip_self and binding.value is not None and any(
                dotted_name(o) == container for o in _operands(binding.value)
            ):
                continue
            if binding.kind == "iter" and binding.node is loop:
                return True
            if tree.is_inside(binding.node, loop) and _rebinds_for(tree, binding.node, node, loop):
                return True
        return False

    def _reset_before(self, container: str, scope: Scope, node: cst.CSTNode) -> bool:
        """``self.loss = zero(); self.loss += term``: the attribute is re-bound earlier in the
        same pass (same function and, inside a loop, same iteration), so it holds one step."""
        graph = self.context.analysis.graph
        tree = self.context.analysis.tree
        facts = graph.facts(scope)
        at = facts.order.get(node, -1)
        loops = tree.enclosing_loops(node)
        for binding in facts.bindings.get(container, ()):
            if binding.kind != "assign" or binding.order >= at:
                continue
            if binding.value is not None and any(
                dotted_name(o) == container for o in _operands(binding.value)
            ):
                continue
            if not loops or tree.is_inside(binding.node, loops[0]):
                return True
        return False

    def _report(self, node: cst.CSTNode, container: str,
                carried: list[cst.BaseExpression]) -> None:
        text = ", ".join(f"`{self.context.code_for(part)}`" for part in carried)
        if len(text) > 42:
            text = text[:38] + "...`"
        verb, kept = ("carries its", "is") if len(carried) == 1 else ("carry their", "are")
        message = (
            f"{text} still {verb} autograd graph and {kept} kept in `{container}` beyond the "
            "training iteration; store `.detach()` or `.item()`"
        )
        replacements: dict[cst.CSTNode, cst.CSTNode] = {p: _detached(p) for p in carried}
        self.report(node, message, fix=Fix(FixSafety.UNSAFE, replacements))


def _over_loss_terms(loop: Loop) -> bool:
    """``for aux_loss in aux_losses: total += aux_loss; aux_loss.backward()``: the loop walks
    the loss terms of one step (each backpropagated on its own), not training iterations."""
    return (isinstance(loop, cst.For) and isinstance(loop.target, cst.Name)
            and "loss" in loop.target.value.lower())


def _detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("detach")))


"""MEM002 eval-without-no-grad: a model forward in evaluation code that records a graph."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.calls import (
    is_backward_call,
    is_optimizer_step,
    last_name,
    method_name,
)
from memlint.analysis.dataflow import names_in
from memlint.analysis.imports import dotted_name
from memlint.analysis.testcode import is_module_self_test, is_pytest_module
from memlint.rules.base import Invalid, Rule, Valid
from memlint.vocabulary import (
    DERIVATIVE_REQUESTS,
    EVAL_FUNCTION,
    EVAL_LOADER,
    EVAL_STEP_HOOK,
    FRAMEWORK_HOOK,
    MODEL_MACHINERY,
    PREDICT_API,
    forward_by_name,
    framework_eval_hook,
)

if TYPE_CHECKING:
    from memlint.context import FileContext

# Evaluation that needs input gradients: adversarial attacks, saliency and attribution maps.
# Attributes of the autograd graph itself: reading them needs the graph recorded.
_GRAPH_ATTRIBUTES = frozenset({"grad_fn", "next_functions"})
_NEEDS_INPUT_GRAD = re.compile(
    r"attack|adversar|fgsm|pgd|saliency|grad_?cam|integrated_grad|smooth_?grad|attribut|explain"
    r"|grad(?:ient)?_?penalty",  # WGAN-GP: gradients of the critic at its inputs
    re.IGNORECASE,
)
# Words of a name for data or settings, not work: `_get_attack_dataset_no_label`,
# `attack_loader`.
_DATA_WORDS = frozenset({
    "dataset", "datasets", "loader", "dataloader", "data", "set", "config", "cfg", "params",
    "kwargs", "args", "type", "path", "dir", "file", "name", "names"})
# Methods of a collection or a tensor: `explanations.append(m)` adds to a list named for
# explanations and `m_explain.cpu()` copies one; neither computes an attribution, whatever
# its receiver is called.
_VALUE_METHODS = frozenset({
    "append", "extend", "insert", "add", "update", "pop", "clear", "setdefault", "items",
    "keys", "values", "get", "copy", "cpu", "cuda", "to", "detach", "numpy", "item",
    "tolist", "float", "double", "long", "int", "half", "clone", "view", "reshape",
    "squeeze", "unsqueeze", "sum", "mean", "max", "min", "argmax", "softmax", "size"})
# `load_model(...)`, `self._wrap_model(model)`, `accelerator.unwrap_model(m)`: helpers named
# after a model, not forwards.
# What a shape probe reads of a forward's output.
_MEASURES = frozenset({"shape", "size", "ndim", "dim", "dtype", "numel"})
# What takes a forward's output off its graph for good: a detached tensor or a host value.
_DETACHING = frozenset({"detach", "item", "tolist"})
_HELPER_VERB = re.compile(
    r"^_*(?:load|build|get|create|make|init|initialize|setup|set|prepare|wrap|unwrap|save|"
    r"export|compile|copy|clone|freeze|unfreeze|register|resize|print|log|count|check|convert|"
    r"quantize|fuse|replace|patch|apply|update|reset|is|has|dispatch|move|to|push|restore|"
    r"instantiate|construct|summarize|summary|describe|dump|evaluate|eval|train|test|validate|"
    r"run|fit|find|select|merge|tie|shard|parallelize|broadcast|download|upload|postprocess|"
    r"preprocess|process|adjust|enable|disable|attach|detach|remove|add|fix|post|pre)_"
)
# Calls that make a method a training step, not a shared forward (`_shared_step`).
_TRAINING_CALLS = frozenset({"backward", "manual_backward", "step", "zero_grad", "grad"})
_OTHER_FRAMEWORKS = frozenset({"mxnet", "tensorflow", "jax", "paddle", "mindspore", "oneflow"})
_TORCH_ECOSYSTEM = ("torch", "lightning", "pytorch_lightning", "transformers", "accelerate",
                    "timm", "torchvision", "torchaudio", "torch_geometric", "monai", "diffusers")

# A region is evaluation code: an eval-named function, or the statements after `m.eval()`.
Region = cst.CSTNode


def _optional_test(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """A test of whether a parameter was given: ``optimizer is None`` -> (``optimizer``,
    False), ``optimizer is not None`` and ``train`` -> (name, True), ``not train`` -> (name,
    False): the name, and whether the test holds when the parameter is given."""
    if isinstance(test, cst.Name):
        return test.value, True
    if (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)):
        return test.expression.value, False
    if (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"):
        operator = test.comparisons[0].operator
        if isinstance(operator, cst.Is):
            return test.left.value, False
        if isinstance(operator, cst.IsNot):
            return test.left.value, True
    return None


def _optional_parameter(function: cst.FunctionDef, name: str) -> int | None:
    """The position of ``function``'s parameter ``name`` when it defaults to ``None`` or
    ``False`` (``optimizer=None``, ``train=False``): left out, the function does not train."""
    for index, param in enumerate(function.params.params):
        if param.name.value == name:
            default = param.default
            return index if (isinstance(default, cst.Name)
                             and default.value in ("None", "False")) else None
    return None


def _names_eval_loader(iterable: cst.BaseExpression) -> bool:
    """``testloader``, ``enumerate(self.val_dl)``, ``tqdm(eval_dataloader)``."""
    todo: list[cst.BaseExpression] = [iterable]
    while todo:
        expr = todo.pop()
        if isinstance(expr, cst.Name) and EVAL_LOADER.match(expr.value):
            return True
        if isinstance(expr, cst.Attribute):
            if EVAL_LOADER.match(expr.attr.value):
                return True
        elif isinstance(expr, cst.Call):
            todo.extend(a.value for a in expr.args)
    return False


def _names_gradient_job(dotted: str) -> bool:
    """``attack.generate``, ``saliency``, ``self.explainer.attribute``: a call named for work
    that needs input gradients. A network named for its job is not one: ``self.attack_model(x)``
    or ``self.attack_model.eval()`` (a membership-inference classifier) runs or switches a model,
    whose forward is evaluation like any other; nor is data named for it
    (``self._get_attack_dataset_no_label(features)``, ``attack_loader``)."""
    for part in dotted.split("."):
        if not _NEEDS_INPUT_GRAD.search(part):
            continue
        words = part.lower().split("_")
        if not _DATA_WORDS.isdisjoint(words) or (
                forward_by_name(part) and not _NEEDS_INPUT_GRAD.search(words[-1])):
            continue
        return True
    return False


def _uses_torch(context: FileContext) -> bool:
    return any(
        value.split(".", 1)[0] in _TORCH_ECOSYSTEM
        for value in context.analysis.imports.aliases.values()
    )


def _is_eval_switch(call: cst.Call) -> bool:
    """``m.eval()`` or ``m.train(False)`` / ``m.train(mode=False)``."""
    name = method_name(call)
    if name == "eval":
        return not call.args
    if name == "train" and len(call.args) == 1:
        value = call.args[0].value
        return isinstance(value, cst.Name) and value.value == "False"
    return False


def _runs_self(call: cst.Call) -> bool:
    """``self(x)`` or ``self.forward(x)``: a model running its own forward."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    return isinstance(func, cst.Name) and func.value == "self"


def _mode_switch(call: cst.Call) -> bool:
    """``m.train()``, ``m.train(False)``, ``m.train(mode=True)``, ``m.eval()``: a method call
    that only switches a module's mode (``model.train(fold)``, given data, is none)."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in ("train", "eval"):
        return False
    if not call.args:
        return True
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    return (isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False")) or (
        arg.keyword is not None and arg.keyword.value == "mode")


def _test_class(cls: cst.ClassDef) -> bool:
    """``class TestModel:``, ``class ModelTest(unittest.TestCase)``, ``class T(BaseTest)``."""
    return "Test" in cls.name.value or any(
        "Test" in (last_name(base.value) or "") for base in cls.bases)


def _is_train_switch(call: cst.Call) -> bool:
    return method_name(call) == "train" and not _is_eval_switch(call)


class EvalWithoutNoGrad(Rule):
    """
    ## What it does
    Flags a model forward in evaluation or inference code that runs with autograd on.
    Evaluation code is a function named ``evaluate``, ``validate``, ``test``, ``predict``,
    ``infer*`` (also ``eval_*``, ``valid*``, ``run_validation`` ...), or the statements that
    follow ``model.eval()`` in the same block, up to the next ``model.train()`` (a switch
    under a guard or for each model of a collection, ``if isinstance(m, nn.Module):
    m.eval()``, ``for m in models.values(): m.eval()``, holds after the guard and the loop
    too; a name the function switches to eval holds a module whatever it is called). Code that
    calls ``backward()`` or ``torch.autograd.grad``, steps an optimizer, asks for input
    gradients (``requires_grad_()``, adversarial attacks, saliency maps, a model asked for
    forces: ``model(batch, compute_force=True)``) or reads the graph the forward records
    (``out.grad_fn``, ``fn.next_functions``: a dependency tracer) is not evaluation code.
    Each forward of such a function or block is reported, as labellers and reviewers read
    them (``model.encoder(x)`` then ``model.decoder(z)`` are two), a forward nested in
    another's arguments once. An evaluation-named function that trains (a probe fitted with
    a backward pass) is not evaluation code as a whole, but its own ``m.eval()`` blocks are.
    One epoch function for both (``def run_epoch(model, loader, optimizer=None): if
    optimizer is None: model.eval()``, training only under ``if optimizer is not None:``)
    evaluates where a call in the file leaves the optimizer out with grad on.
    In a loop over a DataLoader, a method called with arguments on
    a plain name the function switched to eval is a forward too (``model.eval()`` then, per
    batch, ``model.deeptabular(X)``: a sub-network, or a method computing from the batch),
    unless it is ``nn.Module``'s own API (``model.load_state_dict(sd)``), private, or named for
    changing the object's state (``set_*``, ``reset_*``, ``register_*``), for one of its
    quantities, settings, metrics or text (``valid_length(n)``, ``calculate_metrics(p, y)``,
    ``to_tokens(s)``) or for other work (``get_*``, ``save_*``).

    ## Why is this bad?
    ``model.eval()`` changes dropout and batch-norm behaviour; it does not switch autograd
    off. Every forward still records a graph and keeps every intermediate activation alive
    until the output is dropped, so evaluation uses several times the memory it needs (and
    an output kept in a list keeps its whole graph).

    No finding is reported when grad is off through ``torch.no_grad()``,
    ``torch.inference_mode()`` or ``torch.set_grad_enabled(False)`` as a context manager or
    decorator, in the function or in every same-file caller, through a same-file
    ``@contextmanager`` that yields under one (``with evaluating(model):``, also
    ``with self._mode(False):`` around ``torch.set_grad_enabled(training)``), or when the
    mode is decided at run time (``torch.set_grad_enabled(phase == "train")``). Lightning's
    ``validation_step``,
    ``test_step`` and ``predict_step`` already run under no-grad, and so does Hugging Face's
    ``generate()``. Functions named ``test_*`` are pytest tests, not evaluation code, except
    the tutorial-style ``test_epoch``, ``test_one_epoch`` and ``test_loop`` in a file that
    pytest would not collect (not ``test_*.py``, ``*_test.py`` or ``conftest.py``), and
    methods of a class that no test runner collects (not named or based like a test case:
    ``DBTA.test_(loader, model)``) in such a file. Test
    modules, modules in a ``tests/`` folder and ``testing_*`` helpers are not checked: their
    forwards are smoke checks on toy models. A ``test_*.py`` directly inside an
    ``examples``, ``scripts``, ``tools`` or ``demo`` folder is an evaluation script
    (``examples/test_dcp.py``, ``tools/test_net.py``), checked like any other. Nor is a
    module's own self-check, a module-level ``_test()`` (or ``_test_*``) that its
    ``if __name__ == "__main__":`` block runs (model-zoo modules build each network and
    assert its output shape on a random input), or a parameterless module-level ``test()``
    that makes up its inputs with torch factories, loops over no data, switches no model
    to eval and is called from no function (``# test()`` beside a sampler).

    Across files (the project model): grad is off when a decorator or decorator factory
    defined anywhere in the project switches it off (one that returns
    ``torch.inference_mode()`` or ``torch.no_grad()`` depending on the torch version, a
    wrapper that calls the function under no-grad), when ``stack.enter_context(
    torch.no_grad())`` ran earlier in the block, and when every project call site of the
    function runs under no-grad, a runner that calls a function passed to it included (a
    method that overrides a project base class's method is called where the base calls it:
    ``self.inference(im)`` in the base's decorated predict loop), and when the method called
    is decorated to run without gradients in the project class the receiver holds, its own
    or inherited (``self.encoder.encode(texts)``, or ``enc = Encoder(d).to(dev)`` then
    ``enc.encode(texts)``, where another module defines ``@torch.no_grad() def encode``), or
    that method switches grad off around all its own work: every call it makes on the object
    sits in a ``with torch.no_grad():`` block of its own (``self.network.predict_3D(
    data)``, nnU-Net's network asserting its input and then predicting under no-grad).
    Role-named sub-networks are forwards too (``self.model.question_encoder(ids)``,
    ``text_encoder(tokens)``). A function is also evaluation code when a caller in another
    module switched a model to ``.eval()`` before calling it (a decoder run from
    ``__main__``), or when its only callers are module-level functions named for evaluation,
    one with grad on (``predict_pdf(model, x)`` calling ``_weibull_pdf(model, x)``, which
    runs ``model.forward(x)``; a bare ``torch.no_grad()`` statement switches nothing off),
    or when it is only ever called as a statement from training loops and trains nothing
    itself (sampling images every N steps). A module that imports no torch itself is torch
    code when it keeps one of the project's ``nn.Module`` classes on its objects (``from
    .net import Scorer`` inside ``fit``, then ``self.model = Scorer(n)``: a wrapper of a
    package that supports several backends). On a model class, ``predict()``-style methods
    count only when the model switches itself to eval and runs itself (``self.eval();
    self(x)``), or when the method detaches its own forward's output itself (``return
    self(g).detach()``: nothing it hands out keeps the graph); on other classes, an
    evaluation-named method needs a DataLoader loop of its own or an eval switch in its
    class. A plain class that holds its networks in eval mode (switched in ``__init__`` or
    any method, never back to training) and trains nothing is an inference wrapper: any
    method of it with a DataLoader loop of its own is evaluation code, and an inference
    method of a network it holds so is a forward, also one picked from a collection
    (``self._heads[lang].predict(batch, reprs)``). A helper that switches a model to eval
    and returns its output leaves the grad mode to its caller, and so does a model's method
    not named for evaluation (``self.eval(); dist = self(x); return Posterior(dist)``:
    callers may differentiate it with respect to the input). An ``nn.Module`` subclass with
    no ``forward`` whose methods train is a trainer, not a model: its ``net.eval(); net(x)``
    sampling blocks are evaluation code. An ``eval()`` block that also trains or attacks (a
    notebook's top level, where a later cell trains again or runs an attack) is judged
    statement by statement: a forward is evaluation unless its own statement needs
    gradients, an earlier one that does made what it reads (``x.requires_grad_()``, ``adv =
    attack.perturb(x, y)``), or a later one that does (or a ``return``) uses what it
    computed (``out = model(x)`` ... ``loss(out).backward()``). A model's ``forward``,
    ``__init__`` and helpers run in whatever mode their callers chose. A forward whose
    output is only measured (``out.shape[1]``, ``len(out)``) probes the model's output shape
    and is left alone. Left alone: calls through attributes or third-party objects
    (``self.model.recognize(...)``), whose targets and callers cannot be known statically.

    ## Example
    ```python
    def evaluate(model, loader):
        model.eval()
        for x, y in loader:
            logits = model(x)
    ```

    ## How to fix
    ```python
    @torch.inference_mode()
    def evaluate(model, loader):
        model.eval()
        for x, y in loader:
            logits = model(x)
    ```
    or wrap the loop in ``with torch.no_grad():``. Use ``torch.no_grad()`` when the outputs
    may later take part in autograd: tensors created under inference mode cannot.
    """

    code = "MEM002"
    name = "eval-without-no-grad"
    message = (
        "model forward in evaluation code runs with autograd on (`.eval()` does not disable "
        "it); wrap it in `with torch.no_grad():` or decorate the function with "
        "`@torch.inference_mode()`"
    )
    # `.eval()` / `.train(False)`, or a function named like evaluation code. One regular
    # expression instead of fifty substrings: a third of the cost on a large tree.
    trigger_pattern = (
        rb"\.eval\(|\.train\((?:mode=)?False|def _?(?:eval|test\(|predict|infer"
        rb"|run_(?:eval|infer|predict|valid)|do_(?:eval|valid)|test_(?:one_)?epoch|test_loop"
        rb"|(?:validate|validation|valid)(?:\(|_epoch|_one_epoch|_loop|_model|_batch))"
        rb"|for [^\n]*\b(?i:test|val|valid|validation|eval|evaluation|dev)_?(?i:data_?)?"
        rb"(?i:loader|dl)s?\b"
    )
    # The same in the code; or a backward pass, for a helper only ever called beside one (a
    # sampler run every N steps). Inference code the project reveals gets the rule anyway.
    code_gate = ("fact:eval-function", "fact:eval-block", "fact:eval-loader-loop",
                 "call:backward", "call:manual_backward")
    # Findings are forward calls (`_is_forward`), by the names the gate reads too.
    code_requires = (("fact:forward-call",),)
    # A smoke forward in a test is no evaluation run.
    skips_test_code = True

    valid = (
        # The same epoch function where every call passes an optimizer, where the call that
        # leaves it out runs under no_grad, or where the evaluation path needs gradients (a
        # WGAN-GP critic's gradient penalty).
        Valid("""
            import torch
            def run_epoch(model, loader, criterion, optimizer=None):
                if optimizer is None:
                    model.eval()
                else:
                    model.train()
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        loss.backward()
                        optimizer.step()
            def fit(model, train_loader, val_loader, criterion, optimizer):
                run_epoch(model, train_loader, criterion, optimizer)
                with torch.no_grad():
                    run_epoch(model, val_loader, criterion)
            def critic_epoch(gan, critic, loader, optimizer=None):
                if optimizer is None:
                    gan.eval()
                for real, fake in loader:
                    penalty = gan.compute_gradient_penalty(real, fake, critic)
                    loss = critic(fake).mean() - critic(real).mean() + penalty
                    if optimizer is not None:
                        loss.backward()
                        optimizer.step()
            def fit_gan(gan, critic, loader, val_loader, optimizer):
                critic_epoch(gan, critic, loader, optimizer)
                critic_epoch(gan, critic, val_loader)
        """),
        # The attack model of the other branch is scikit-learn's: it is given a NumPy array
        # (`astype`, `np.c_`, a scaler's `transform`), which no torch module takes.
        Valid("""
            import numpy as np
            import torch
            class MembershipAttack:
                def infer(self, x, y):
                    features = self.estimator.predict(x).astype(np.float32)
                    if self.attack_model_type == "nn":
                        self.attack_model.eval()
                        with torch.no_grad():
                            return self.attack_model(torch.from_numpy(features)).numpy()
                    features = np.c_[features, y]
                    if self.scaler:
                        features = self.scaler.transform(features)
                    return self.attack_model.predict_proba(features)
        """),
        # A frozen extractor's forward turns gradients off itself: its predict() records none.
        Valid(
            """
            import torch
            from torch import nn
            class Extractor(nn.Module):
                @torch.no_grad()
                def forward(self, x):
                    return self.backbone(x)
                def predict(self, x):
                    self.eval()
                    return self(x)
            """
        ),
        # A switch in one branch of several (`elif`) holds only there; one that a later
        # statement switches back to training holds until it.
        Valid("""
            import torch
            def run(benchmarks, loader, phase, opt):
                for bm in benchmarks.values():
                    if phase == "train":
                        bm.train()
                    elif phase == "val":
                        bm.eval()
                for bm in benchmarks.values():
                    bm.train()
                for x in loader:
                    for name, bm in benchmarks.items():
                        bm(x).sum().backward()
                        opt.step()
            """),
        # A step hook called on an object this function did not switch to eval may be any
        # harness's: by its name alone it is no forward.
        Valid("""
            import torch
            def validation_epoch(module, dataloader):
                return [module.validation_step(batch, i) for i, batch in enumerate(dataloader)]
        """),
        # A private helper runs as its callers run it: here always with grad off.
        Valid("""
            import torch
            class SplitPredictor:
                def _predict(self, x_batch):
                    self._model.eval()
                    return self._model(x_batch.to(self._device)).float()
                def evaluate(self, loader):
                    with torch.no_grad():
                        return [self._predict(x) for x, _ in loader]
        """),
        # A model-zoo module's self-check, run only as a script: one forward on a random input
        # to check the output shape.
        Valid("""
            import torch
            from torch import nn
            class TinyNet(nn.Module):
                def forward(self, x):
                    return self.fc(x)
            def tinynet(**kwargs):
                return TinyNet(**kwargs)
            def _test():
                for model in [tinynet]:
                    net = model(classes=10)
                    net.eval()
                    y = net(torch.randn(1, 8))
                    assert tuple(y.size()) == (1, 10)
            if __name__ == "__main__":
                _test()
        """),
        # A module's parameterless smoke test (its call commented out): made-up inputs, one
        # call of the module, no data.
        Valid("""
            import torch
            from torch import nn
            class Sampler(nn.Module):
                def forward(self, query, num_neg, pos_id):
                    return query.topk(num_neg).indices
            def test():
                query = torch.rand(2, 10, 64).cuda()
                pos_id = torch.tensor([[0, 2, 5]]).cuda()
                sampler = Sampler()
                pos_prob, neg_id, neg_prob = sampler(query, 10, pos_id)
                print("end")
            # test()
        """),
        # An interatomic potential's forces are derivatives of its energy by the positions,
        # which its forward computes with autograd.
        Valid("""
            import torch
            def evaluate(model, loader, want_forces):
                model.eval()
                for batch in loader:
                    out = model(batch, compute_force=want_forces)
                    print(out["forces"].abs().max())
        """),
        # In a method that is evaluation by its name alone (no `.eval()` of its own), a
        # shared step is left alone (a framework's `predict` often runs under a no-grad
        # `__call__` of a base class).
        Valid("""
            import torch
            class Component:
                def feed_batch(self, batch):
                    return self.model(batch["input_ids"])
                def fit_dataloader(self, loader, optimizer):
                    for batch in loader:
                        self.feed_batch(batch).sum().backward()
                        optimizer.step()
                def predict(self, loader):
                    return [self.feed_batch(b).argmax(-1).tolist() for b in loader]
        """),
        Valid("""
            import torch
            def predict(potential, loader, stress):
                for batch in loader:
                    out = potential.forward(batch, include_forces=True, include_stresses=stress)
                    print(out["forces"].abs().max())
        """),
        # A model's helper that hands out its output with the graph (callers may differentiate
        # it), or detaches only a copy for logging, runs in its callers' mode.
        Valid("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def forward(self, x):
                    return self.head(x)
                def predict_energy(self, x):
                    return self(x)
                def predict_logged(self, x):
                    out = self(x)
                    self.log(out.detach())
                    return out
        """),
        Valid("""
            import torch
            from torch import nn
            class Surrogate(nn.Module):
                def forward(self, x):
                    return self.net(x)
                def posterior(self, x):
                    self.eval()
                    dist = self(x)
                    wrapped = Posterior(dist)
                    return wrapped
        """),
        # Calibration: the logits are collected under no_grad, then scored by loss modules
        # (one of them this file's `nn.Module` subclass) after the eval switch.
        Valid("""
            import torch
            from torch import nn
            class ECELoss(nn.Module):
                def forward(self, logits, labels):
                    return (logits.softmax(-1).max(-1).values - labels).abs().mean()
            class Scaler:
                def calibrate(self, loader):
                    self.model.eval()
                    nll_criterion = nn.CrossEntropyLoss()
                    ece_criterion = ECELoss()
                    with torch.no_grad():
                        logits = torch.cat([self.model(x) for x, _ in loader])
                        labels = torch.cat([y for _, y in loader])
                    nll = nll_criterion(logits, labels).item()
                    ece = ece_criterion(logits, labels).item()
                    print(f"before scaling: NLL {nll:.3f}, ECE {ece:.3f}")
        """),
        # A tracer: hooks read each output's grad_fn to build a dependency graph, and a
        # same-file method walks the graph from the output.
        Valid("""
            import torch
            class DependencyGraph:
                def trace(self, model, example_inputs):
                    model.eval()
                    records = {}
                    def record(module, inputs, outputs):
                        records[outputs.grad_fn] = module
                    hooks = [m.register_forward_hook(record) for m in model.modules()]
                    out = model(example_inputs)
                    for hook in hooks:
                        hook.remove()
                    self.walk_graph(out, records)
                    return records

                def walk_graph(self, out, records):
                    stack = [out.grad_fn]
                    while stack:
                        fn = stack.pop()
                        stack.extend(f for f, _ in fn.next_functions if f is not None)
        """),
        Valid("""
            import torch
            class Wrapper:
                def predict_on_batch(self, data):
                    with torch.no_grad():  # the method turns gradients off itself
                        return self.model(data)

                def predict_on_dataset(self, loader):
                    self.eval()
                    return [self.predict_on_batch(x) for x, _ in loader]
        """),
        Valid("""
            import torch
            def separate(model, mix, length):
                model.eval()
                valid_length = model.valid_length(length)  # a number, not a forward
                return mix[..., :valid_length]
        """),
        Valid("""
            import ludwig
            async def predict(request):
                model = ludwig.api.LudwigModel.load("model")  # a high-level wrapper
                resp, _ = model.predict(dataset=[request], data_format=dict)
                return resp
        """),
        Valid("""
            import torch
            def fast_adapt(model, batch):
                data, labels = batch
                logits = model(data)
                return criterion(logits, labels), (logits.argmax(1) == labels).float().mean()

            def main(model, train_loader, valid_loader, optimizer):
                for batch in train_loader:
                    loss, acc = fast_adapt(model, batch)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                model.eval()
                for batch in valid_loader:
                    loss, acc = fast_adapt(model, batch)
        """),
        Valid("""
            import torch
            class PPO:
                def evaluate_actions(self, obs, actions):
                    dist = self.actor(obs)
                    return dist.log_prob(actions), self.critic(obs)

                def update(self, batch):
                    log_prob, value = self.evaluate_actions(batch.obs, batch.actions)
                    loss = -(log_prob * batch.adv).mean() + (value - batch.ret).pow(2).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """),
        Valid("""
            import torch
            from lib import Net, x, y, crit
            model = Net()
            model.eval()  # frozen batch norm while fine-tuning
            out = model(x)
            loss = crit(out, y)
            loss.backward()
        """),
        Valid("""
            import torch
            from lib import Net, x, y, attack
            def robustness(model):
                model.eval()
                adv = attack.perturb(x, y)
                robust = model(adv)
                x.requires_grad_()
                saliency = model(x)
                saliency.sum().backward()
                return robust
        """),
        Valid("""
            import torch
            def embed(model, eval_loader):
                codes = []
                try:
                    with torch.no_grad():
                        for batch in eval_loader:
                            codes.append(model(batch).z)
                except RuntimeError:  # flows that need autograd in their forward
                    for batch in eval_loader:
                        codes.append(model(batch).z.detach())
                return codes
        """),
        Valid("""
            import torch
            for data, target in test_loader:
                adv = attack_method.generate(data, target)
                correct += (model(adv).argmax(1) == target).sum().item()
        """),
        Valid("""
            import torch
            with torch.no_grad():
                for images, labels in testloader:
                    outputs = net(images)
        """),
        Valid("""
            for images, labels in test_loader:
                images.requires_grad_(True)
                loss = criterion(model(images), labels)
                loss.backward()
                adversarial.append(images + eps * images.grad.sign())
        """),
        Valid("""
            import importlib
            def predict(model, texts, plugin):
                model.eval()
                handler = importlib.import_module(plugin)
                return handler.data_generator(texts)
        """),
        Valid("""
            import torch
            def infer_conv_output_dim(encoder, in_channels, length):
                out = encoder(torch.randn(1, in_channels, length))
                return out.shape[1], out.size(-1)
        """),
        Valid("""
            import torch
            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                return [model(x) for x, _ in loader]
        """),
        Valid("""
            import torch
            def validate(model, loader):
                model.eval()
                with torch.inference_mode():
                    for x, y in loader:
                        out = model(x)
        """),
        Valid("""
            import torch
            def run_epoch(model, loader, phase):
                model.train() if phase == "train" else model.eval()
                for x, y in loader:
                    with torch.set_grad_enabled(phase == "train"):
                        out = model(x)
        """),
        Valid("""
            import torch
            def predict(model, images):
                images.requires_grad_(True)
                scores = model(images)
                scores.max().backward()
                return images.grad
        """),
        Valid("""
            import torch
            def infer(model, tokenizer, prompt):
                model.eval()
                return model.generate(**tokenizer(prompt, return_tensors="pt"))
        """),
        Valid("""
            import torch
            def test_model_output_shape():
                model = Net()
                model.eval()
                assert model(torch.zeros(1, 3)).shape == (1, 2)
        """),
        Valid("""
            import torch
            def test_model(model, loader):  # pytest would collect it: not evaluation code
                model.eval()
                for x, y in loader:
                    assert model(x).shape == y.shape
        """),
        Valid("""
            import torch
            def finetune(model, loader, optimizer):
                model.eval()  # keep batch-norm statistics frozen
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
        """),
        Valid("""
            import torch
            def act(policy, obs):
                policy.eval()  # sample without dropout, but keep the graph for the update
                logits = policy(obs)
                policy.train()
                loss = -logits.log_softmax(-1).max(-1).values.mean()
                loss.backward()
        """),
        Valid("""
            import torch.nn as nn
            class Detector(nn.Module):
                def forward(self, x):
                    return self.predict(self.backbone(x))

                def predict(self, features):
                    return self.classifier(features)
        """),
        Valid("""
            import torch
            class KalmanState:
                def predict(self, dt):
                    return self.dynamics_model(self.mean, dt)
        """),
        Valid("""
            import torch
            def run_descriptor(module, patches):
                module.eval()  # fixed batch-norm statistics; gradients still flow to the caller
                return module(patches)
        """),
        Valid(
            # `self.predict_net(...)` is the class's own method, which sets the grad mode itself
            # (its loop under `set_grad_enabled`), not a sub-network held on `self`.
            """
            import torch
            class Model:
                def predict_net(self, loader, grads=False):
                    self.net.eval()
                    with torch.set_grad_enabled(grads):
                        return [self.net(x) for x in loader]

                def predict(self, loader):
                    return self.predict_net(loader)
            """
        ),
        Valid(
            # The class trains its networks too: its eval switches are phases, not a mode.
            """
            import torch
            from torch.utils.data import DataLoader
            class Tagger:
                def __init__(self, encoder):
                    self.encoder = encoder
                    self.encoder.eval()
                def fit(self, data, optimizer):
                    self.encoder.train()
                    for batch in DataLoader(data):
                        self.encoder.predict(batch).sum().backward()
                        optimizer.step()
                def tag(self, data):
                    return [self.encoder.predict(batch) for batch in DataLoader(data)]
            """
        ),
    )
    invalid = (
        # One epoch function for training and validation, told apart by whether an optimizer
        # is given (MOSES's trainers): called without one it evaluates, with autograd on.
        Invalid(
            """
            import torch
            class Trainer:
                def _train_epoch(self, model, loader, criterion, optimizer=None):
                    if optimizer is None:
                        model.eval()
                    else:
                        model.train()
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        if optimizer is not None:
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                def fit(self, model, train_loader, val_loader, criterion, optimizer):
                    self._train_epoch(model, train_loader, criterion, optimizer)
                    self._train_epoch(model, val_loader, criterion)
            """,
            lines=(10,),
        ),
        # `self.__call__(*batch)` runs the module as `self(*batch)` does (opendataval's BERT
        # `predict`).
        Invalid(
            """
            from torch import nn
            class BertClassifier(nn.Module):
                def forward(self, ids, mask):
                    return self.head(self.bert(ids, mask))
                def predict(self, batches):
                    self.eval()
                    return [self.__call__(*batch).argmax(1) for batch in batches]
            """,
            lines=(8,),
        ),
        # A model's prediction helper that detaches its own output itself: nothing it hands
        # out keeps the graph its forward recorded (matgl's `predict_structure`).
        Invalid(
            """
            import torch
            from torch import nn
            class Net(nn.Module):
                def forward(self, g, state=None):
                    return self.head(g)
                def predict_structure(self, structure, converter):
                    g = converter.get_graph(structure)
                    return self(g=g).detach()
                def predict_batch(self, batch):
                    out = self.forward(batch)
                    return out.detach().cpu().numpy()
                def predict_features(self, structure, converter):
                    g = converter.get_graph(structure)
                    if self.want_features:
                        self(g=g)  # the forward records its layers in self.features
                        return {k: v.detach() for k, v in self.features.items()}
                    return self(g=g).detach()
            """,
            lines=(9, 11, 16, 18),
        ),
        # A switch under a guard, or for each model of a collection, holds after the guard
        # and the loop too; a name switched to eval holds a module whatever it is called.
        Invalid(
            """
            import torch
            def weights_table(network, loader):
                if isinstance(network, torch.nn.Module):
                    network.eval()
                rows = []
                for x in loader:
                    rows.append(network(x).detach().cpu().numpy())
                return rows
            def metrics_table(benchmarks, loader):
                for bm in benchmarks.values():
                    if isinstance(bm, torch.nn.Module):
                        bm.eval()
                rows = []
                for x in loader:
                    for name, bm in benchmarks.items():
                        rows.append(bm(x).detach().cpu().numpy())
                return rows
            """,
            lines=(8, 17),
        ),
        # A trainer's own evaluation loops call a framework's step hooks on the model they
        # switched to eval: no framework wraps them in no-grad here.
        Invalid(
            """
            import torch
            class Trainer:
                def validation_epoch(self, model, dataloader):
                    model.eval()
                    return [model.validation_step(batch) for batch in dataloader]
                def test_epoch(self, model, dataloader):
                    model.eval()
                    outputs = []
                    for batch in dataloader:
                        outputs.append(model.test_step(batch))
                    return outputs
            """,
            lines=(6, 11),
        ),
        # The file's own `predict_step` runs without grad under Lightning, not when a
        # trainer of the file calls it itself on a model it switched to eval.
        Invalid(
            """
            import lightning as L
            class ActiveModule(L.LightningModule):
                def predict_step(self, batch, batch_idx):
                    return self(batch)
            class ActiveTrainer(L.Trainer):
                def predict_on_pool(self, model, dataloader):
                    model.eval()
                    for idx, batch in enumerate(dataloader):
                        yield model.predict_step(batch, idx).detach().cpu()
            """,
            lines=(10,),
        ),
        # A tutorial's parameterless `test()` over a global loader is evaluation code, not a
        # smoke test, though it makes up a tensor too.
        Invalid(
            """
            import torch
            from torch import nn
            model = nn.Linear(4, 2)
            def test():
                model.eval()
                correct = torch.zeros(1)
                for data, target in test_loader:
                    output = model(data)
                    correct += (output.argmax(1) == target).sum()
                print(correct)
            """,
            lines=(9,),
        ),
        # The network is named for nothing, but a same-file builder returns one of the file's
        # nn.Module classes: `self.lstmed` holds a module, and calling it is a forward.
        Invalid(
            """
            import torch
            from torch import nn

            class LSTMEDModule(nn.Module):
                def forward(self, x):
                    return x

            class Detector:
                def _build_model(self, dim):
                    return LSTMEDModule(dim)

                def _train(self, dim):
                    self.lstmed = self._build_model(dim).to(self.device)

                def _get_anomaly_score(self, windows):
                    self.lstmed.eval()
                    scores = []
                    for batch in windows:
                        output = self.lstmed(torch.as_tensor(batch, device=self.device))
                        scores.append(output.detach().cpu().numpy())
                    return scores
            """,
            lines=(20,),
        ),
        Invalid(
            # A network named for its job is still a network: a membership-inference attack's
            # classifier switched to eval and run on test batches needs no input gradients.
            """
            import numpy as np
            class MembershipInference:
                def infer(self, features):
                    import torch
                    from torch.utils.data import DataLoader
                    self.attack_model.eval()
                    test_set = self._get_attack_dataset_no_label(features)
                    predictions = []
                    for batch, _ in DataLoader(test_set, batch_size=64):
                        outputs = self.attack_model(batch)
                        predictions.append(torch.round(outputs).detach().numpy())
                    return np.vstack(predictions)
            """,
            lines=(11,),
        ),
        Invalid(
            # An evaluation-named function that trains a probe (a backward pass) is no
            # evaluation code as a whole, but its own `.eval()` block still is.
            """
            import torch
            def evaluate(x, y, model, optimizer, epochs):
                for epoch in range(epochs):
                    model.train()
                    optimizer.zero_grad()
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if epoch % 10 == 0:
                        model.eval()
                        acc = (model(x).argmax(-1) == y).float().mean().item()
            """,
            lines=(12,),
        ),
        Invalid(
            # A `test_` method of a class no test runner collects is evaluation code its
            # callers run with grad on; `model.train()` at its end switches a mode, it is no
            # call of the class's own training method.
            """
            import torch
            class DBTA:
                def test_(self, data_generator, model):
                    model.eval()
                    y_pred = []
                    for v_d, v_p, label in data_generator:
                        score = self.model(v_d, v_p)
                        y_pred += score.detach().cpu().flatten().tolist()
                    model.train()
                    return y_pred
                def train(self, train_gen, val_gen):
                    for v_d, v_p, label in train_gen:
                        self.model(v_d, v_p).sum().backward()
                    return self.test_(val_gen, self.model)
            """,
            lines=(8,),
        ),
        Invalid(
            # A sub-network or method of a model the function switched to eval, called on
            # the input: a forward with autograd on. The module's own API and a setter are not.
            """
            import torch
            def explain(model, loader, device):
                model.eval()
                weights = []
                for data in loader:
                    x = data.to(device)
                    _ = model.deeptabular(x)
                    weights.append(model.attention_weights(x).cpu())
                    model.load_state_dict(x)
                    model.set_mode(x)
                return weights
            """,
            lines=(8, 9),
        ),
        Invalid(
            # Values named for explanations (mask-based, no gradients taken): copying them or
            # collecting them is no attribution method that needs input gradients.
            """
            import torch
            class TabModel:
                def explain(self, loader):
                    self.network.eval()
                    res_explain = []
                    for data in loader:
                        m_explain, masks = self.network.forward_masks(data)
                        res_explain.append(m_explain.cpu().detach().numpy())
                    return res_explain
            """,
            lines=(8,),
        ),
        Invalid(
            # The class's own method runs the network in its caller's mode: a forward, unlike
            # one that sets the grad mode itself (`predict_net` among the valid examples).
            """
            import torch
            class Detector:
                def forward_model(self, data):
                    return self.model(data.x)
                def decision_function(self, data):
                    self.model.eval()
                    score = self.forward_model(data)
                    return score.detach().cpu()
            """,
            lines=(8,),
        ),
        Invalid(
            # An inference wrapper: networks switched to eval where they are loaded, never
            # trained here; its methods' loader loops are inference whatever their names.
            """
            import torch
            from torch.utils.data import DataLoader
            class Pipeline:
                def __init__(self, embedder, heads, lang):
                    self.embedder = embedder.eval()
                    self._heads = {lang: heads[lang]}
                    self._heads[lang].eval()
                    self.lang = lang
                def _tokenize_doc(self, test_set):
                    labels = []
                    for batch in DataLoader(test_set, batch_size=32):
                        reprs = self.embedder.get_inputs(batch)
                        labels.extend(self._heads[self.lang].predict(batch, reprs).tolist())
                    return labels
            """,
            lines=(14,),
        ),
        Invalid("""
            import torch
            class Trainer:
                def predict(self, batch):
                    self.model.eval()
                    preds = self.model.predict(batch.words, batch.mask)
                    return [p.argmax(-1).tolist() for p in preds]
        """, lines=(6,)),
        # A trainer's own step helper, shared with training, runs the model: after the
        # evaluation loop's `.eval()` its call is the forward.
        Invalid("""
            import torch
            class Component:
                def feed_batch(self, batch):
                    return self.model(batch["input_ids"])
                def fit_dataloader(self, loader, optimizer):
                    self.model.train()
                    for batch in loader:
                        self.feed_batch(batch).sum().backward()
                        optimizer.step()
                def evaluate_dataloader(self, loader, metric):
                    self.model.eval()
                    for batch in loader:
                        logits = self.feed_batch(batch)
                        metric(logits.argmax(-1).tolist())
        """, lines=(14,)),
        Invalid("""
            import torch
            class LinkPrediction:
                def evaluate(self, dataloader):
                    for h, t, r in dataloader:
                        scores = self.model.inference_scoring_function(h, t, r)
                        print(scores.argmax(1).tolist())
        """, lines=(6,)),
        Invalid("""
            import torch
            from lib import Net, X_test, crit, opt, loader
            model = Net()
            model.eval()
            preds = model(X_test)  # a notebook cell; a later cell trains again
            for x, y in loader:
                opt.zero_grad()
                crit(model(x), y).backward()
                opt.step()
        """, lines=(6,)),
        Invalid("""
            import torch
            from lib import LeNet, LinfPGDAttack, x, y
            model = LeNet().eval()
            model.eval()
            adversary = LinfPGDAttack(model, eps=0.15)
            adv = adversary.perturb(x, y)
            clean_pred = model(x).argmax(1)
        """, lines=(8,)),
        Invalid(
            """
            import torch
            for epoch in range(epochs):
                for images, labels in trainloader:
                    loss = criterion(net(images), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            correct = 0
            for images, labels in testloader:
                outputs = net(images)
                correct += (outputs.argmax(1) == labels).sum().item()
            """,
            lines=(11,),
        ),
        Invalid(
            """
            import torch
            def main(model, train_loader, val_loader, optimizer):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                for step, (x, y) in enumerate(val_loader):
                    logits = model(x)
                    log(step, logits.argmax(1).eq(y).float().mean().item())
            """,
            lines=(9,),
        ),
        # A recommender's own `predict()` API: nothing in the project turns grad off for it.
        Invalid(
            """
            import torch
            from torch import nn
            class MF(nn.Module):
                def forward(self, u, i):
                    return (self.user(u) * self.item(i)).sum(-1)
                def predict(self, u, i):
                    return self.forward(u, i).cpu()
            """,
            lines=(8,),
        ),
        # A public `predict` is called by users, whatever the class's own `evaluate` does.
        Invalid(
            """
            import torch
            class SplitPredictor:
                def predict(self, x_batch):
                    self._model.eval()
                    logits = self._model(x_batch.to(self._device)).float()
                    return self.predict_with_logits(logits.detach())
                def evaluate(self, loader):
                    with torch.no_grad():
                        return [self.predict(x) for x, _ in loader]
            """,
            lines=(6,),
        ),
        # A role-named sub-network of the model is a forward too.
        Invalid(
            """
            import torch
            class Retriever:
                def evaluate(self, loader):
                    self.model.eval()
                    with torch.no_grad():
                        return [self.model(batch) for batch in loader]
                def predict(self, texts):
                    ids = self.tokenizer(texts)["input_ids"].to(self.device)
                    return self.model.question_encoder(ids)[0].detach().cpu()
            """,
            lines=(10,),
        ),
        # A graph network runs its own forward over the graph it holds: `self.forward()`.
        Invalid(
            """
            import torch
            from torch import nn
            class RGCN(nn.Module):
                def forward(self):
                    return self.layer(self.features, self.adj)
                def predict(self):
                    self.eval()
                    return self.forward()
            """,
            lines=(9,),
        ),
        # Each forward of the function is reported; one nested in another's arguments once.
        Invalid(
            """
            import torch
            def evaluate(model, loader):
                model.eval()
                for x, y in loader:
                    logits = model(x)
                    probs = model(x).softmax(-1)
                    scores = model.head(model.backbone(x))
            """,
            lines=(6, 7, 8),
        ),
        Invalid(
            """
            import torch
            for epoch in range(10):
                model.train()
                for x, y in train_loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                model.eval()
                for x, y in val_loader:
                    val_loss = criterion(model(x), y)
            """,
            lines=(11,),
        ),
        Invalid(
            """
            import torch
            def test_epoch(model, loader, criterion):
                model.eval()
                total = 0.0
                for x, y in loader:
                    total += criterion(model(x), y).item()
                return total / len(loader)
            """,
            lines=(7,),
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Trainer(nn.Module):
                def __init__(self, net, ema, opt):
                    super().__init__()
                    self.net, self.ema, self.opt = net, ema, opt
                def step(self, images):
                    self.net(images).mean().backward()
                    self.opt.step()
                    for net in (self.ema, self.net):
                        net.eval()
                        samples = net(images)
                        print(samples.mean())
            """,
            lines=(13,),
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class GraphNet(nn.Module):
                def fit(self, data, opt):
                    self.train()
                    self.forward(data).sum().backward()
                    opt.step()
                def predict(self, data):
                    self.eval()
                    return self.forward(data)
            """,
            lines=(11,),
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._enabled: bool | None = None
        self._region_of_statement: dict[cst.CSTNode, Region] | None = None
        self._region_ok: dict[Region, bool] = {}
        self._graph_readers: dict[cst.FunctionDef, bool] = {}
        # For an eval() block closed by `.train()`: the statements from there to the block's end.
        self._region_tail: dict[Region, Sequence[cst.CSTNode]] = {}
        self._reported: set[cst.Call] = set()  # forwards reported: one inside another is not
        # Per eval block: its statements in order (the tail after `.train()` included), and per
        # statement (needs grad, names it binds, names it reads), for blocks that mix
        # evaluation with training or attacks.
        self._block_statements: dict[Region, list[cst.CSTNode]] = {}
        self._statement_facts: dict[cst.CSTNode, tuple[bool, frozenset[str], frozenset[str]]] = {}
        self._grad_off_methods: dict[str, bool] = {}
        self._in_shared = False  # inside _shared_step: no second level
        self._shared: dict[tuple[int, str], bool] = {}
        self._statement_positions: dict[Region, dict[int, int]] = {}
        # An eval block opened under a test that a parameter off by default was left out
        # (`if optimizer is None: model.eval()`): its function and the parameter.
        self._optional_modes: dict[Region, tuple[cst.FunctionDef, str]] = {}
        self._evaluated_nodes: dict[Region, frozenset[int] | None] = {}

    # -- facts built once per file ------------------------------------------------------

    def _active(self) -> bool:
        if self._enabled is None:
            self._enabled = (
                (_uses_torch(self.context) or self._torch_through_project())
                and not self._grad_off_globally()
            )
        return self._enabled

    def _torch_through_project(self) -> bool:
        """The project shows torch code here though the file imports no torch: it calls
        functions of this module as inference code, or the module uses the project's
        ``nn.Module`` classes (``self.model = Net(...)``, ``Net`` imported from a sibling
        inside a method)."""
        project = self.context.project
        if project is None or not (project.eval_called or project.side_jobs
                                   or project.module_classes):
            return False
        # Not a module of another framework (d2l ships the same book code for MXNet).
        return not any(
            value.split(".", 1)[0] in _OTHER_FRAMEWORKS
            for value in self.context.analysis.imports.aliases.values()
        )

    def _grad_off_globally(self) -> bool:
        """``torch.set_grad_enabled(False)`` as a plain statement switches grad off for good."""
        tree = self.context.analysis.tree
        for call in tree.calls_by_name.get("set_grad_enabled", ()):
            if isinstance(tree.parent(call), cst.Expr) and call.args:
                value = call.args[0].value
                if isinstance(value, cst.Name) and value.value == "False":
                    return True
        return False

    def _eval_blocks(self) -> dict[cst.CSTNode, Region]:
        """Statement -> the ``m.eval()`` statement whose block it follows (until ``.train()``)."""
        if self._region_of_statement is not None:
            return self._region_of_statement
        tree = self.context.analysis.tree
        regions: dict[cst.CSTNode, Region] = {}
        switches = [*tree.calls_by_name.get("eval", ()), *tree.calls_by_name.get("train", ())]
        for call in switches:
            if not _is_eval_switch(call):
                continue
            statement = tree.parent(call)
            if isinstance(statement, (cst.Expr, cst.Assign)):
                statement = tree.parent(statement)
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            block = tree.parent(statement)
            if not isinstance(block, (cst.IndentedBlock, cst.Module)):
                continue
            self._extend_region(statement, statement, block, regions)
            if self._optional_switch(statement, block, regions):
                continue
            # A switch under a guard or for each model of a collection (`if isinstance(m,
            # nn.Module): m.eval()`, `for m in models.values(): m.eval()`) holds for what
            # follows the guard or the loop too.
            owner = tree.parent(block)
            while (
                isinstance(block, cst.IndentedBlock)
                and isinstance(owner, (cst.If, cst.For))
                and not self._calls_train(owner)
            ):
                outer = tree.parent(owner)
                if isinstance(outer, cst.Else | cst.If):
                    break  # an elif or else branch: the switch is one of alternatives
                if not isinstance(outer, (cst.IndentedBlock, cst.Module)):
                    break
                if not self._extend_region(statement, owner, outer, regions):
                    break
                block, owner = outer, tree.parent(outer)
        self._region_of_statement = regions
        return regions

    def _extend_region(
        self,
        switch: cst.CSTNode,
        statement: cst.CSTNode,
        block: cst.IndentedBlock | cst.Module,
        regions: dict[cst.CSTNode, Region],
        *,
        override: bool = False,
    ) -> bool:
        """The statements after ``statement`` in ``block`` follow ``switch`` up to the next
        ``.train()``; False when one switches back. ``override``: they follow it even where
        an earlier switch holds them."""
        body: list[cst.CSTNode] = list(block.body)
        following = body[body.index(statement) + 1:]
        for index, sibling in enumerate(following):
            if self._calls_train(sibling):
                self._region_tail.setdefault(switch, following[index:])
                return False
            if override:
                regions[sibling] = switch
            else:
                regions.setdefault(sibling, switch)
        return True

    def _calls_train(self, statement: cst.CSTNode) -> bool:
        tree = self.context.analysis.tree
        return any(
            isinstance(node, cst.Call) and _is_train_switch(node) for node in tree.walk(statement)
        )

    def _optional_switch(self, statement: cst.CSTNode, block: cst.CSTNode,
                         regions: dict[cst.CSTNode, Region]) -> bool:
        """``def _train_epoch(model, loader, optimizer=None): if optimizer is None:
        model.eval() else: model.train()`` (MOSES's trainers): one function for training and
        validation, whose eval switch holds, when the parameter is left out, for what follows
        the ``if``. Recorded as an eval block of its own (:meth:`_optional_mode_forward`)."""
        tree = self.context.analysis.tree
        owner = tree.parent(block)
        in_else = isinstance(owner, cst.Else)
        guard = tree.parent(owner) if in_else and owner is not None else owner
        if not isinstance(guard, cst.If) or (not in_else and guard.body is not block):
            return False
        test = _optional_test(guard.test)
        function = tree.enclosing_function(guard)
        if test is None or test[1] != in_else or function is None or _optional_parameter(
                function, test[0]) is None:
            return False
        outer = tree.parent(guard)
        if not isinstance(outer, cst.IndentedBlock) or tree.parent(outer) is not function:
            return False
        # The model the parameter switches decides (`model.discriminator.eval()` before the
        # test of the optimizer keeps the critic in eval for both uses).
        self._extend_region(statement, guard, outer, regions, override=True)
        self._optional_modes[statement] = (function, test[0])
        return True

    def _outside_training_branches(self, node: cst.CSTNode, name: str) -> Iterator[cst.CSTNode]:
        """``node`` and the nodes under it, without the branches that run only when the
        parameter ``name`` is given (``if optimizer is not None: loss.backward()``)."""
        if isinstance(node, cst.If):
            test = _optional_test(node.test)
            if test is not None and test[0] == name:
                yield node.test
                kept = node.orelse if test[1] else node.body
                if kept is not None:
                    yield from self._outside_training_branches(kept, name)
                return
        yield node
        for child in node.children:
            yield from self._outside_training_branches(child, name)

    def _optional_mode_forward(self, call: cst.Call, region: Region) -> bool:
        """A forward in such a block is evaluation code where the block trains only in
        branches for the parameter (``if optimizer is not None: loss.backward()``), the
        forward is in none, it runs with grad on in its function, and a call of the function
        in this file leaves the parameter out (or passes ``None``/``False``) with grad on."""
        function, name = self._optional_modes[region]
        evaluated = self._evaluated_nodes.get(region)
        if evaluated is None:
            # The block's nodes outside its training branches, or None when one of them
            # needs gradients: once per block, for every forward in it.
            nodes = {id(node): node for statement in self._statements_of(region)
                     for node in self._outside_training_branches(statement, name)}
            evaluated = self._evaluated_nodes[region] = (
                None if any(self._needs_grad(node) for node in nodes.values())
                else frozenset(nodes))
        if evaluated is None or id(call) not in evaluated:
            return False  # training needs the block, or the forward is in a training branch
        grad = self.context.analysis.grad
        if grad.grad_mode_at(call, callers=False) != "on":
            return False
        found = _optional_parameter(function, name)
        assert found is not None
        tree = self.context.analysis.tree
        bound = bool(function.params.params) and (
            function.params.params[0].name.value in ("self", "cls"))
        for site in tree.calls_of(function):
            # `self._train_epoch(...)`: `self` is not among the arguments
            position = found - 1 if bound and isinstance(site.func, cst.Attribute) else found
            given = [a for a in site.args if a.keyword is None and not a.star]
            passed = next((a.value for a in site.args
                           if a.keyword is not None and a.keyword.value == name),
                          given[position].value if len(given) > position else None)
            if any(a.star for a in site.args) and passed is None:
                continue  # `*args` / `**kwargs` may hold it
            left_out = passed is None or (isinstance(passed, cst.Name)
                                          and passed.value in ("None", "False"))
            if left_out and grad.grad_mode_at(site) == "on":
                return True
        return False

    # -- what counts as evaluation code ---------------------------------------------------

    def _is_test(self, function: cst.FunctionDef) -> bool:
        """A pytest/unittest test: small forwards there are checks, not evaluation runs."""
        name = function.name.value
        cls = self.context.analysis.tree.enclosing_class(function)
        if name.startswith("test_"):
            if (cls is not None and not _test_class(cls)
                    and not is_pytest_module(self.context.path)):
                # `DBTA.test_(loader, model)`: neither pytest nor unittest collects a method
                # of a class not named or based like a test case; its callers decide.
                return False
            return not EVAL_FUNCTION.match(name) or is_pytest_module(self.context.path)
        if is_module_self_test(function, self.context.analysis.tree):
            return True
        return cls is not None and cls.name.value.startswith("Test")

    def _is_eval_function(self, function: cst.FunctionDef) -> bool:
        name = function.name.value
        if FRAMEWORK_HOOK.search(name):
            return False
        if self._feeds_training(function):
            return False
        if not EVAL_FUNCTION.match(name):
            return self._runs_inference(function)
        cls = self.context.analysis.tree.enclosing_class(function)
        if cls is None:
            return True
        # A model's own `predict()`/`inference()` is called by code that usually switches
        # grad off itself, through attributes no static model follows (`self.model.inference`):
        # it counts when the model switches itself to eval (an eval block, below), or for the
        # `predict()` API users call on the model, unless the project shows the way to call
        # it with grad off (a trainer's `@torch.no_grad() evaluate` calling `model.predict(x)`).
        if self.context.analysis.calls.is_module_class(cls):
            project = self.context.project
            if name not in PREDICT_API:
                # `predict_structure`: callers cannot differentiate what it hands out when
                # it detaches its own forward's output itself.
                return self._detaches_own_forward(function)
            return not self._called_on_self(name, cls) and (
                project is None or name not in project.predict_without_grad)
        # On other classes `predict`/`inference` names many things (a Kalman filter's step, a
        # wrapper around a framework's predictor): evaluation needs evidence in the method,
        # an eval switch or a loop over a DataLoader.
        return self._has_evaluation_evidence(function, cls)

    def _called_on_self(self, name: str, cls: cst.ClassDef) -> bool:
        """Does the class call ``self.<name>(...)`` itself: a head its ``forward`` runs, part
        of the model's computation rather than an API?"""
        tree = self.context.analysis.tree
        return any(isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
                   and call.func.value.value == "self" and tree.enclosing_class(call) is cls
                   for call in tree.calls_within(cls, name))

    def _feeds_training(self, function: cst.FunctionDef) -> bool:
        """Does code in this file backpropagate what it returns (``evaluate_actions`` in a
        PPO update, a ``fast_adapt`` helper whose error the training loop backpropagates)?
        Then autograd must stay on, whatever its name says."""
        tree = self.context.analysis.tree
        graph = self.context.analysis.graph
        for call in tree.calls_of(function):
            if tree.is_inside(call, function):
                continue  # recursion
            statement = tree.parent(call)
            if not isinstance(statement, cst.Assign):
                continue
            scope = graph.scope_of(call)
            if any(graph.flows_into_backward(name, [scope])
                   for target in statement.targets for name in names_in(target.target)):
                return True
        return False

    def _has_evaluation_evidence(self, function: cst.FunctionDef, cls: cst.ClassDef) -> bool:
        """A loop over a DataLoader in the method, or an eval switch anywhere in the class
        (a serving wrapper sets ``self.model = model.eval()`` once in ``__init__``)."""
        tree = self.context.analysis.tree
        flow = self.context.analysis.dataflow
        if any(isinstance(node, cst.For) and flow.is_dataloader_loop(node)
               for node in tree.walk(function.body)):
            return True
        return any(
            _is_eval_switch(call)
            for name in ("eval", "train") for call in tree.calls_within(cls, name)
        )

    def _runs_inference(self, function: cst.FunctionDef) -> bool:
        """Not named like evaluation, but its callers show it is: called after the caller
        switched a model to ``.eval()`` (a decoder run from ``__main__``), or only by
        module-level functions named for evaluation, or only ever
        called as a side job of a training loop (``sample_images(...)`` every N steps)."""
        cls = self.context.analysis.tree.enclosing_class(function)
        if cls is not None and self.context.analysis.calls.is_module_class(cls):
            return False  # a model's helper runs in whatever mode its caller chose
        if cls is not None and self._inference_class_loop(function, cls):
            return True
        project = self.context.project
        qualname = self.context.analysis.tree.qualname(function)
        if project is not None and (qualname in project.eval_called
                                    or qualname in project.side_jobs):
            return True
        tree = self.context.analysis.tree
        if tree.enclosing_class(function) is not None:
            return False
        calls = [c for c in tree.calls_of(function)
                 if isinstance(c.func, cst.Name) and not tree.is_inside(c, function)]
        if not calls:
            return False
        blocks = self._eval_blocks()
        if any(self._in_block(call, blocks) for call in calls):
            return True
        loops = self.context.analysis.loops
        return not loops.function_trains(function) and all(
            isinstance(tree.parent(call), cst.Expr)
            and any(loops.runs_backward(loop) for loop in tree.enclosing_loops(call))
            for call in calls
        )

    def _inference_class_loop(self, function: cst.FunctionDef, cls: cst.ClassDef) -> bool:
        """A method with a DataLoader loop of its own in a plain class that holds its networks
        in eval mode (switched in ``__init__`` or any method, never back) and trains nothing:
        a pipeline's ``_tokenize_doc`` runs inference whatever its name."""
        if not self.context.analysis.calls.held_in_eval(cls):
            return False
        tree = self.context.analysis.tree
        flow = self.context.analysis.dataflow
        return any(isinstance(node, cst.For) and flow.is_dataloader_loop(node)
                   for node in tree.walk(function.body))

    def _in_block(self, call: cst.Call, blocks: dict[cst.CSTNode, Region]) -> bool:
        for anc in self.context.analysis.tree.ancestors(call):
            if anc in blocks:
                return True
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
        return False

    def _region_of(self, call: cst.Call) -> Region | None:
        """The evaluation region ``call`` runs in: its eval-named function, else an eval block."""
        tree = self.context.analysis.tree
        function = tree.enclosing_function(call)
        if function is not None and self._is_test(function):
            return None
        if function is not None and self._is_eval_function(function):
            if self._is_evaluation(function):
                return function
            # An evaluation-named function that trains (`evaluate` fitting a probe with
            # backward): its own `m.eval()` blocks are still evaluation code.
            return self._block_region(call, False)
        if function is not None and function.name.value in MODEL_MACHINERY:
            return None
        cls = None if function is None else tree.enclosing_class(function)
        model_method = (cls is not None and self.context.analysis.calls.is_module_class(cls)
                        and not self._trainer_class(cls))
        region = self._block_region(call, model_method)
        if region is None and not model_method:
            region = self._loader_loop(call)
        return region

    def _loader_loop(self, call: cst.Call) -> Region | None:
        """The outermost loop around ``call`` over a loader of held-out data
        (``for images, labels in testloader:``), in a script or beside training code."""
        found = None
        for loop in self.context.analysis.tree.enclosing_loops(call):
            if isinstance(loop, cst.For) and _names_eval_loader(loop.iter):
                found = loop
        return found

    def _block_region(self, call: cst.Call, model_method: bool) -> Region | None:
        """The ``m.eval()`` block ``call`` runs in, if any."""
        tree = self.context.analysis.tree
        blocks = self._eval_blocks()
        if not blocks:
            return None
        for anc in tree.ancestors(call):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            region = blocks.get(anc)
            if region is not None:
                if not model_method and any(
                        isinstance(a, cst.Return) for a in tree.ancestors(call)
                        if tree.is_inside(a, anc)):
                    # `m.eval(); return m(x)` in a helper: the output, graph and all, goes to
                    # the caller, whose grad mode and use of it decide.
                    return None
                # In a model's method, only the model switching itself (`self.eval()`) and
                # then running itself (`self(x)`, `self.forward(x)`) is its inference code;
                # submodule calls there are steps that callers usually run under no_grad.
                if model_method and not (_runs_self(call) and self._switches_self(region)):
                    return None
                if model_method and self._returned_by_api_method(call):
                    return None
                return region
        return None

    def _trainer_class(self, cls: cst.ClassDef) -> bool:
        """An ``nn.Module`` subclass that is a trainer, not a model: no ``forward`` of its own
        (nor in a same-file base), never runs itself (``self(x)``, ``self.forward(x)``: a model
        base class whose subclasses define ``forward``) and a method that trains (backward or
        an optimizer step).
        Holding networks as submodules makes it a module; its ``m.eval(); m(x)`` sampling
        blocks are evaluation code like any trainer's."""
        tree = self.context.analysis.tree
        todo, seen = [cls], set()
        while todo:
            current = todo.pop()
            if current.name.value in seen:
                continue
            seen.add(current.name.value)
            if any(isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward"
                   for stmt in current.body.body):
                return False
            for base in current.bases:
                if isinstance(base.value, cst.Name):
                    todo.extend(tree.classes_by_name.get(base.value.value, ()))
        methods = [stmt for stmt in cls.body.body if isinstance(stmt, cst.FunctionDef)]
        if any(isinstance(node, cst.Call) and _runs_self(node)
               for method in methods for node in tree.walk(method.body)):
            return False  # a model base class whose subclasses define forward (`self.forward(x)`)
        loops = self.context.analysis.loops
        return any(loops.function_trains(method) for method in methods)

    def _returned_by_api_method(self, call: cst.Call) -> bool:
        """``self.eval(); out = self(x); return Wrapper(out)`` in a model method not named for
        evaluation (``posterior()``): its output goes to the caller, whose grad mode and use
        of it decide (callers may differentiate it with respect to the input)."""
        tree = self.context.analysis.tree
        function = tree.enclosing_function(call)
        if function is None or EVAL_FUNCTION.match(function.name.value):
            return False
        return self.context.analysis.graph.flows_into_return(call, function)

    def _switches_self(self, region: Region) -> bool:
        return any(
            isinstance(node, cst.Call) and _is_eval_switch(node)
            and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name)
            and node.func.value.value == "self"
            for node in self.context.analysis.tree.walk(region)
        )

    def _region_nodes(self, region: Region) -> Iterable[cst.CSTNode]:
        tree = self.context.analysis.tree
        if isinstance(region, cst.FunctionDef):
            yield from tree.walk(region.body)
            return
        if isinstance(region, cst.For):
            yield from tree.walk(region)
            return
        for statement, owner in self._eval_blocks().items():
            if owner is region:
                yield statement
                yield from tree.walk(statement)
        # `m.eval(); out = m(x); m.train(); loss(out).backward()`: the forward's graph may be
        # what the backward after `.train()` needs, so that code counts as part of the region.
        for statement in self._region_tail.get(region, ()):
            yield from tree.walk(statement)

    def _is_evaluation(self, region: Region) -> bool:
        """No backward, optimizer step, autograd.grad or input gradients in the region."""
        cached = self._region_ok.get(region)
        if cached is None:
            cached = not any(self._needs_grad(node) for node in self._region_nodes(region))
            self._region_ok[region] = cached
        return cached

    def _statements_of(self, region: Region) -> list[cst.CSTNode]:
        """An eval block's statements in order, the tail after its ``.train()`` included."""
        cached = self._block_statements.get(region)
        if cached is None:
            cached = [statement for statement, owner in self._eval_blocks().items()
                      if owner is region]
            cached.extend(self._region_tail.get(region, ()))
            self._block_statements[region] = cached
        return cached

    def _facts(self, statement: cst.CSTNode) -> tuple[bool, frozenset[str], frozenset[str]]:
        """(needs grad, names bound, names read) of one statement of an eval block."""
        cached = self._statement_facts.get(statement)
        if cached is not None:
            return cached
        needs = False
        bound: set[str] = set()
        read: set[str] = set()
        for node in (statement, *self.context.analysis.tree.walk(statement)):
            if not needs and self._needs_grad(node):
                needs = True
            if isinstance(node, cst.Name):
                read.add(node.value)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    bound.update(names_in(target.target))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
                bound.update(names_in(node.target))
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                bound.update(names_in(node.asname.name))
            elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                  and node.func.attr.value == "requires_grad_"):
                bound.update(names_in(node.func.value))  # `x.requires_grad_()` changes `x`
        facts = (needs, frozenset(n.split(".", 1)[0] for n in bound), frozenset(read))
        self._statement_facts[statement] = facts
        return facts

    def _evaluates_in_block(self, call: cst.Call, region: Region) -> bool:
        """In an eval block that also trains or attacks (a notebook's top level, a ``main()``
        that evaluates, trains again and attacks), is ``call``'s statement evaluation?

        It is unless its own statement needs gradients, an earlier statement that needs them
        bound or switched on gradients of what it reads (``x.requires_grad_()``, ``adv =
        attack.perturb(x, y)``), or a later one that needs them reads what it computed,
        directly or through the statements between (``out = model(x)`` ... ``loss(out)
        .backward()``), or returns it to a caller. Unrelated training or attacks elsewhere in
        the block leave it evaluation code.
        """
        statements = self._statements_of(region)
        positions = self._statement_positions.get(region)
        if positions is None:
            positions = {id(statement): i for i, statement in enumerate(statements)}
            self._statement_positions[region] = positions
        tree = self.context.analysis.tree
        index = None
        for anc in tree.ancestors(call):  # the outermost statement of the block holding it
            at = positions.get(id(anc))
            if at is not None and statements[at] is anc:
                index = at
        if index is None:
            return False
        needs, tainted, read = self._facts(statements[index])
        if needs:
            return False
        for earlier in statements[:index]:
            e_needs, e_bound, _ = self._facts(earlier)
            if e_needs and e_bound & read:
                return False
        taint = set(tainted)
        for later in statements[index + 1:]:
            l_needs, l_bound, l_read = self._facts(later)
            if not l_read & taint:
                continue
            if l_needs or any(isinstance(n, cst.Return) for n in (later, *tree.walk(later))):
                return False  # backpropagated, or handed to a caller whose grad mode decides
            taint |= l_bound
        return True

    def _needs_grad(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute):
            # `out.grad_fn`, `fn.next_functions`: the code walks the graph the forward records
            # (a dependency tracer, a graph dump), which only exists with autograd on.
            return node.attr.value in _GRAPH_ATTRIBUTES
        if isinstance(node, cst.Assign):
            return any(
                isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                for t in node.targets
            ) and not (isinstance(node.value, cst.Name) and node.value.value == "False")
        if not isinstance(node, cst.Call):
            return False
        if is_backward_call(node) or is_optimizer_step(node):
            return True
        name = last_name(node.func) or ""
        if name in ("grad", "requires_grad_", "enable_grad", "vjp", "jvp", "vmap_grad"):
            return name != "grad" or self._is_autograd_grad(node)
        if _names_gradient_job(name if name in _VALUE_METHODS
                               else dotted_name(node.func) or name):
            return True  # `attack.generate(x, y)`, `saliency(model, x)`
        if any(
            a.keyword is not None
            and (a.keyword.value == "requires_grad" or a.keyword.value in DERIVATIVE_REQUESTS)
            and not (isinstance(a.value, cst.Name) and a.value.value == "False")
            for a in node.args
        ):
            return True  # `model(batch, compute_force=True)`: forces are -dE/dx, by autograd
        if _mode_switch(node):
            return False  # `model.train()`: a switch, not a call of this file's `def train`
        loops = self.context.analysis.loops
        functions = self.context.analysis.tree.functions_by_name.get(name, ())
        return any(loops.function_trains(f) or self._reads_graph(f) for f in functions)

    def _reads_graph(self, function: cst.FunctionDef) -> bool:
        """Does a same-file function walk the autograd graph (``o.grad_fn``), so that a
        forward whose output it is given must record one? Cached per function."""
        cached = self._graph_readers.get(function)
        if cached is None:
            cached = any(isinstance(n, cst.Attribute) and n.attr.value in _GRAPH_ATTRIBUTES
                         for n in self.context.analysis.tree.walk(function.body))
            self._graph_readers[function] = cached
        return cached

    def _fallback_with_grad(self, call: cst.Call) -> bool:
        """Is ``call`` in the ``except`` handler of a ``try`` that first ran under no_grad: a
        deliberate retry with autograd on, for models whose forward needs it?"""
        tree = self.context.analysis.tree
        grad = self.context.analysis.grad
        for anc in tree.ancestors(call):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(anc, cst.ExceptHandler):
                attempt = tree.parent(anc)
                if isinstance(attempt, cst.Try) and any(
                        isinstance(node, cst.With) and isinstance(node.body, cst.IndentedBlock)
                        and node.body.body and grad.grad_mode_at(node.body.body[0]) == "off"
                        for node in tree.walk(attempt.body)):
                    return True
        return False

    def _is_autograd_grad(self, call: cst.Call) -> bool:
        qualified = self.context.analysis.imports.qualified_name(call.func) or ""
        return qualified.endswith("autograd.grad") or qualified.startswith("torch.func")

    def _is_forward(self, call: cst.Call) -> bool:
        if _runs_self(call) and self._forward_without_grad(call):
            return False  # `@torch.no_grad() def forward`: the model records no graph itself
        # `solver.model()`, `self.net()`: a forward takes inputs, except a model's explicit
        # run of its own forward over inputs it holds (a graph network: `self.forward()`).
        if not call.args:
            if not (isinstance(call.func, cst.Attribute) and _runs_self(call)):
                return False
            cls = self.context.analysis.tree.enclosing_class(call)
            return cls is not None and self.context.analysis.calls.is_module_class(cls)
        if isinstance(call.func, cst.Name) and call.func.value == "self":
            # `self(x)` in a model's own inference method.
            cls = self.context.analysis.tree.enclosing_class(call)
            return cls is not None and self.context.analysis.calls.is_module_class(cls)
        analysis = self.context.analysis
        if not analysis.calls.is_model_forward(call):
            # `self.network.forward_masks(x)` after `self.network.eval()`.
            return analysis.calls.is_model_method_forward(call, in_batch_loop=any(
                analysis.dataflow.is_dataloader_loop(lp)
                for lp in analysis.tree.enclosing_loops(call))) and not (
                    # `model.test_step(batch)`: one batch's step, not a `test_model(...)` helper
                    (_HELPER_VERB.match(last_name(call.func) or "")
                     and not EVAL_STEP_HOOK.match(last_name(call.func) or ""))
                    or self._defined_without_grad(last_name(call.func) or "")
                    or self._project_method_without_grad(call))
        name = last_name(call.func) or ""
        if _HELPER_VERB.match(name):
            return False
        if analysis.calls.is_loss_call(call):
            # `ece_criterion(logits, labels)`: a loss module (this file's `nn.Module`
            # subclass too) scores outputs computed before; it is no model.
            return False
        # `postprocess_model(model)`, `wrap(self.model)`: a helper that takes the model.
        if any(self._names_a_model(arg.value) for arg in call.args):
            return False
        # A same-file function or an imported callable is a helper, not a module call.
        return not isinstance(call.func, cst.Name) or (
            name not in self.context.analysis.tree.functions_by_name
            and name not in self.context.analysis.imports.aliases
        )

    def _shared_step(self, call: cst.Call) -> bool:
        """``self.feed_batch(batch)`` in a class that is no model (a trainer, a component):
        a method of the same class that runs the model itself with autograd on, trains
        nothing, and is no evaluation code on its own (training code calls it too). Its
        forward runs in whatever mode the caller chose: after the caller's ``.eval()`` it is
        a forward, reported at the call (the helper's own forward is its training callers'
        business)."""
        func = call.func
        if self._in_shared or not (
                call.args and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value == "self"):
            return False
        cls = self.context.analysis.tree.enclosing_class(call)
        if cls is None or self.context.analysis.calls.is_module_class(cls):
            return False
        name = func.attr.value
        key = (id(cls), name)
        known = self._shared.get(key)
        if known is None:
            known = self._shared[key] = self._runs_shared_forward(cls, name)
        return known

    def _runs_shared_forward(self, cls: cst.ClassDef, name: str) -> bool:
        method = next((s for s in cls.body.body
                       if isinstance(s, cst.FunctionDef) and s.name.value == name), None)
        if method is None or _HELPER_VERB.match(name) or self._defined_without_grad(name):
            return False
        self._in_shared = True
        try:
            if self._is_eval_function(method) or self._runs_inference(method):
                return False  # its own forwards are reported there
            calls = [c for c in self.context.analysis.tree.walk(method.body)
                     if isinstance(c, cst.Call)]
            if any(last_name(c.func) in _TRAINING_CALLS for c in calls):
                return False
            grad = self.context.analysis.grad
            return any(self._is_forward(c) and grad.grad_mode_at(c, callers=False) == "on"
                       for c in calls)
        finally:
            self._in_shared = False

    def _forward_without_grad(self, call: cst.Call) -> bool:
        """Does the class ``self(x)`` runs in define a ``forward`` that switches gradients
        off for its own work (a frozen feature extractor's decorated ``forward``)?"""
        tree = self.context.analysis.tree
        cls = tree.enclosing_class(call)
        if cls is None:
            return False
        grad = self.context.analysis.grad
        return any(
            isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward"
            and isinstance(stmt.body, cst.IndentedBlock) and stmt.body.body
            and grad.grad_mode_at(stmt.body.body[0], callers=False) == "off"
            for stmt in cls.body.body)

    def _defined_without_grad(self, method: str) -> bool:
        """A same-file definition of ``method`` turns gradients off for its work (``def
        predict(self, loader): with torch.no_grad(): ...``, or decorated): it chose its grad
        mode itself."""
        cached = self._grad_off_methods.get(method)
        if cached is None:
            analysis = self.context.analysis
            # A framework hook (`predict_step`) runs without grad only where the framework
            # calls it: called directly, only its own switches count.
            cached = any(
                isinstance(node, cst.SimpleStatementLine)
                and analysis.grad.grad_mode_at(node, callers=not framework_eval_hook(
                    func.name.value, analysis.tree.enclosing_class(func) is not None)) != "on"
                for func in analysis.tree.functions_by_name.get(method, ())
                for node in analysis.tree.walk(func.body))
            self._grad_off_methods[method] = cached
        return cached

    def _project_method_without_grad(self, call: cst.Call) -> bool:
        """``self.encoder.encode(texts)`` or ``encoder.encode(texts)`` where the receiver
        holds a project class from another module whose ``encode`` is decorated
        ``@torch.no_grad()``: the method chose its grad mode itself."""
        view = self.context.project
        func = call.func
        if view is None or not isinstance(func, cst.Attribute):
            return False
        receiver = dotted_name(func.value)
        owner = None if receiver is None else (
            self.context.analysis.graph.project_class_of(receiver, call))
        return owner is not None and view.method_without_grad(owner, func.attr.value)

    def _names_a_model(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        name = last_name(expr) or ""
        return name.lower() in ("model", "net", "module", "self") or name.endswith("_model")

    # -- the visit ------------------------------------------------------------------------

    def _shape_probe(self, call: cst.Call) -> bool:
        """A forward whose output is only measured (``out.shape[1]``, ``out.size(-1)``,
        ``len(out)``): a probe of the model's output shape, whose graph dies at once."""
        return self._only_read_by(call, _MEASURES, measured=True)

    def _detaches_own_forward(self, function: cst.FunctionDef) -> bool:
        """A model method that runs itself (``self(x)``, ``self.forward(x)``) and detaches
        every such output itself (``return self(g).detach()``, ``out = self(x)`` then
        ``out.detach().numpy()``): nothing it hands out keeps the graph, so recording one
        is waste whatever its caller does. A run whose output is dropped at once (``self(g)``
        as a statement, to fill the features its forward records) keeps nothing either."""
        tree = self.context.analysis.tree
        runs = [node for node in tree.walk(function.body)
                if isinstance(node, cst.Call) and _runs_self(node)]
        detached = [call for call in runs if self._only_read_by(call, _DETACHING)]
        return bool(detached) and all(
            call in detached or isinstance(tree.parent(call), cst.Expr) for call in runs)

    def _only_read_by(self, call: cst.Call, attributes: frozenset[str], *,
                      measured: bool = False) -> bool:
        """Is the output of ``call`` read only through these attributes, at once or through
        the one name it is bound to (and, for ``measured``, by ``len``)?"""
        tree = self.context.analysis.tree
        parent = tree.parent(call)
        if isinstance(parent, cst.Attribute) and parent.attr.value in attributes:
            return True
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return False
        name = parent.targets[0].target.value
        scope = tree.enclosing_function(call)
        if scope is None:
            return False
        uses = [n for n in tree.walk(scope.body) if isinstance(n, cst.Name)
                and n.value == name and n is not parent.targets[0].target]
        return bool(uses) and all(self._read_by(use, attributes, measured) for use in uses)

    def _read_by(self, use: cst.Name, attributes: frozenset[str], measured: bool) -> bool:
        parent = self.context.analysis.tree.parent(use)
        if isinstance(parent, cst.Attribute):
            return parent.value is use and parent.attr.value in attributes
        if measured and isinstance(parent, cst.Arg):
            call = self.context.analysis.tree.parent(parent)
            return (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                    and call.func.value == "len")
        return False

    def _public_entry(self, node: cst.Call) -> bool:
        """Is the forward in a ``predict`` (``predict_proba``) API that users call directly,
        the scikit-learn way? The project's own callers running it with grad off
        (``evaluate`` calling ``self.predict(x)`` under ``no_grad``) do not decide for them.
        Steps and helpers named for evaluation (``evaluate_step``, ``eval_one_batch``) run
        where their callers run them."""
        function = self.context.analysis.tree.enclosing_function(node)
        return function is not None and function.name.value in PREDICT_API

    def visit_Call(self, node: cst.Call) -> None:
        if not self._active():
            return
        shared = not self._is_forward(node)
        if shared and not self._shared_step(node):
            return
        if self._shape_probe(node):
            return
        region = self._region_of(node)
        if region is None or any(
                anc in self._reported for anc in self.context.analysis.tree.ancestors(node)):
            return
        if region in self._optional_modes:
            if not shared and self._optional_mode_forward(node, region):
                self._reported.add(node)
                self.report(node)
            return
        if shared and isinstance(region, cst.FunctionDef) and not any(
                _is_eval_switch(c) for c in self.context.analysis.tree.calls_within(
                    region, "eval")):
            # A shared step counts where a switch to eval (or a loop over held-out data)
            # makes evaluation code, not in a function evaluation by its name alone: a
            # framework's `predict` often runs under a no-grad `__call__` it cannot see.
            return
        if self._fallback_with_grad(node):
            return
        grad = self.context.analysis.grad
        if grad.grad_mode_at(node) != "on" and not (
                self._public_entry(node) and grad.grad_mode_at(node, callers=False) == "on"):
            return
        if not self._is_evaluation(region) and (
                isinstance(region, (cst.FunctionDef, cst.For))
                or not self._evaluates_in_block(node, region)):
            return
        self._reported.add(node)
        self.report(node)

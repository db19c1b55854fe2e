"""What a call is, in training-code terms: backward, optimizer step, zero_grad, loss, forward.

Every rule needs the same answers, and they are all name heuristics, so they live here once.
The heuristics lean conservative: a call is only called a loss or a model forward when its
name says so plainly, because a wrong "yes" turns into a false alarm in every rule downstream.

Pure syntactic questions are module functions; questions that need the file's imports or
its class and assignment facts are methods of :class:`CallClassifier`.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import TreeIndex
from memlint.vocabulary import (
    EVAL_STEP_HOOK,
    FUNCTIONAL_LOSSES,
    INFERENCE_METHOD,
    MODULE_API,
    MODULE_BASES,
    NOT_A_FORWARD,
    OPTIMIZER_NAME,
    QUANTITY_METHOD,
    SCALER_NAME,
    STATE_METHOD,
    forward_by_name,
    is_model_word,
    names_a_loss,
)

if TYPE_CHECKING:
    from memlint.project.view import ModuleView

# Receivers whose `.backward(x)` / `.step()` belong to a framework object, not a tensor or a
# torch optimizer: the value is the first argument, and the engine clears gradients itself.
# Objects whose `backward(loss, ...)` takes the loss: `accelerator.backward(loss)`,
# `self.distributed.backward(loss, model)` (a distribution strategy), `booster.backward(...)`.
_FRAMEWORK_RECEIVER = re.compile(
    r"accelerator|engine|fabric|trainer|deepspeed|strateg|distributed|booster", re.IGNORECASE)
# `ema_optimizer.step()` (MixMatch's WeightEMA, CoSSL): it averages the weights the real
# optimizer just stepped, and reads no gradient.
_AVERAGER = re.compile(r"(?:^|_)ema(?:$|_)", re.IGNORECASE)

# `log_loss(...)`, `plot_losses(...)`, `loss_scale(...)`: named after a loss, but report or
# read one rather than compute one. `evaluate_loss(net, it)` averages one over a dataset into a
# number, `_make_empty_loss()` builds a fresh zero, and `jacobian_loss_wrt_inputs(...)` returns
# a derivative of one.
_NOT_A_LOSS = re.compile(
    r"^_*(?:log|print|plot|save|record|update|reset|show|report|track|write|add|append|get"
    r"|evaluate|eval|validate|test|make_empty|make_zero|zero|empty|init)_"
    r"|scale|meter|history|hist$|logger|tracker|jacobian|hessian|_wrt(?:_|$)",
    re.IGNORECASE,
)


def _class_like(name: str) -> bool:
    """A class name (``MSELoss``, ``FocalLoss``): a constructor builds a loss, it computes none.
    A capital before an underscore is a GAN's side instead (``D_loss_fn``, ``G_criterion``),
    unless every part is capitalised and the last names a loss class (``KL_Loss``,
    ``Focal_Loss``: an ``nn.Module`` spelled with underscores)."""
    bare = name.lstrip("_")  # `_FocalLoss`: a private class
    if not bare[:1].isupper():
        return False
    parts = bare.split("_")
    return len(parts) == 1 or (all(part[:1].isupper() for part in parts)
                               and parts[-1].endswith("Loss"))


# Metrics libraries compute on the host and return numbers.
_HOST_LIBRARIES = ("sklearn.", "numpy.", "scipy.", "math.", "statistics.")
_MODULE_BASE_NAME = re.compile(
    r"(?:Module|Model|Sequential|ModuleList|ModuleDict|Network|Net)$"
)
# Of those, the ones that always run the model to predict, for any model-named receiver
# (`embed_input` may prepare inputs for gradient-based attribution):
_PREDICT_METHOD = re.compile(r"^(?:forward_\w+|predict\w*|infer\w*|inference\w*)$")


# Methods of NumPy arrays (and pandas objects) that torch tensors lack, and methods both have
# that keep the kind of array they are called on.
_ARRAY_ONLY_METHODS = frozenset({"astype", "to_numpy"})
_SHAPE_KEEPING = frozenset({"reshape", "ravel", "flatten", "squeeze", "copy", "transpose"})


def last_name(expr: cst.BaseExpression) -> str | None:
    """The final identifier of a call target: ``self.opt.step`` -> ``step``."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    """``x`` for ``x.method(...)``, else None."""
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def receiver_name(call: cst.Call) -> str | None:
    """Dotted name of the receiver; ``opts[0].step()`` reads as ``opts``."""
    recv = receiver(call)
    while isinstance(recv, cst.Subscript):
        recv = recv.value
    return None if recv is None else dotted_name(recv)


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def first_arg(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            return arg.value
    return None


def is_backward_call(call: cst.Call) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
    ``self.manual_backward(loss)``, ``torch.autograd.backward(loss)``."""
    name = last_name(call.func)
    return name in ("backward", "manual_backward")


def backward_value(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor whose graph a backward call consumes (``scaler.scale(x)`` unwrapped)."""
    if not is_backward_call(call):
        return None
    recv = receiver(call)
    value: cst.BaseExpression | None
    recv_name = None if recv is None else dotted_name(recv)
    if recv is None or last_name(call.func) == "manual_backward" or recv_name in (
        "torch.autograd", "autograd"
    ) or (recv_name is not None and _FRAMEWORK_RECEIVER.search(recv_name)):
        value = first_arg(call)
    else:
        value = recv
    if isinstance(value, cst.Call) and method_name(value) == "scale" and value.args:
        value = first_arg(value)
    return value


def is_scaler_step(call: cst.Call) -> bool:
    name = receiver_name(call)
    return (
        method_name(call) == "step"
        and name is not None
        and bool(SCALER_NAME.search(name.rsplit(".", 1)[-1]))
        and first_arg(call) is not None
    )


def is_optimizer_name(name: str | None) -> bool:
    """Does a dotted name look like an optimizer (``optimizer``, ``self.opt_g``, ``optD``)?"""
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return (bool(OPTIMIZER_NAME.search(last)) and not _FRAMEWORK_RECEIVER.search(last)
            and not _AVERAGER.search(last))


def is_optimizer_step(call: cst.Call) -> bool:
    """``<optimizer>.step()`` by receiver name, or ``scaler.step(opt)``.

    DeepSpeed ``engine.step()`` and Accelerate/Lightning objects are excluded: they own the
    gradient clearing. Schedulers (``scheduler.step()``) do not match the optimizer names.
    """
    if method_name(call) != "step":
        return False
    if is_scaler_step(call):
        return True
    return is_optimizer_name(receiver_name(call))


def step_optimizer(call: cst.Call) -> str | None:
    """The dotted name of the optimizer a step call steps (``scaler.step(opt)`` -> ``opt``)."""
    if is_scaler_step(call):
        arg = first_arg(call)
        return None if arg is None else dotted_name(arg)
    return receiver_name(call)


def is_zero_grad(call: cst.Call) -> bool:
    """``optimizer.zero_grad()`` or ``model.zero_grad()`` (any receiver)."""
    return method_name(call) == "zero_grad"


def is_grad_clearing_call(call: cst.Call) -> bool:
    """``zero_grad()`` or ``p.grad.zero_()`` / ``p.grad.detach_()`` / ``p.grad.fill_(0)``."""
    if is_zero_grad(call):
        return True
    recv = receiver(call)
    return (
        method_name(call) in ("zero_", "detach_", "fill_")
        and isinstance(recv, cst.Attribute)
        and recv.attr.value == "grad"
    )


def is_grad_clearing_assign(node: cst.CSTNode) -> bool:
    """``p.grad = None`` (the tuning guide's manual reset)."""
    if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Name):
        return False
    if node.value.value != "None":
        return False
    return any(
        isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad"
        for t in node.targets
    )


def is_generate_call(call: cst.Call) -> bool:
    """``model.generate(...)``: Hugging Face decorates it with no_grad, so it is no forward."""
    name = receiver_name(call)
    return method_name(call) == "generate" and name is not None and is_model_word(
        name.rsplit(".", 1)[-1]
    )


_GRAD_SWITCHES = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "enable_grad"})


def _switches_grad(func: cst.FunctionDef, tree: TreeIndex, depth: int = 0) -> bool:
    """The method sets the grad mode itself: a grad switch as a decorator or around a
    ``with`` block of its body, or in a method of its class it hands the work to
    (``self._predict_func(...)``, a few calls deep)."""
    if any(last_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
           in _GRAD_SWITCHES for d in func.decorators):
        return True
    cls = tree.enclosing_class(func)
    for node in tree.walk(func.body):
        if isinstance(node, cst.With) and any(
                isinstance(item.item, cst.Call) and last_name(item.item.func) in _GRAD_SWITCHES
                for item in node.items):
            return True
        if (depth < 3 and cls is not None and isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name) and node.func.value.value == "self"
                and any(tree.enclosing_class(f) is cls and f is not func
                        and tree.enclosing_function(f) is None
                        and _switches_grad(f, tree, depth + 1)
                        for f in tree.functions_by_name.get(node.func.attr.value, ()))):
            return True
    return False


def _held_key(expr: cst.BaseExpression) -> str | None:
    """``self.model`` -> ``self.model``; ``self.heads[lang]`` -> ``self.heads[]``: a network
    an object holds, whatever key picks it from a collection."""
    if isinstance(expr, cst.Subscript):
        inner = dotted_name(expr.value)
        return None if inner is None else f"{inner}[]"
    return dotted_name(expr)


def is_model_collection_name(name: str) -> bool:
    """A name for several models: ``models``, ``text_encoders``, ``self.nets``."""
    low = name.lower()
    return low.endswith("s") and is_model_word(low[:-1])


# Hugging Face's inference pipelines: called, they run the model under no-grad themselves.
_PIPELINE_FACTORIES = frozenset({"transformers.pipeline", "transformers.pipelines.pipeline"})


def _mode_switch_arguments(call: cst.Call) -> bool:
    """``.eval()``, ``.train()``, ``.train(False)``, ``.train(mode)``: a module's switch, not
    ``trainer.train(dataset, epochs=3)``."""
    if not call.args:
        return True
    if len(call.args) > 1 or call.args[0].star:
        return False
    keyword = call.args[0].keyword
    return keyword is None or keyword.value == "mode"


class CallClassifier:
    """Call questions that need the file: imports, loss instances, nn.Module classes."""

    def __init__(self, tree: TreeIndex, project: ModuleView | None = None) -> None:
        self.tree = tree
        self.project = project
        self._module_class_cache: dict[cst.ClassDef, bool] = {}
        self._held_eval_cache: dict[cst.ClassDef, frozenset[str]] = {}
        self._switched_cache: dict[cst.CSTNode, frozenset[str]] = {}
        self._switched_attributes: dict[cst.ClassDef, frozenset[str]] = {}
        self._sets_grad_cache: dict[cst.FunctionDef, bool] = {}

    def is_module_class(self, cls: cst.ClassDef) -> bool:
        """Model code: the class defines ``forward``, or a base is named like a module
        (``nn.Module``, ``PreTrainedModel``, ``ResNet``). A base defined in this file or
        elsewhere in the project is followed instead of trusting its name.

        Its methods (``encode``, ``predict_boxes``) run inside some caller's forward, so
        evaluation-style names there say nothing about autograd.
        """
        cached = self._module_class_cache.get(cls)
        if cached is None:
            cached = self._compute_is_module_class(cls, set())
            self._module_class_cache[cls] = cached
        return cached

    def _compute_is_module_class(self, cls: cst.ClassDef, seen: set[str]) -> bool:
        seen.add(cls.name.value)
        if any(
            isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward"
            for stmt in cls.body.body
        ):
            return True
        for base in cls.bases:
            name = last_name(base.value)
            if name is None or name in seen:
                continue
            # A base the project defines decides by what it is, not by its name: a plain
            # `class TabModel(BaseEstimator)` or `class BaseModel(ABC)` holding networks
            # makes no nn.Module of its subclasses.
            local = self.tree.classes_by_name.get(name, ()) if isinstance(
                base.value, cst.Name) else ()
            if local:
                if any(self._compute_is_module_class(c, seen) for c in local):
                    return True
                continue
            written = dotted_name(base.value)
            if self.project is not None and written is not None:
                if self.project.is_module_class(written):
                    return True  # a project class from another module that is a module
                if self.project.is_plain_class(written):
                    continue
            if _MODULE_BASE_NAME.search(name):
                return True
        return False

    @cached_property
    def _module_classes(self) -> frozenset[str]:
        """Classes in this file that subclass an nn.Module-like base (one level, by name)."""
        found: set[str] = set()
        for name, defs in self.tree.classes_by_name.items():
            for cls in defs:
                for base in cls.bases:
                    base_name = last_name(base.value)
                    if base_name in MODULE_BASES or base_name in found:
                        found.add(name)
        return frozenset(found)

    def _bound_names(self, callee_ok: frozenset[str] | None, suffix: str | None) -> frozenset[str]:
        """Names (or ``self.<attr>`` attrs) assigned from a call to a matching callee."""
        bound: set[str] = set()
        for callee, calls in self.tree.calls_by_name.items():
            if not (
                (callee_ok is not None and callee in callee_ok)
                or (suffix is not None and callee.endswith(suffix)
                    and callee.lstrip("_")[:1].isupper())
            ):
                continue
            for call in calls:
                parent = self._chain_parent(call)
                if isinstance(parent, cst.Assign):
                    for target in parent.targets:
                        name = last_name(target.target)
                        if name is not None:
                            bound.add(name)
                elif isinstance(parent, cst.AnnAssign):
                    name = last_name(parent.target)
                    if name is not None:
                        bound.add(name)
        return frozenset(bound)

    def _chain_parent(self, call: cst.Call) -> cst.CSTNode | None:
        """What holds the whole method chain a constructor call starts
        (``nn.MSELoss().to(device)``, ``Net().cuda()``): an assignment, a return, ..."""
        parent = self.tree.parent(call)
        while isinstance(parent, (cst.Attribute, cst.Call)):
            parent = self.tree.parent(parent)
        return parent

    @cached_property
    def loss_instances(self) -> frozenset[str]:
        """Names bound to ``nn.XxxLoss()`` instances (``criterion``, ``self.crit``, ``bce``)."""
        return self._bound_names(None, "Loss")

    @cached_property
    def module_instances(self) -> frozenset[str]:
        """Names bound to instances of this file's nn.Module subclasses (``clf = MyNet()``),
        also through a same-file function that returns one (``self.net =
        self._build_model(dim).to(device)`` where ``_build_model`` returns ``Net(dim)``)."""
        if not self._module_classes:
            return frozenset()
        return self._bound_names(self._module_classes | self._module_factories, None)

    @cached_property
    def _module_factories(self) -> frozenset[str]:
        """Same-file functions that return a new instance of one of this file's nn.Module
        subclasses (``return Net(dim)``, maybe moved: ``return Net(dim).to(device)``)."""
        found: set[str] = set()
        for name in self._module_classes:
            for call in self.tree.calls_by_name.get(name, ()):
                parent = self._chain_parent(call)
                if isinstance(parent, cst.Return):
                    func = self.tree.enclosing_function(parent)
                    if func is not None and func.name.value not in ("forward", "__call__"):
                        found.add(func.name.value)
        return frozenset(found)

    def is_loss_call(self, call: cst.Call) -> bool:
        """``criterion(...)``, ``*loss*(...)``, ``F.*_loss(...)``, a bound ``nn.*Loss()`` instance.

        Constructors (``nn.MSELoss()``), and helpers that log or read a loss (``log_loss``,
        ``get_loss_scale``) are not loss calls. Names imported from outside torch
        (``sklearn.metrics.log_loss``) that compute on the host are not either.
        """
        name = last_name(call.func)
        if name is None or _class_like(name):
            return False
        qualified = self.tree.imports.qualified_name(call.func)
        if qualified is not None and qualified.startswith("torch.nn.functional."):
            return name.endswith("_loss") or name in FUNCTIONAL_LOSSES
        if qualified is not None and qualified.startswith(_HOST_LIBRARIES):
            return False
        if name in self.loss_instances:
            return True
        if isinstance(call.func, cst.Name) and name in self.tree.functions_by_name:
            # `val_loss(net, data)` defined in this file: its returns decide, not its name.
            return False
        if not names_a_loss(name):
            return False
        return not _NOT_A_LOSS.search(name)

    def is_model_method_forward(self, call: cst.Call, *, in_batch_loop: bool) -> bool:
        """A forward through a named inference method of a model: ``self.network.forward_masks(
        x)``, ``self.model.predict(src)`` or ``esrnn.predict(batch)`` after the same function
        switched that receiver to eval; ``self.model.inference_scores(h, t)`` on a model-named
        receiver in a loop over batches (``in_batch_loop``; forward/predict/infer names only:
        elsewhere ``model.predict(data)`` is as often a high-level wrapper that turns
        gradients off itself). Methods named for anything but inference (``valid_length``,
        ``parse_sentences_no_grad``) are not."""
        func = call.func
        if not isinstance(func, cst.Attribute) or not call.args or self.given_host_array(call):
            return False
        method = func.attr.value
        if EVAL_STEP_HOOK.match(method):
            # `model.validation_step(batch)` in a trainer's own loop: a forward only where the
            # receiver was switched to eval (below), never by its name in a batch loop.
            in_batch_loop = False
        elif "no_grad" in method or NOT_A_FORWARD.search(method + "_"):
            return False
        elif not INFERENCE_METHOD.match(method):
            # `model.eval()` then, for each batch, `model.deeptabular(X)`: a sub-network of
            # the model, or a method computing from the batch, on a plain name switched to
            # eval below; not the module API (`model.load_state_dict(sd)`), a method changing
            # its state or one named for a quantity, a metric or text.
            if (not in_batch_loop or not isinstance(func.value, cst.Name)
                    or func.value.value == "self" or method.startswith("_")
                    or method in MODULE_API or STATE_METHOD.match(method)
                    or QUANTITY_METHOD.search(method)):
                return False
            in_batch_loop = False
        recv = dotted_name(func.value)
        if recv is None:
            # `self._tokenizer[lang].predict(batch, reprs)`: one of the networks a class holds
            # by key, each switched to eval where it was loaded.
            held = _held_key(func.value)
            return held is not None and held in self._held_in_eval(call)
        if (in_batch_loop and _PREDICT_METHOD.match(method)
                and is_model_word(recv.rsplit(".", 1)[-1])):
            return True
        scope = self.tree.enclosing_function(call)
        return any(
            isinstance(switch.func, cst.Attribute) and not switch.args
            and dotted_name(switch.func.value) == recv
            and self.tree.enclosing_function(switch) is scope
            for switch in self.tree.calls_within(scope or self.tree.module, "eval")) or (
                _held_key(func.value) in self._held_in_eval(call))

    def _held_in_eval(self, call: cst.Call) -> frozenset[str]:
        cls = self.tree.enclosing_class(call)
        return frozenset() if cls is None else self.held_in_eval(cls)

    def held_in_eval(self, cls: cst.ClassDef) -> frozenset[str]:
        """The networks (``self.x``, ``self.x[...]`` as ``self.x[]``) that a plain class
        switches to eval (in ``__init__`` or any method) and never back to training, in a
        class that trains nothing: an inference wrapper's models."""
        cached = self._held_eval_cache.get(cls)
        if cached is None:
            cached = frozenset()
            if not self.is_module_class(cls) and not any(
                    self.tree.enclosing_class(call) is cls and not (name == "train" and call.args)
                    for name in ("backward", "step", "train")
                    for call in self.tree.calls_within(cls, name)):
                # (a class that trains, or switches a network back to training, has phases)
                cached = frozenset(
                    key for call in self.tree.calls_within(cls, "eval")
                    if not call.args and isinstance(call.func, cst.Attribute)
                    and self.tree.enclosing_class(call) is cls
                    and (key := _held_key(call.func.value)) is not None
                    and key.startswith("self."))
            self._held_eval_cache[cls] = cached
        return cached

    def is_model_forward(self, call: cst.Call, *, include_generate: bool = False) -> bool:
        """A module call: ``model(x)``, ``self.net(x)``, ``netG(z)``, ``encoder(x)``,
        ``m.forward(x)``, or a name bound to one of this file's nn.Module subclasses.

        Decided by name only, so ``model(x)`` counts and ``f(x)`` does not; ``generate`` is left
        out unless asked for, because Hugging Face already runs it under no_grad.
        """
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "__call__":
            func = func.value  # `self.__call__(*batch)` runs the module as `self(*batch)` does
        name = last_name(func)
        if name is None:
            return False
        if name == "forward" and isinstance(func, cst.Attribute):
            return True
        if include_generate and is_generate_call(call):
            return True
        if name in self.module_instances:
            return True
        if isinstance(func, cst.Name) and name in self.tree.functions_by_name:
            # `evaluate_model(model, loader)`: a helper defined in this file, not a module call.
            return False
        if isinstance(func, cst.Name) and name in self.switched_names(call):
            # `bm.eval()` earlier in the function, then `bm(x)`: whatever its name, a module.
            return True
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value == "self" and name in self.switched_attributes(call)):
            # `self.a2gnn.train()` in one method, `self.a2gnn(data)` in another: a module.
            return True
        if self._own_method_sets_grad(call, name):
            # `self.predict_net(x)` where the class defines `predict_net` and it chooses its
            # own grad mode: the class's method, not a sub-network it holds.
            return False
        if self._holds_pipeline(call):
            return False
        if self.given_host_array(call):
            return False
        return forward_by_name(name)

    def given_host_array(self, call: cst.Call) -> bool:
        """``clf.predict(features)`` where ``features`` is a NumPy array
        (``x.astype(np.float32)``, ``np.c_[x, y]``, ``np.stack(rows)``, also rebound through a
        scaler's ``transform(features)``): another library's model (scikit-learn's), since a
        torch module is given tensors."""
        first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
        return first is not None and self._host_array(first, call, frozenset())

    def _host_array(self, expr: cst.BaseExpression, at: cst.CSTNode,
                    seen: frozenset[str]) -> bool:
        imports = self.tree.imports
        if isinstance(expr, cst.Subscript):  # `np.c_[x, y]`
            return (imports.qualified_name(expr.value) or "") in ("numpy.c_", "numpy.r_")
        if isinstance(expr, cst.Call):
            if (imports.qualified_name(expr.func) or "").startswith("numpy."):
                return True
            if not isinstance(expr.func, cst.Attribute):
                return False
            method = expr.func.attr.value
            if method in _ARRAY_ONLY_METHODS:
                return True  # torch tensors have neither
            return method in _SHAPE_KEEPING and self._host_array(expr.func.value, at, seen)
        if not isinstance(expr, cst.Name) or expr.value in seen:
            return False
        values = [a.value for a in self.tree.assignments_to(expr.value, at)]
        seen = seen | {expr.value}
        direct = False
        for value in values:
            if self._host_array(value, at, seen):
                direct = True
            elif not (isinstance(value, cst.Call) and any(
                    isinstance(a.value, cst.Name) and a.value.value == expr.value
                    for a in value.args)):
                return False  # bound to something else (a transform of itself aside)
        return direct

    def _holds_pipeline(self, call: cst.Call) -> bool:
        """``self.model(batch)`` where every binding of ``self.model`` in its class (of
        ``model`` in its function) is a Hugging Face ``pipeline(...)``: the pipeline runs
        the network under no-grad itself and hands back Python objects (labels, scores,
        answers), no forward output."""
        written = dotted_name(call.func)
        if written is None or not self._calls_pipeline:
            return False
        tree = self.tree
        values = [assign.value for assign in tree.assignments_to(written, call)]
        return bool(values) and all(
            isinstance(v, cst.Call)
            and (tree.imports.qualified_name(v.func) or "") in _PIPELINE_FACTORIES
            for v in values)

    @cached_property
    def _calls_pipeline(self) -> bool:
        """Does the file build a Hugging Face pipeline anywhere? (Most do not: then no call
        needs its bindings read.)"""
        imports = self.tree.imports
        local = {name for name, target in imports.aliases.items()
                 if target in _PIPELINE_FACTORIES}  # `from transformers import pipeline as p`
        return any(imports.qualified_name(call.func) in _PIPELINE_FACTORIES
                   for name, calls in self.tree.calls_by_name.items()
                   if name.rpartition(".")[2] == "pipeline" or name in local for call in calls)

    def switched_names(self, node: cst.CSTNode) -> frozenset[str]:
        """Plain names that the function around ``node`` switches to eval (``bm.eval()``):
        whatever they are called, they hold modules (``for bm in benchmarks.values():
        bm.eval()``, then ``for name, bm in benchmarks.items(): bm(x)``)."""
        scope: cst.CSTNode | None = self.tree.enclosing_function(node)
        if scope is None:
            return frozenset()
        cached = self._switched_cache.get(scope)
        if cached is None:
            tree = self.tree
            cached = frozenset(
                n.func.value.value
                for n in tree.calls_within(scope, "eval")  # the index, not a walk
                if not n.args and isinstance(n.func, cst.Attribute)
                and isinstance(n.func.value, cst.Name) and tree.enclosing_function(n) is scope
            )
            self._switched_cache[scope] = cached
        return cached

    def switched_attributes(self, node: cst.CSTNode) -> frozenset[str]:
        """Attributes of ``self`` that a method of the class around ``node`` switches to
        training or evaluation mode (``self.gnn.train()``, ``self.backbone.eval()``): the
        object's modules, however they are named or built (``self.gnn =
        self.init_model(**kwargs)``)."""
        cls = self.tree.enclosing_class(node)
        if cls is None:
            return frozenset()
        cached = self._switched_attributes.get(cls)
        if cached is None:
            cached = self._switched_attributes[cls] = frozenset(
                n.func.value.attr.value
                for method in ("eval", "train")
                for n in self.tree.calls_within(cls, method)
                if isinstance(n.func, cst.Attribute)
                and isinstance(n.func.value, cst.Attribute)
                and isinstance(n.func.value.value, cst.Name)
                and n.func.value.value.value == "self"
                and _mode_switch_arguments(n))
        return cached

    def _own_method_sets_grad(self, call: cst.Call, name: str) -> bool:
        """``self.<name>(...)`` inside a class of this file whose own ``def <name>`` switches
        the grad mode itself (``with torch.set_grad_enabled(grads):``, a no-grad decorator).
        One that does not (``self.forward_model(data)``) runs the network in the caller's
        mode, a forward like any other."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value == "self"):
            return False
        cls = self.tree.enclosing_class(call)
        if cls is None:
            return False
        return any(
            self.tree.enclosing_class(f) is cls and self.tree.enclosing_function(f) is None
            and self._sets_grad(f)
            for f in self.tree.functions_by_name.get(name, ())
        )

    def _sets_grad(self, func: cst.FunctionDef) -> bool:
        """:func:`_switches_grad`, once per method: every ``self.<name>(...)`` call asks."""
        found = self._sets_grad_cache.get(func)
        if found is None:
            found = self._sets_grad_cache[func] = _switches_grad(func, self.tree)
        return found

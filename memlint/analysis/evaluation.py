"""Values collected across the iterations of an evaluation loop.

MEM005 (graph kept) and MEM016 (kept on the device) ask the same first question: is this
``results.append(v)`` / ``results += [v]`` / ``[model(x) for x in loader]`` gathering one value
per batch of an evaluation or inference loop into a container that outlives the loop?

Evaluation code is code that never trains (no backward, no optimizer step, no
``autograd.grad``, itself or through same-file helpers or callers) and plainly evaluates: its
function is named like ``evaluate``/``validate``/``predict``/``infer``/``test``, it calls
``.eval()``, or the loop iterates a DataLoader. A module's ``forward`` never counts, because
outputs a model collects there are consumed by the caller's backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.calls import is_model_collection_name, method_name, receiver
from memlint.analysis.dataflow import names_in
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop
from memlint.vocabulary import is_pytest_module, names_evaluation

if TYPE_CHECKING:
    from memlint.analysis import ModuleAnalysis

_NOT_EVALUATION = frozenset({"forward", "__call__", "_forward", "training_step"})


@dataclass(frozen=True)
class Collection:
    """One per-iteration store: ``container.append(value)`` inside ``loop`` (None: a
    comprehension over a DataLoader, whose node is ``site``)."""

    site: cst.CSTNode
    container: str | None
    value: cst.BaseExpression
    loop: Loop | None


def appended_value(node: cst.Call | cst.AugAssign) -> tuple[str, cst.BaseExpression] | None:
    """``c.append(v)`` / ``c.extend(v)`` / ``c += [v]`` -> (container name, stored value)."""
    if isinstance(node, cst.Call):
        if method_name(node) not in ("append", "extend") or len(node.args) != 1:
            return None
        container = receiver(node)
        value = node.args[0].value
    else:
        if not isinstance(node.operator, cst.AddAssign):
            return None
        if not isinstance(node.value, (cst.List, cst.ListComp)):
            return None
        container, value = node.target, node.value
    name = None if container is None else dotted_name(container)
    return None if name is None else (name, value)


class EvaluationCollections:
    """Cached per-function answers to "is this evaluation code?"."""

    def __init__(self, analysis: ModuleAnalysis, path: str) -> None:
        self.analysis = analysis
        self._pytest_file = is_pytest_module(path)
        self._functions: dict[cst.FunctionDef | None, bool] = {}
        self._loop_bindings: dict[Loop, frozenset[str]] = {}
        self._model_loops: dict[Loop, bool] = {}

    def collection_at(self, node: cst.Call | cst.AugAssign) -> Collection | None:
        """The per-iteration store ``node`` makes in an evaluation loop, if it is one.

        The cheap questions (is there a loop, does the code look like evaluation) go first:
        most ``append`` calls in library code fail them, and never pay for the rest.
        """
        found = appended_value(node)
        if found is None:
            return None
        container, value = found
        tree = self.analysis.tree
        loops = tree.enclosing_loops(node)
        if not loops:
            return None
        func = tree.enclosing_function(node)
        if not (
            self._named_or_switched_to_eval(func)
            or any(self.analysis.dataflow.is_dataloader_loop(lp) for lp in loops)
        ):
            return None
        # A container made afresh in each batch (`samples = []` in the loop over the loader,
        # filled by an inner loop over Monte Carlo draws or time steps) holds one batch.
        flow = self.analysis.dataflow
        batch_loop = next((i for i, lp in enumerate(loops) if flow.is_dataloader_loop(lp)), 0)
        if any(container in self._bound_in(lp) for lp in loops[:batch_loop + 1]):
            return None
        # One output per model of an ensemble or a pipeline's text encoders (`for tokenizer,
        # text_encoder in zip(...)`) is bounded by the models, not by the data.
        outlived = next((i for i, lp in enumerate(loops) if container in self._bound_in(lp)),
                        len(loops))
        if all(self._iterates_models(lp) for lp in loops[:outlived]):
            return None
        if any(self.analysis.loops.is_training_loop(lp) for lp in loops):
            return None
        if func is None:
            # A script's top level trains and evaluates in turn: a loop that runs no backward
            # pass (checked above) is evaluation, unless what it collects is backpropagated.
            if self.analysis.graph.flows_into_backward(container, [self.analysis.module]):
                return None
        elif not self._never_trains(func) or (
                self._returns(func, container) and self._caller_trains(func)):
            return None
        return Collection(node, container, value, loops[0])

    def comprehension_at(self, node: cst.ListComp) -> Collection | None:
        """``[model(x) for x, _ in loader]``: one output per batch of a DataLoader."""
        if self.analysis.dataflow.loader_source(node.for_in.iter) is None:
            return None
        func = self.analysis.tree.enclosing_function(node)
        if not self._never_trains(func) or (func is not None and self._caller_trains(func)):
            return None
        return Collection(node, None, node.elt, None)

    def _iterates_models(self, loop: Loop) -> bool:
        """A loop over models: ``for name, model in models.items()``, ``for tok, text_encoder
        in zip(tokenizers, text_encoders)``, ``for i in range(n): model = Sequential(*layers[:
        i + 1])``; its body calls a model that each iteration binds. Never a DataLoader loop."""
        cached = self._model_loops.get(loop)
        if cached is not None:
            return cached
        found = False
        if isinstance(loop, cst.For) and not self.analysis.dataflow.is_dataloader_loop(loop):
            targets = self._bound_in(loop)
            plural = any(is_model_collection_name(n.value if isinstance(n, cst.Name)
                                                  else n.attr.value)
                         for n in (loop.iter, *self.analysis.tree.walk(loop.iter))
                         if isinstance(n, (cst.Name, cst.Attribute)))
            calls = self.analysis.calls
            found = any(
                isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
                and node.func.value in targets
                and (plural or calls.is_model_forward(node))
                for node in self.analysis.tree.walk(loop.body))
        self._model_loops[loop] = found
        return found

    def _bound_in(self, loop: Loop) -> frozenset[str]:
        """Names (re)bound in each iteration of ``loop``: a container made there is fresh."""
        cached = self._loop_bindings.get(loop)
        if cached is not None:
            return cached
        bound: set[str] = set()
        if isinstance(loop, cst.For):
            bound.update(names_in(loop.target))
        for node in self.analysis.tree.walk(loop.body):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    bound.update(names_in(target.target))
            elif isinstance(node, cst.AnnAssign):
                bound.update(names_in(node.target))
        frozen = frozenset(bound)
        self._loop_bindings[loop] = frozen
        return frozen

    def _never_trains(self, func: cst.FunctionDef | None) -> bool:
        cached = self._functions.get(func)
        if cached is not None:
            return cached
        result = self._compute_never_trains(func)
        self._functions[func] = result
        return result

    def _compute_never_trains(self, func: cst.FunctionDef | None) -> bool:
        analysis = self.analysis
        if func is None:
            # A top-level script; its loops were already checked for training.
            return not self._has_gradient_call(None)
        if func.name.value in _NOT_EVALUATION:
            return False
        return not (self._has_gradient_call(func) or analysis.loops.function_trains(func))

    def _caller_trains(self, func: cst.FunctionDef) -> bool:
        """A same-file caller trains: outputs ``func`` returns may feed its backward pass."""
        analysis = self.analysis
        for call in analysis.tree.calls_of(func):
            caller = analysis.tree.enclosing_function(call)
            if caller is not None and caller is not func and analysis.loops.function_trains(
                caller
            ):
                return True
        return False

    def _returns(self, func: cst.FunctionDef, container: str) -> bool:
        """Does ``func`` return something that mentions ``container``? Only then can a
        caller backpropagate through what it collected (a ``validate()`` that a training
        ``main()`` calls, and that reduces its outputs to a metric, hands it nothing)."""
        root = container.split(".", 1)[0]
        for node in self.analysis.tree.walk(func.body):
            if isinstance(node, cst.Return) and node.value is not None and any(
                    isinstance(n, cst.Name) and n.value == root
                    for n in (node.value, *self.analysis.tree.walk(node.value))):
                return True
        return False

    def _has_gradient_call(self, func: cst.FunctionDef | None) -> bool:
        """A backward pass or ``autograd.grad`` directly in ``func`` (None: the top level)."""
        tree = self.analysis.tree
        for callee in ("backward", "manual_backward", "grad"):
            for call in tree.calls_by_name.get(callee, ()):
                if tree.enclosing_function(call) is func:
                    return True
        return False

    def _named_or_switched_to_eval(self, func: cst.FunctionDef | None) -> bool:
        tree = self.analysis.tree
        if func is not None:
            cls = tree.enclosing_class(func)
            if cls is not None and self.analysis.calls.is_module_class(cls):
                return False
            name = func.name.value
            if names_evaluation(name) and not (self._pytest_file and name.startswith("test_")):
                return True
        for call in tree.calls_by_name.get("eval", ()):
            if (
                isinstance(call.func, cst.Attribute)
                and not call.args
                and tree.enclosing_function(call) is func
            ):
                return True
        return False

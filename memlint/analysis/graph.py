"""Graph-carrying value inference: does this expression still hold an autograd graph?

Contract (owned by the core-rules work; keep the public methods stable):
- ``carries_graph(expr) -> bool``: True for values bound from a loss/criterion call,
  ``outputs.loss`` / ``out["loss"]``, a model forward, arithmetic on such values, or the
  receiver of ``.backward()``; False after ``.item()``, ``.detach()``, ``float()``,
  ``.tolist()``, ``.cpu().numpy()``, for Python numbers, values from host libraries
  (``yaml``, ``json``, ``numpy``), or when produced under no-grad.
- ``graph_state(expr) -> True | False | None``: the same with None for "cannot tell".

How names are resolved: each function (or the module, for top-level scripts) is scanned once
for its bindings, in source order. A name reads its latest binding before the use; with none
before it (a value carried round a loop) every binding in the function is considered. A
parameter takes the arguments of the function's same-file call sites, a same-file function
call takes its ``return`` values, and ``self.x`` takes every ``self.x = ...`` in the class.
A name unpacked from a call (``loss, items = criterion(p, y)``) takes the value at its
position in the callee's ``return`` tuples when the callee is in this file: a function, a
``self`` method, or ``__call__``/``forward`` of the same-file class the name was built from
(``criterion = ComputeLoss()``), or, for a callee in another module, the project model's
per-position facts. A comprehension's variable takes its iterable; its elements decide.
Appending a graph-carrying value to a list makes the list graph-carrying, and a loop that
replaces every entry with a detached value (``for k, v in d.items(): d[k] = v.detach()``)
clears it. A name that is later backpropagated (``x.backward()``) carries a graph when
nothing else decides it, unless it only divides the loss (``(loss / n).backward()``).

``flows_into_backward`` also follows arguments into same-file callees whose parameter is
backpropagated there (a pipeline schedule's ``backward_step(outputs.pop(0), grad)``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import libcst as cst

from memlint.analysis.calls import (
    CallClassifier,
    backward_value,
    is_backward_call,
    last_name,
    method_name,
    receiver,
)
from memlint.analysis.grad import GradModeAnalysis
from memlint.analysis.imports import dotted_name
from memlint.analysis.loops import target_names
from memlint.analysis.tree import TOKEN_TYPES, TreeIndex, class_methods, last_child
from memlint.vocabulary import (
    DETACHED_ATTRIBUTES,
    DETACHING_METHODS,
    HOST_BUILTINS,
    MUTATORS,
    SAME_GRAPH_METHODS,
    TORCH_FACTORIES,
    host_annotation,
    returns_indices,
)

if TYPE_CHECKING:
    from memlint.project.view import ModuleView, ReturnFact

Tri = bool | None
Scope = cst.FunctionDef | cst.Module
BindingKind = Literal["assign", "aug", "iter", "param", "unknown"]

PASS_THROUGH_BUILTINS = frozenset({"sum", "max", "min", "abs", "list", "tuple", "sorted"})
# Modules whose functions return host values: they never hand back an autograd graph
# (`save_dict = yaml.safe_load(f)`, `np.mean(xs)`, `time.time()`).
HOST_MODULES = (
    "json.", "yaml.", "pickle.", "csv.", "numpy.", "math.", "statistics.", "time.", "random.",
    "os.", "sklearn.", "scipy.",
)
# Deep chains of rebinding (`h = h + f(h)` hundreds of times) give up rather than recurse.
MAX_DEPTH = 120
# Unpacked names that hold counts, not tensors: `datapoint_count`, `n_tokens`, `num_samples`,
# and the fused spellings `ntokens`, `nsamples`, `bsz`.
_COUNT_NAME = re.compile(
    r"(?:^|_)(?:count|counts|num|len|length|size)$|^(?:n|num|count)_|_count_"
    r"|^n(?:tokens?|toks?|samples?|seqs?|sents?|sentences?|words?|examples?|items?|elems?"
    r"|elements?|frames?|pixels?|imgs?|images?|correct|valid|batch)$|^bsz$",
    re.IGNORECASE,
)
# An unpacked name that reads like a log or statistics record (fairseq's
# `loss, sample_size, logging_output = criterion(model, sample)`): a criterion's name says
# which call returns the loss, not which element of its tuple is it.
_LOG_NAME = re.compile(
    r"^(?:logging_outputs?|log_dict|logs?|stats|info|infos|metrics|meters)$"
    r"|_(?:logs?|stats|info|metrics)$",
    re.IGNORECASE,
)


def tri_or(values: list[Tri]) -> Tri:
    """True if any is True, False if all are False (or there are none), else None."""
    if any(v is True for v in values):
        return True
    if all(v is False for v in values):
        return False
    return None


# The node types a scope scan records something for.
_SCAN_TYPES: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr, cst.WithItem, cst.Call})


@dataclass
class Binding:
    node: cst.CSTNode
    kind: BindingKind
    value: cst.BaseExpression | None
    # Source order where the binding takes effect (after its right-hand side ran).
    order: int
    # `a, b = call()`: the position of this name in the unpacked tuple and the tuple's length.
    index: int | None = None
    arity: int | None = None


@dataclass
class ScopeFacts:
    """One scan of a function body (nested functions and classes excluded)."""

    order: dict[cst.CSTNode, int] = field(default_factory=dict)
    bindings: defaultdict[str, list[Binding]] = field(default_factory=lambda: defaultdict(list))
    # `lst.append(v)`, `d[k] = v`: (order, stored value), per container name.
    mutations: defaultdict[str, list[tuple[int, cst.BaseExpression]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # Dotted names that some `.backward()` in this scope consumes.
    backward_names: set[str] = field(default_factory=set)
    # Source order of the last `.backward()` call in this scope (-1: none).
    last_backward: int = -1
    # `for k, v in d.items(): d[k] = v.detach()`: every entry of `d` replaced, per container.
    rewrites: defaultdict[str, list[tuple[int, cst.BaseExpression]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # name -> the names bound (here) to a value built from it; see ``users``.
    _users: dict[str, set[str]] | None = None
    # name -> the containers a value built from it is put into; see ``stored_into``.
    _stored_into: dict[str, set[str]] | None = None
    _attributes_read: dict[str, list[str]] | None = None

    def users(self) -> dict[str, set[str]]:
        """Which bound names a name flows into (``loss = a + b``: a -> loss, b -> loss).
        Built once per scope: asking it per query was quadratic in a long module."""
        if self._users is None:
            users: dict[str, set[str]] = {}
            for bound, bindings in self.bindings.items():
                for binding in bindings:
                    if binding.value is not None:
                        for used in _names_in(binding.value):
                            users.setdefault(used, set()).add(bound)
            self._users = users
        return self._users

    def attributes_read(self) -> dict[str, list[str]]:
        """Plain name -> the dotted names read off it that flow somewhere here (``step`` ->
        ``step.log_prob``)."""
        if self._attributes_read is None:
            read: dict[str, list[str]] = {}
            for key in {*self.users(), *self.stored_into()}:
                root, dot, _ = key.partition(".")
                if dot:
                    read.setdefault(root, []).append(key)
            self._attributes_read = read
        return self._attributes_read

    def stored_into(self) -> dict[str, set[str]]:
        """Which containers a name's value is put into before a backward pass of this scope
        runs (``terms.append(-log_prob)``: log_prob -> terms). A value stored after the last
        backward (an epoch's mean kept in the batch's output dict) reaches none."""
        if self._stored_into is None:
            stored: dict[str, set[str]] = {}
            for container, values in self.mutations.items():
                for at, value in values:
                    if at > self.last_backward:
                        continue
                    for used in _names_in(value):
                        stored.setdefault(used, set()).add(container)
            self._stored_into = stored
        return self._stored_into


class GraphAnalysis:
    def __init__(
        self, tree: TreeIndex, grad: GradModeAnalysis, calls: CallClassifier | None = None,
        project: ModuleView | None = None,
    ) -> None:
        self.tree = tree
        self.grad = grad
        self.project = project
        self.calls = calls if calls is not None else CallClassifier(tree)
        self._scopes: dict[Scope, ScopeFacts] = {}
        self._memo: dict[cst.CSTNode, Tri] = {}
        self._returns: dict[cst.FunctionDef, Tri] = {}
        self._in_progress: set[cst.CSTNode] = set()
        self._passed: dict[Scope, set[str]] = {}
        self._param_backprop: dict[tuple[cst.FunctionDef, str], bool] = {}

    # ----------------------------------------------------------------- public API

    def carries_graph(self, expr: cst.BaseExpression) -> bool:
        """True when ``expr`` certainly or very likely holds an autograd graph."""
        return self.graph_state(expr) is True

    def graph_state(self, expr: cst.BaseExpression) -> Tri:
        """True: carries a graph; False: certainly not; None: cannot tell."""
        return self._eval(expr)

    def scope_of(self, node: cst.CSTNode) -> Scope:
        func = self.tree.enclosing_function(node)
        return func if func is not None else self.tree.module

    def facts(self, scope: Scope) -> ScopeFacts:
        """Bindings of one function (or the module's top level), computed once."""
        facts = self._scopes.get(scope)
        if facts is None:
            facts = self._scan(scope)
            self._scopes[scope] = facts
        return facts

    def is_backpropagated(self, name: str, scope: Scope, after: cst.CSTNode | None = None) -> bool:
        """Is the value named ``name`` (dotted) consumed by a ``.backward()`` in ``scope``?

        With ``after``, only backward calls that come later in source order, or that sit in a
        loop around ``after`` (so run again after it), count.
        """
        facts = self.facts(scope)
        if after is None:
            return name in facts.backward_names
        start = facts.order.get(after, -1)
        loops = self.tree.enclosing_loops(after)
        for call in self._backward_calls(scope):
            value = _backward_tensors(call)
            if value is None or not _mentions(value, name):
                continue
            if facts.order.get(call, -1) > start or any(
                self.tree.is_inside(call, loop) for loop in loops
            ):
                return True
        return False

    def backward_follows(self, node: cst.CSTNode, scope: Scope) -> bool:
        """Does a backward call (any, ``self.backward()`` included) run later in the same pass
        of ``scope`` as ``node``: after it in source order and, inside a loop, in that loop?"""
        order = self.facts(scope).order
        start = order.get(node, -1)
        loops = self.tree.enclosing_loops(node)
        for call in self._backward_calls(scope):
            if order.get(call, -1) > start and (
                not loops or self.tree.is_inside(call, loops[0])
            ):
                return True
        return False

    def flows_into_backward(self, name: str, scopes: list[Scope]) -> bool:
        """Does a value built from ``name`` (directly or through later bindings, or put into
        a container) get backpropagated in any of ``scopes``? (``terms`` -> ``loss =
        sum(terms)`` -> backward; ``for step in replay: terms.append(-step.log_prob)``, then
        ``torch.stack(terms).sum().backward()``.)"""
        reached = {name}
        all_facts = [self.facts(s) for s in scopes]
        todo = [name]
        while todo:
            current = todo.pop()
            for facts in all_facts:
                users, stored = facts.users(), facts.stored_into()
                # What is read off it flows on too (`step.log_prob` of `for step in replay`).
                for read in (current, *facts.attributes_read().get(current, ())):
                    for bound in (*users.get(read, ()), *stored.get(read, ())):
                        if bound not in reached:
                            reached.add(bound)
                            todo.append(bound)
        if any(reached & facts.backward_names for facts in all_facts):
            return True
        return any(reached & self._passed_to_backward(scope) for scope in scopes)

    def flows_into_return(self, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
        """Does the value ``node`` computes leave ``function`` through a ``return``: the
        expression returned itself, or a name bound from it (directly or through later
        bindings: ``mvn = self(x)``, ``post = Posterior(mvn)``, ``return post``)?"""
        tree = self.tree
        for anc in tree.ancestors(node):
            if isinstance(anc, cst.Return):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(anc, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = ([t.target for t in anc.targets] if isinstance(anc, cst.Assign)
                           else [anc.target])
                reached = {name for target in targets for name in _names_in(target)}
                break
            if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        else:
            return False
        if not reached:
            return False
        users = self.facts(function).users()
        todo = list(reached)
        while todo:
            for bound in users.get(todo.pop(), ()):
                if bound not in reached:
                    reached.add(bound)
                    todo.append(bound)
        return any(
            isinstance(ret, cst.Return) and ret.value is not None
            and not reached.isdisjoint(_names_in(ret.value))
            and tree.enclosing_function(ret) is function
            for ret in tree.walk(function.body)
        )

    def callee_defs(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The same-file functions a call certainly runs: ``helper(x)`` (a function of that
        name), ``self.helper(x)`` (a method of the enclosing class), and ``obj(x)`` /
        ``obj.meth(x)`` where ``obj`` was built from a same-file class (``__call__`` or
        ``forward`` for a call of the object). Empty when the callee is not known."""
        func = call.func
        if isinstance(func, cst.Name):
            if self.facts(self.scope_of(call)).bindings.get(func.value):
                # A parameter or local (`loss_fn` handed in): not the same-named function.
                return self._instance_methods(func, ("__call__", "forward"))
            defs = [
                d for d in self.tree.functions_by_name.get(func.value, ())
                if self.tree.enclosing_class(d) is None  # a bare name calls no method
            ]
            if defs:
                return defs
            return self._instance_methods(func, ("__call__", "forward"))
        if not isinstance(func, cst.Attribute):
            return []
        attr = func.attr.value
        recv = func.value
        if isinstance(recv, cst.Name) and recv.value == "self":
            cls = self.tree.enclosing_class(call)
            if cls is not None:
                own = [m for m in class_methods(cls) if m.name.value == attr]
                if own:
                    return own
            return self._instance_methods(func, ("__call__", "forward"))
        return self._instance_methods(recv, (attr,))

    # ----------------------------------------------------------------- scanning

    def _backward_calls(self, scope: Scope) -> list[cst.Call]:
        return [
            c
            for name in ("backward", "manual_backward")
            for c in self.tree.calls_by_name.get(name, ())
            if self.scope_of(c) is scope and is_backward_call(c)
        ]

    def _scan(self, scope: Scope) -> ScopeFacts:
        facts = ScopeFacts()
        order = facts.order
        nodes = list(self.tree.walk(scope))
        for i, node in enumerate(nodes):
            order[node] = 2 * i  # even: an odd order falls between two nodes (_end_order)
        if isinstance(scope, cst.FunctionDef):
            params = scope.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                facts.bindings[param.name.value].append(Binding(param, "param", None, -1))
        for node in nodes:
            if type(node) not in _SCAN_TYPES:  # an exact type test: most nodes stop here
                continue
            if isinstance(node, cst.Assign):
                end = self._end_order(node, order)
                for target in node.targets:
                    self._bind(facts, target.target, node.value, node, end)
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                self._bind(facts, node.target, node.value, node, self._end_order(node, order))
            elif isinstance(node, cst.AugAssign):
                end = self._end_order(node, order)
                name = dotted_name(node.target)
                if name is not None:
                    facts.bindings[name].append(Binding(node, "aug", node.value, end))
                elif isinstance(node.target, cst.Subscript):
                    self._mutate(facts, node.target.value, node.value, end)
            elif isinstance(node, cst.For):
                self._bind(facts, node.target, node.iter, node, order[node], kind="iter")
            elif isinstance(node, cst.NamedExpr):
                self._bind(facts, node.target, node.value, node, self._end_order(node, order))
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                self._bind(facts, node.asname.name, None, node, order[node], kind="unknown")
            elif isinstance(node, cst.Call):
                if method_name(node) in MUTATORS and node.args:
                    recv = receiver(node)
                    if recv is not None:
                        self._mutate(facts, recv, node.args[-1].value, order[node])
                elif is_backward_call(node):
                    facts.last_backward = max(facts.last_backward, order[node])
                    for name in _names_in(_backward_tensors(node), divisors=False):
                        facts.backward_names.add(name)
        for bindings in facts.bindings.values():
            bindings.sort(key=lambda b: b.order)
        return facts

    def _end_order(self, node: cst.CSTNode, order: dict[cst.CSTNode, int]) -> int:
        """Order of the last node of ``node``'s subtree: where an assignment takes effect.

        An index without tokens (a tree built without layout) has no order for the closing
        bracket of ``x[i]`` or ``f(a)``; where the last child is one, the assignment takes
        effect just after the last node before it, as it would at the bracket."""
        last = order.get(node, -1)
        parent = node
        current: cst.CSTNode | None = last_child(node)
        while current is not None and current in order:
            last = order[current]
            parent = current
            current = last_child(current)
        if current is not None and not self.tree.layout and type(current) in TOKEN_TYPES:
            for below in self.tree.walk(parent):
                last = max(last, order.get(below, last))
            last += 1
        return last

    def _bind(
        self,
        facts: ScopeFacts,
        target: cst.BaseExpression,
        value: cst.BaseExpression | None,
        node: cst.CSTNode,
        at: int,
        kind: BindingKind = "assign",
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            paired = (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            )
            # `loss, items = criterion(p, y)`: each name is judged by its position in what
            # a same-file callee returns (see `_eval_unpacked`).
            positional = (
                not paired
                and kind == "assign"
                and isinstance(value, cst.Call)
                and not any(isinstance(e, cst.StarredElement) for e in target.elements)
            )
            for i, element in enumerate(elements):
                sub = value
                element_kind = kind
                if paired and isinstance(value, (cst.Tuple, cst.List)):
                    sub = value.elements[i].value
                elif positional and isinstance(element, cst.Name):
                    facts.bindings[element.value].append(
                        Binding(node, kind, value, at, index=i, arity=len(elements))
                    )
                    continue
                elif isinstance(element, cst.Name) and _COUNT_NAME.search(element.value):
                    # `loss, n_seen = model.forward_loss(batch)`: the count is a number.
                    sub, element_kind = None, "unknown"
                self._bind(facts, element, sub, node, at, element_kind)
            return
        if isinstance(target, cst.Subscript):
            if value is not None:
                self._mutate(facts, target.value, value, at)
                container = self._rewritten_container(target, node)
                if container is not None:
                    facts.rewrites[container].append((at, value))
            return
        name = dotted_name(target)
        if name is not None:
            facts.bindings[name].append(Binding(node, kind, value, at))

    def _rewritten_container(self, target: cst.Subscript, node: cst.CSTNode) -> str | None:
        """``d`` when ``d[k] = ...`` runs in ``for k, v in d.items()`` (or ``for k in d``):
        the loop replaces every entry of ``d``."""
        container = dotted_name(target.value)
        key = target.slice[0].slice if len(target.slice) == 1 else None
        if container is None or not (
            isinstance(key, cst.Index) and isinstance(key.value, cst.Name)
        ):
            return None
        loops = self.tree.enclosing_loops(node)
        loop = loops[0] if loops else None
        if not isinstance(loop, cst.For):
            return None
        loop_key: cst.BaseExpression = loop.target
        if isinstance(loop_key, (cst.Tuple, cst.List)) and loop_key.elements:
            loop_key = loop_key.elements[0].value
        if not (isinstance(loop_key, cst.Name) and loop_key.value == key.value.value):
            return None
        iterated: cst.BaseExpression = loop.iter
        if isinstance(iterated, cst.Call) and dotted_name(iterated.func) == "list" and (
            iterated.args
        ):
            iterated = iterated.args[0].value  # `for k, v in list(d.items())`
        if isinstance(iterated, cst.Call) and method_name(iterated) in ("items", "keys"):
            iterated = iterated.func.value if isinstance(iterated.func, cst.Attribute) else iterated
        return container if dotted_name(iterated) == container else None

    @staticmethod
    def _mutate(
        facts: ScopeFacts, container: cst.BaseExpression, value: cst.BaseExpression, at: int
    ) -> None:
        name = dotted_name(container)
        if name is not None:
            facts.mutations[name].append((at, value))

    # ----------------------------------------------------------------- evaluation

    def _eval(self, expr: cst.BaseExpression) -> Tri:
        if expr in self._memo:
            return self._memo[expr]
        if expr in self._in_progress or len(self._in_progress) > MAX_DEPTH:
            return None
        self._in_progress.add(expr)
        try:
            result = self._eval_uncached(expr)
        finally:
            self._in_progress.discard(expr)
        self._memo[expr] = result
        return result

    def _produced_without_grad(self, expr: cst.CSTNode) -> bool:
        return self.grad.no_grad_at(expr)

    def _eval_uncached(self, expr: cst.BaseExpression) -> Tri:
        if isinstance(
            expr,
            (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
             cst.FormattedString, cst.Comparison, cst.Lambda, cst.Ellipsis),
        ):
            return False
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return False
            return self._eval_name(expr.value, expr)
        if isinstance(expr, cst.Attribute):
            return self._eval_attribute(expr)
        if isinstance(expr, cst.Subscript):
            if _subscript_index(expr) == 1 and self._returns_indices(expr.value):
                return False  # the indices of `out.max(1)[1]`
            key = _subscript_key(expr)
            base = self._eval(expr.value)
            if key is not None and "loss" in key.lower() and base is not False:
                return True
            return base
        if isinstance(expr, cst.Call):
            return self._eval_call(expr)
        if isinstance(expr, cst.BinaryOperation):
            if self._produced_without_grad(expr):
                return False
            return tri_or([self._eval(expr.left), self._eval(expr.right)])
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                return False
            return self._eval(expr.expression)
        if isinstance(expr, cst.BooleanOperation):
            return tri_or([self._eval(expr.left), self._eval(expr.right)])
        if isinstance(expr, cst.IfExp):
            return tri_or([self._eval(expr.body), self._eval(expr.orelse)])
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return tri_or([self._eval(e.value) for e in expr.elements])
        if isinstance(expr, cst.Dict):
            return tri_or([self._eval(e.value) for e in expr.elements])
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            # `sum(len(o) for o in outputs)`: the elements decide; the iterable only when
            # they cannot (`[o for o in outputs]` reads its variable, i.e. the iterable).
            element = self._eval(expr.elt)
            if element is not None:
                return element
            return self._eval(expr.for_in.iter)
        if isinstance(expr, cst.NamedExpr):
            return self._eval(expr.value)
        return None

    def _eval_attribute(self, expr: cst.Attribute) -> Tri:
        attr = expr.attr.value
        if attr in DETACHED_ATTRIBUTES:
            return False
        if attr == "indices" and self._returns_indices(expr.value):
            return False
        name = dotted_name(expr)
        if name is not None and name.startswith("self."):
            return self._eval_self_attribute(name, expr)
        base = self._eval(expr.value)
        if base is None and (attr == "loss" or attr.endswith("_loss")):
            return True  # `outputs.loss` from an opaque model call
        return base

    def _eval_self_attribute(self, name: str, use: cst.Attribute) -> Tri:
        found = self._eval_name(name, use, fall_back_to_outer=False)
        if found is not None:
            return found
        cls = self.tree.enclosing_class(use)
        if cls is None:
            return None
        states: list[Tri] = []
        for method in class_methods(cls):
            facts = self.facts(method)
            for binding in facts.bindings.get(name, ()):
                states.append(self._eval_binding(binding, name))
            if name in facts.backward_names:
                states.append(True)
        return tri_or(states) if states else None

    def _eval_name(self, name: str, use: cst.CSTNode, *, fall_back_to_outer: bool = True) -> Tri:
        iterable = self._comprehension_iter(name, use)
        if iterable is not None:
            return self._eval(iterable)
        scope = self.scope_of(use)
        facts = self.facts(scope)
        bindings = facts.bindings.get(name)
        if not bindings:
            if fall_back_to_outer and isinstance(scope, cst.FunctionDef):
                # A closure reads the enclosing function's (or module's) binding.
                return self._eval_name(name, scope)
            return True if name in facts.backward_names else None
        at = facts.order.get(use)
        before = [b for b in bindings if at is not None and b.order < at]
        if before:
            result = self._eval_binding(before[-1], name)
            rewritten = self._rewritten_at(facts, name, before[-1].order, at)
            if rewritten is not None and at is not None:
                # Every entry was replaced by a value without graph; later stores decide.
                later = [v for o, v in facts.mutations.get(name, ()) if rewritten < o < at]
                return any(self._eval(v) is True for v in later)
        else:
            result = tri_or([self._eval_binding(b, name) for b in bindings])
        if result is not True and at is not None:
            stored = [self._eval(v) for o, v in facts.mutations.get(name, ()) if o < at]
            if any(s is True for s in stored):
                return True
        if result is None and name in facts.backward_names:
            return True
        return result

    def _rewritten_at(
        self, facts: ScopeFacts, name: str, bound: int, at: int | None
    ) -> int | None:
        """Order of the latest loop that replaced every entry of ``name`` with a value
        without graph, between its binding (``bound``) and ``at``; None if there is none."""
        if at is None:
            return None
        found = [
            o for o, v in facts.rewrites.get(name, ())
            if bound < o < at and self._detached_value(v)
        ]
        return max(found) if found else None

    def _detached_value(self, value: cst.BaseExpression) -> bool:
        """No graph: certainly, or a detached value scaled by unknowns
        (``v.detach().mean() * (n / total)``)."""
        state = self._eval(value)
        if state is not None:
            return state is False
        return any(
            (isinstance(n, cst.Call) and method_name(n) in DETACHING_METHODS)
            or (isinstance(n, cst.Attribute) and n.attr.value in DETACHED_ATTRIBUTES)
            for n in self.tree.walk(value)
        )

    def _eval_binding(self, binding: Binding, name: str) -> Tri:
        key = binding.node
        if key in self._in_progress or len(self._in_progress) > MAX_DEPTH:
            return None
        self._in_progress.add(key)
        try:
            return self._eval_binding_uncached(binding, name)
        finally:
            self._in_progress.discard(key)

    def _eval_binding_uncached(self, binding: Binding, name: str) -> Tri:
        if binding.kind == "param":
            assert isinstance(binding.node, cst.Param)
            return self._eval_param(binding.node)
        if binding.kind == "unknown" or binding.value is None:
            return None
        if binding.index is not None and isinstance(binding.value, cst.Call):
            return self._eval_unpacked(binding, name)
        if binding.kind == "aug":
            if self._produced_without_grad(binding.node):
                return False
            previous = self._eval_name(name, binding.node)
            return tri_or([self._eval(binding.value), previous])
        return self._eval(binding.value)

    def _eval_param(self, param: cst.Param) -> Tri:
        func = self.tree.enclosing_function(param)
        if func is None:
            return None
        params = func.params
        positional = [*params.posonly_params, *params.params]
        names = [p.name.value for p in positional]
        name = param.name.value
        index = names.index(name) if name in names else None
        is_method = bool(names) and names[0] in ("self", "cls")
        states: list[Tri] = []
        for call in self.tree.calls_of(func):
            arg = _argument_for(call, name, index, is_method)
            if arg is None:
                if param.default is not None:
                    states.append(self._eval(param.default))
                continue
            states.append(self._eval(arg))
        return tri_or(states) if states else None

    def _eval_call(self, call: cst.Call) -> Tri:
        func = call.func
        mname = method_name(call)
        if mname in DETACHING_METHODS:
            return False
        if mname in ("eval", "train") and len(call.args) <= 1:
            return False  # `self.model = self.model.eval()`: a module hands itself back
        if isinstance(func, cst.Name) and func.value in HOST_BUILTINS:
            return False
        if self._produced_without_grad(call):
            return False
        if is_backward_call(call):
            return False
        callee = last_name(func)
        defs = self.tree.functions_by_name.get(callee, []) if callee is not None else []
        if defs and all(_annotated_host(self.tree, d) for d in defs):
            return False  # `def mean_loss(xs) -> float:`, whatever its name says
        returned = None if defs else self.project_returns(call)
        if returned is not None and not returned.is_tuple:
            # A project function or method of another file that returns a detached value,
            # whatever its name says (`self.reduce_loss_dict(losses)` returns floats).
            return False
        if self.calls.is_loss_call(call):
            # `criterion(model(x).detach(), y)`: a loss of a prediction detached on the spot
            # has no graph either (unless another argument does). Only a detach written there:
            # `model.forward_loss(batch)` takes data and runs the model itself.
            args = [a for a in call.args if not a.star]
            first = args[0].value if args and args[0].keyword is None else None
            return not (isinstance(first, cst.Call) and method_name(first) in DETACHING_METHODS
                        and not any(self._eval(a.value) is True for a in args[1:]))
        if self.calls.is_model_forward(call):
            return True
        qualified = self.tree.imports.qualified_name(func)
        if qualified is not None and qualified.startswith("torch."):
            if qualified.rsplit(".", 1)[-1] in TORCH_FACTORIES:
                return False
            if qualified == "torch.autograd.grad":
                # Gradients carry a graph only when asked for (double backward).
                return any(
                    a.keyword is not None and a.keyword.value == "create_graph"
                    and not (isinstance(a.value, cst.Name) and a.value.value == "False")
                    for a in call.args
                )
            return tri_or([self._eval(a.value) for a in call.args])
        if qualified is not None and qualified.startswith(HOST_MODULES):
            return False
        if isinstance(func, cst.Name) and func.value in PASS_THROUGH_BUILTINS:
            return tri_or([self._eval(a.value) for a in call.args])
        if defs:
            return tri_or([self._returns_of(d) for d in defs])
        if mname is not None:
            recv = receiver(call)
            base = None if recv is None else self._eval(recv)
            if base is True:
                return True  # a tensor method: `loss.mean()`, `out.float()`, `loss.cpu()`
            if base is False and mname in SAME_GRAPH_METHODS and not any(
                self._eval(a.value) is True for a in call.args
            ):
                return False  # `loss.detach().clone().mean()`
            return None
        return None

    def _returns_indices(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a reduction call returning (values, indices): ``torch.max(out, 1)``,
        ``out.topk(5)``, ``out.max(dim=1)``?"""
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.tree.imports.qualified_name(expr.func)
        function = qualified is not None and qualified.startswith("torch.") and (
            qualified.count(".") == 1)
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        at = 1 if function else 0  # `torch.max(x, 1)`, `x.max(1)`
        dim_given = any(a.keyword is not None and a.keyword.value == "dim"
                        for a in expr.args) or (
            len(positional) > at and _integer(positional[at]) is not None)
        return returns_indices(last_name(expr.func), dim_given)

    def _eval_unpacked(self, binding: Binding, name: str) -> Tri:
        """``loss, items = criterion(p, y)``: the state of what a same-file callee returns at
        this name's position (``return loss, items.detach()`` -> False for ``items``)."""
        call = binding.value
        assert isinstance(call, cst.Call)
        assert binding.index is not None and binding.arity is not None
        short = name.rsplit(".", 1)[-1]
        whole: list[bool] = []  # set when the element's state is a whole call's, by its name
        resolved, state = self._element_of_call(call, binding.index, binding.arity, whole)
        by_name = _COUNT_NAME.search(short) or _LOG_NAME.search(short)
        if resolved and not (whole and state is True and by_name):
            return state  # the callee's body, not its name, decides (None: it cannot tell)
        # The callee is elsewhere: judge the call as a whole.
        if _COUNT_NAME.search(short):
            return None  # `loss, n_seen = model.forward_loss(batch)`: the count is a number.
        if _LOG_NAME.search(short):
            return None  # `loss, n, logging_output = criterion(...)`: a record, not the loss
        return self._eval(call)

    def _element_of_call(self, call: cst.Call, index: int, arity: int,
                         whole: list[bool] | None = None) -> tuple[bool, Tri]:
        """Element ``index`` of the ``arity``-tuple a call returns, read from the same-file
        callee's ``return`` statements. First item False: the callee is not in this file.
        ``whole`` gets an entry when a returned value could only be judged as a whole."""
        if self._produced_without_grad(call) or method_name(call) in DETACHING_METHODS:
            return True, False
        if index == 1 and arity == 2 and self._returns_indices(call):
            return True, False  # `_, predicted = torch.max(outputs, 1)`
        defs = self.callee_defs(call)
        if not defs:
            # Another module of the project: its model knows which positions are detached.
            fact = self.project_returns(call)
            if fact is not None and fact.is_tuple and len(fact.detached) == arity and (
                fact.detached[index]
            ):
                return True, False
            return False, None
        if call in self._in_progress:
            return False, None
        self._in_progress.add(call)
        try:
            states: list[Tri] = []
            for func in defs:
                for value in _return_values(self.tree, func):
                    states.append(self._element_of(value, index, arity, whole))
        finally:
            self._in_progress.discard(call)
        return (True, tri_or(states)) if states else (False, None)

    def _element_of(self, value: cst.BaseExpression, index: int, arity: int,
                    whole: list[bool] | None = None) -> Tri:
        """Element ``index`` of a returned value: a tuple literal's own element, a forwarded
        same-file call's (``return self._loss(p, y)``), else the whole value's state."""
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if len(elements) == arity and not any(
                isinstance(e, cst.StarredElement) for e in elements
            ):
                return self._eval(elements[index].value)
        elif isinstance(value, cst.Call):
            resolved, state = self._element_of_call(value, index, arity, whole)
            if resolved:
                return state
        if whole is not None:
            whole.append(True)
        return self._eval(value)

    def _comprehension_iter(self, name: str, use: cst.CSTNode) -> cst.BaseExpression | None:
        """The iterable a comprehension binds ``name`` from, when ``use`` is inside one."""
        if "." in name:
            return None
        for anc in self.tree.ancestors(use):
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return None
            if isinstance(anc, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
                for_in: cst.CompFor | None = anc.for_in
                while for_in is not None:
                    if name in target_names(for_in.target) and not self.tree.is_inside(
                        use, for_in.iter
                    ):
                        return for_in.iter
                    for_in = for_in.inner_for_in
        return None

    def _instance_scopes(self, obj: cst.BaseExpression) -> tuple[str, list[Scope]] | None:
        """``obj``'s dotted name and the scopes whose bindings say what it was built from:
        every method of the class for ``self.x``, else its own scope (and the module, for a
        module-level instance used in a function)."""
        name = dotted_name(obj)
        if name is None:
            return None
        if name.startswith("self."):
            cls = self.tree.enclosing_class(obj)
            return name, list(class_methods(cls)) if cls is not None else []
        scope = self.scope_of(obj)
        scopes: list[Scope] = [scope]
        if isinstance(scope, cst.FunctionDef) and not self.facts(scope).bindings.get(name):
            scopes.append(self.tree.module)
        return name, scopes

    def instance_classes(self, obj: cst.BaseExpression) -> set[str]:
        """The names of the classes ``obj`` was certainly built from, as called
        (``losses = AverageMeter()`` -> ``AverageMeter``, wherever it is defined); empty
        when some binding of it is not such a call."""
        bound = self._instance_scopes(obj)
        if bound is None:
            return set()
        name, scopes = bound
        found: set[str] = set()
        for scope in scopes:
            for binding in self.facts(scope).bindings.get(name, ()):
                value = binding.value
                cls_name = last_name(value.func) if isinstance(value, cst.Call) else None
                if binding.kind != "assign" or cls_name is None:
                    return set()
                found.add(cls_name)
        return found

    def _instance_methods(
        self, obj: cst.BaseExpression, names: tuple[str, ...]
    ) -> list[cst.FunctionDef]:
        """Methods ``names`` (first found) of the same-file class ``obj`` was built from
        (``criterion = ComputeLoss(model)``, ``self.meter = Averager()``)."""
        bound = self._instance_scopes(obj)
        if bound is None:
            return []
        name, scopes = bound
        found: list[cst.FunctionDef] = []
        for scope in scopes:
            for binding in self.facts(scope).bindings.get(name, ()):
                value = binding.value
                if binding.kind != "assign" or not isinstance(value, cst.Call):
                    return []  # rebound from something else: not certainly the instance
                cls_name = last_name(value.func)
                classes = self.tree.classes_by_name.get(cls_name or "", [])
                if not classes:
                    return []
                for cls in classes:
                    methods = {m.name.value: m for m in class_methods(cls)}
                    for method in names:
                        if method in methods:
                            found.append(methods[method])
                            break
                    else:
                        return []
        return found

    def _passed_to_backward(self, scope: Scope) -> set[str]:
        """Names passed to a same-file callee whose matching parameter it backpropagates:
        ``backward_step(outputs.pop(0), grad)`` consumes ``outputs``."""
        cached = self._passed.get(scope)
        if cached is not None:
            return cached
        self._passed[scope] = set()  # a recursive call chain reads "nothing" meanwhile
        passed: set[str] = set()
        for node in self.tree.walk(scope):
            if not isinstance(node, cst.Call) or not node.args:
                continue
            for func in self.callee_defs(node):
                params = func.params
                positional = [*params.posonly_params, *params.params]
                names = [p.name.value for p in positional]
                is_method = bool(names) and names[0] in ("self", "cls")
                if is_method and isinstance(node.func, cst.Name):
                    names = names[1:]  # `criterion(x)` runs `__call__(self, x)`
                    is_method = False
                for param in (*positional, *params.kwonly_params):
                    pname = param.name.value
                    index = names.index(pname) if pname in names else None
                    arg = _argument_for(node, pname, index, is_method)
                    if arg is not None and self._param_backpropagated(func, pname):
                        passed.update(_names_in(arg))
        self._passed[scope] = passed
        return passed

    def _param_backpropagated(self, func: cst.FunctionDef, name: str) -> bool:
        key = (func, name)
        cached = self._param_backprop.get(key)
        if cached is None:
            self._param_backprop[key] = False
            cached = self.flows_into_backward(name, [func])
            self._param_backprop[key] = cached
        return cached

    def _returns_of(self, func: cst.FunctionDef) -> Tri:
        if func in self._returns:
            return self._returns[func]
        if func in self._in_progress:
            return None
        self._in_progress.add(func)
        try:
            values = _return_values(self.tree, func)
            if _annotated_host(self.tree, func):
                result: Tri = False  # `-> float`, `-> Dict[str, float]`
            else:
                result = tri_or([self._eval(v) for v in values]) if values else False
        finally:
            self._in_progress.discard(func)
        self._returns[func] = result
        return result


    def project_returns(self, call: cst.Call) -> ReturnFact | None:
        """What the project model knows ``call`` returns: a function or class of another
        module, an instance of one bound to a name (``criterion = Loss()``) or to ``self``, a
        method inherited from a project base in another module (``self.reduce(losses)``), or
        the project's one method of the name called on what the model cannot type."""
        project = self.project
        if project is None:
            return None
        name = dotted_name(call.func)
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        if name is None:
            return None if method is None else project.method_returns.get(method)
        fact = project.returns_of(name)
        if fact is not None:
            return fact
        owner = self.project_class_of(name, call)
        if owner is not None:
            return project.returns.get(owner)
        if name.startswith("self.") and name.count(".") == 1:
            # A method the enclosing class inherits from a project base in another module.
            cls = self.tree.enclosing_class(call)
            if cls is not None:
                return project.inherited_return(self.tree.qualname(cls), name[len("self."):])
        if method is not None and name.count(".") > 1:
            # `self.agent.loss_terms(b)`: an attribute of no class the model knows; the one
            # project method of that name.
            return project.method_returns.get(method)
        return None

    def project_class_of(self, name: str, at: cst.CSTNode) -> str | None:
        """The absolute name of the project class whose instance ``name`` holds at ``at``:
        ``self.encoder`` assigned one in the class (the project model knows), or a local
        name every binding of which calls the same constructor (``net = Net(d).to(dev)``
        included)."""
        project = self.project
        if project is None:
            return None
        if name.startswith("self.") and name.count(".") == 1:
            cls = self.tree.enclosing_class(at)
            return None if cls is None else project.attribute_class(
                self.tree.qualname(cls), name[len("self."):])
        if "." in name:
            return None
        values = [b.value for b in self.facts(self.scope_of(at)).bindings.get(name, ())]
        if not values or not all(isinstance(v, cst.Call) for v in values):
            return None
        ctors = {_constructor(v) for v in values if isinstance(v, cst.Call)}
        if len(ctors) != 1 or (ctor := ctors.pop()) is None:
            return None
        return project.qualify(ctor)


def _constructor(call: cst.Call) -> str | None:
    """``Net`` for ``Net(d)`` and for ``Net(d).to(device)``/``.cuda()``/``.eval()``: a module
    moved or switched where it is built is still that class's instance."""
    while (isinstance(call.func, cst.Attribute) and call.func.attr.value in _SAME_INSTANCE
           and isinstance(call.func.value, cst.Call)):
        call = call.func.value
    return dotted_name(call.func)


# Methods of an nn.Module that return the module itself.
_SAME_INSTANCE = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double",
                            "requires_grad_"})


def _return_values(tree: TreeIndex, func: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The values ``func``'s own ``return`` statements give (nested functions excluded)."""
    return [n.value for n in tree.walk(func) if isinstance(n, cst.Return) and n.value]


def _backward_tensors(call: cst.Call) -> cst.BaseExpression | None:
    """What a backward call consumes, ``torch.autograd.backward(tensors=(out,), ...)``
    spelled with keywords included."""
    value = backward_value(call)
    if value is not None:
        return value
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("tensors", "loss"):
            return arg.value
    return None




def _integer(expr: cst.BaseExpression) -> int | None:
    """The value of an integer literal (``1``, ``-1``)."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _integer(expr.expression)
        return None if inner is None else -inner
    return None


def _subscript_index(expr: cst.Subscript) -> int | None:
    """``x[1]`` -> 1; None for anything but one integer literal."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    return _integer(expr.slice[0].slice.value)


def _subscript_key(expr: cst.Subscript) -> str | None:
    if len(expr.slice) != 1:
        return None
    index = expr.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        return index.value.evaluated_value if isinstance(index.value.evaluated_value, str) else None
    return None


def _names_in(expr: cst.BaseExpression | None, *, divisors: bool = True) -> list[str]:
    """Dotted names an expression is built from (``(a + self.b) / k`` -> a, self.b, k).

    ``divisors=False`` leaves out what a ``/`` or ``//`` divides by: in
    ``(loss / self.num_particles).backward()`` the count is no graph-carrying value.
    """
    if expr is None:
        return []
    name = dotted_name(expr)
    if name is not None:
        return [name]
    out: list[str] = []
    if isinstance(expr, cst.BinaryOperation):
        out += _names_in(expr.left, divisors=divisors)
        if divisors or not isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
            out += _names_in(expr.right, divisors=divisors)
    elif isinstance(expr, cst.UnaryOperation):
        out += _names_in(expr.expression, divisors=divisors)
    elif isinstance(expr, cst.Call):
        recv = receiver(expr)
        if recv is not None:
            out += _names_in(recv, divisors=divisors)
        for arg in expr.args:
            out += _names_in(arg.value, divisors=divisors)
    elif isinstance(expr, cst.Subscript):
        out += _names_in(expr.value, divisors=divisors)
    elif isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            out += _names_in(element.value, divisors=divisors)
    elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        out += _names_in(expr.for_in.iter, divisors=divisors)
        out += _names_in(expr.elt, divisors=divisors)
    return out


def _mentions(expr: cst.BaseExpression, name: str) -> bool:
    return name in _names_in(expr)


def _argument_for(
    call: cst.Call, name: str, index: int | None, is_method: bool
) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    if index is None:
        return None
    if is_method and isinstance(call.func, cst.Attribute):
        index -= 1
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    if 0 <= index < len(positional) and all(a.star == "" for a in call.args[: index + 1]):
        return positional[index].value
    return None


def _annotated_host(tree: TreeIndex, func: cst.FunctionDef) -> bool:
    """Is the function annotated to return host values only (``-> float``)?"""
    return func.returns is not None and host_annotation(
        _annotation_text(func.returns.annotation))


def _annotation_text(node: cst.BaseExpression) -> str:
    """An annotation written out as the stdlib's ``ast.unparse`` would, near enough for
    :func:`~memlint.vocabulary.host_annotation`: names, subscripts, ``|``, strings' text."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_annotation_text(node.value)}.{node.attr.value}"
    if isinstance(node, cst.Subscript):
        inner = ", ".join(_annotation_text(e.slice.value) for e in node.slice
                          if isinstance(e.slice, cst.Index))
        return f"{_annotation_text(node.value)}[{inner}]"
    if isinstance(node, cst.BinaryOperation):
        return f"{_annotation_text(node.left)} | {_annotation_text(node.right)}"
    if isinstance(node, cst.SimpleString):
        return node.value.strip("\"'")
    if isinstance(node, cst.Tuple | cst.List):
        return ", ".join(_annotation_text(e.value) for e in node.elements)
    return "?"

"""MEM001 loss-kept-with-graph: a graph-carrying tensor is kept beyond its training iteration."""

from __future__ import annotations

import libcst as cst

from memlint.analysis.graph import Scope, class_methods
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop
from memlint.diagnostics import FixSafety
from memlint.rules.base import Fix, Invalid, Rule, Valid

_STORE_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add"})
_ACCUMULATING_OPS = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign)


def _self_attribute(name: str | None) -> bool:
    return name is not None and name.startswith("self.")


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation):
        return [*_operands(expr.left), *_operands(expr.right)]
    return [expr]


class LossKeptWithGraph(Rule):
    """
    ## What it does
    Flags a loss (or any tensor that still carries its autograd graph) that a training loop
    stores somewhere that outlives the iteration: appended to a list, put in a dict, added to a
    running total, or kept on ``self``.

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

    ## Fix safety
    Appending ``.detach()`` is unsafe: code that later backpropagates through the stored
    tensors, or that reads their ``grad_fn``, stops working.
    """

    code = "MEM001"
    name = "loss-kept-with-graph"
    message = "graph-carrying tensor is kept beyond its training iteration"
    triggers = ("backward(", "step(")
    fix_safety = FixSafety.UNSAFE

    valid = (
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
    )
    invalid = (
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
        self._check(node, container, node.args[-1].value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not isinstance(node.operator, _ACCUMULATING_OPS):
            return
        target = node.target
        if isinstance(target, cst.Subscript):
            container = dotted_name(target.value)
        else:
            container = dotted_name(target)
        if container is not None:
            self._check(node, container, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Subscript):
                container = dotted_name(t.value)
                if container is not None:
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
            elif _self_attribute(name):
                self._check(node, name, node.value, replaces=True)

    # ------------------------------------------------------------------ logic

    def _check(
        self,
        node: cst.CSTNode,
        container: str,
        value: cst.BaseExpression,
        *,
        accumulates: bool = False,
        replaces: bool = False,
    ) -> None:
        # Cheap structural checks first: graph inference runs only in training code.
        analysis = self.context.analysis
        tree = analysis.tree
        func = tree.enclosing_function(node)
        loops = tree.enclosing_loops(node)
        on_self = _self_attribute(container)
        if on_self:
            if not self._training_method(func, loops):
                return
        elif not loops or not analysis.loops.is_training_loop(loops[0]):
            return
        carried = self._graph_part(value)
        if carried is None or analysis.grad.grad_mode_at(node) == "off":
            return
        graph = analysis.graph
        scope: Scope = func if func is not None else self.context.module
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
            if self._bound_inside(container, scope, loops[0], node, replaces or accumulates):
                return
            if graph.flows_into_backward(container, [scope]):
                return
        self._report(node, container, carried)

    def _graph_part(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """The sub-expression that carries the graph: an element of ``[loss]``, a dict value."""
        graph = self.context.analysis.graph
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            for element in value.elements:
                part = self._graph_part(element.value)
                if part is not None:
                    return part
            return None
        if isinstance(value, cst.Dict):
            for item in value.elements:
                part = self._graph_part(item.value)
                if part is not None:
                    return part
            return None
        return value if graph.carries_graph(value) else None

    def _training_method(self, func: cst.FunctionDef | None, loops: list[Loop]) -> bool:
        """``self.x`` outlives the step when stored from training code: a training loop, a
        method that runs backward/step, or a method a training loop calls."""
        loop_analysis = self.context.analysis.loops
        if loops and loop_analysis.is_training_loop(loops[0]):
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
            if tree.is_inside(binding.node, loop):
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

    def _report(self, node: cst.CSTNode, container: str, carried: cst.BaseExpression) -> None:
        text = self.context.module.code_for_node(carried)
        if len(text) > 40:
            text = text[:37] + "..."
        message = (
            f"`{text}` still carries its autograd graph and is kept in `{container}` beyond the "
            "training iteration; store `.detach()` or `.item()`"
        )
        self.report(node, message, fix=Fix(FixSafety.UNSAFE, {carried: _detached(carried)}))


def _detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("detach")))


"""MEM008 retain-graph-in-loop: every backward of an iteration keeps its graph alive."""

from __future__ import annotations

import libcst as cst

from memlint.analysis.calls import backward_value, is_backward_call, last_name
from memlint.analysis.dataflow import names_in
from memlint.analysis.imports import dotted_name
from memlint.analysis.tree import Loop
from memlint.rules.base import Invalid, Rule, Valid


def _flag(call: cst.Call, keyword: str) -> bool:
    """Is ``keyword=True`` passed literally?"""
    return any(
        a.keyword is not None
        and a.keyword.value == keyword
        and isinstance(a.value, cst.Name)
        and a.value.value == "True"
        for a in call.args
    )


def _is_gradient_pass(call: cst.Call) -> bool:
    """``.backward()`` in any form, or ``torch.autograd.grad(...)``."""
    if is_backward_call(call):
        return True
    name = dotted_name(call.func)
    return name is not None and (name == "grad" or name.endswith("autograd.grad"))


def _root(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The base of ``loss.sum()``, ``out[0]``, ``out.loss``: the name or the free call."""
    while expr is not None:
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return expr
    return None


_ITEM_WRAPPERS = frozenset({"enumerate", "zip", "reversed", "list", "tuple", "sorted", "iter"})


def _walks_existing(iterable: cst.BaseExpression) -> bool:
    """Does the loop walk values that exist before it (names, attributes, their items,
    through ``enumerate``/``zip``), rather than values it computes as it goes?"""
    todo: list[cst.BaseExpression] = [iterable]
    while todo:
        expr = todo.pop()
        if isinstance(expr, cst.Call):
            callee = dotted_name(expr.func)
            if callee in _ITEM_WRAPPERS:
                todo.extend(a.value for a in expr.args)
            elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value in (
                    "items", "values") and not expr.args:
                todo.append(expr.func.value)
            else:
                return False
        elif isinstance(expr, (cst.Tuple, cst.List)):
            todo.extend(e.value for e in expr.elements)
        elif not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
            return False
    return True


class RetainGraphInLoop(Rule):
    """
    ## What it does
    Flags ``loss.backward(retain_graph=True)`` when it is the only kind of backward pass in
    each iteration of a loop: no later backward in the iteration lets the graph go.

    ## Why is this bad?
    ``retain_graph=True`` keeps every tensor the graph saved for the backward pass (the
    activations of the whole forward) alive after the gradients are computed. In a loop that
    builds a new graph each iteration nothing ever needs the old one again, so the memory is
    held until the loss name is rebound, doubling the peak; if anything carries over between
    iterations (a hidden state, a running total) the graphs chain together and memory grows
    every step. The flag is usually added to silence "Trying to backward through the graph a
    second time", which points at such a carried-over tensor.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## How to fix
    Drop ``retain_graph=True``, and detach whatever carries over between iterations:
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    Two backward passes through a shared graph in one iteration (a GAN's discriminator and
    generator losses) where the last one drops the graph are not reported, nor are
    ``create_graph=True`` higher-order gradients or repeated backward passes through a graph
    built once before the loop (``for loss in losses:`` over the losses of one forward).
    When several passes of one iteration all keep the graph, only the last is reported: the
    earlier ones need it for the later ones (a ``torch.autograd.grad`` after the backward),
    and the last is the one that should let it go.
    """

    code = "MEM008"
    name = "retain-graph-in-loop"
    message = (
        "`backward(retain_graph=True)` is the only backward pass of each iteration: every "
        "step's graph is kept alive; drop `retain_graph` and detach state carried across steps"
    )
    triggers = ("retain_graph",)
    # Findings need a backward pass in this file (memlint.analysis.loops).
    code_gate = ("call:backward", "call:manual_backward")

    valid = (
        Valid("""
            for real, z in loader:
                fake = netG(z)
                d_loss = criterion(netD(real), ones) + criterion(netD(fake), zeros)
                d_loss.backward(retain_graph=True)
                optD.step()
                g_loss = criterion(netD(fake), ones)
                g_loss.backward()
                optG.step()
        """),
        Valid("""
            for x in loader:
                loss = criterion(model(x))
                grads = torch.autograd.grad(loss, params, create_graph=True, retain_graph=True)
                penalty = sum(g.pow(2).sum() for g in grads)
                penalty.backward(retain_graph=True, create_graph=True)
        """),
        Valid("""
            y = model(x)
            for i in range(y.shape[1]):
                y[:, i].sum().backward(retain_graph=True)
                rows.append(x.grad.clone())
                x.grad = None
        """),
        Valid("""
            def step(self, losses):
                for idx, loss in enumerate(losses):
                    loss.backward(retain_graph=True)
                    self.rescale(idx)
        """),
        Valid("""
            for step in range(steps):
                out = model(features, adj)
                loss = F.nll_loss(out[train], labels[train])
                attack_loss = F.nll_loss(out[unlabeled], pseudo[unlabeled])
                loss.backward(retain_graph=True)
                grad_sum += torch.autograd.grad(attack_loss, adj_changes, retain_graph=True)[0]
        """),
        Valid("""
            scores = model(x)
            for i in range(max_iter):
                scores[0, label].backward(retain_graph=True)
                base = x.grad.clone()
                for k in range(1, classes):
                    scores[0, k].backward(retain_graph=True)
                    deltas.append(x.grad - base)
                x = x + step(deltas)
                scores = model(x)
        """),
    )
    invalid = (
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward(retain_graph=True)
                optimizer.step()
                optimizer.zero_grad()
            """,
            lines=(4,),
        ),
        Invalid(
            """
            def train(accelerator, model, loader, opt):
                for batch in loader:
                    out = model(**batch)
                    accelerator.backward(out.loss, retain_graph=True)
                    opt.step()
            """,
            lines=(5,),
        ),
        Invalid(
            """
            for x, y in loader:
                out = model(x)
                main_loss = criterion(out, y)
                aux_loss = aux_criterion(out)
                main_loss.backward(retain_graph=True)
                aux_loss.backward(retain_graph=True)
                optimizer.step()
            """,
            lines=(7,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not is_backward_call(node) or not _flag(node, "retain_graph"):
            return
        if _flag(node, "create_graph"):
            return
        tree = self.context.analysis.tree
        loops = tree.enclosing_loops(node)
        if not loops:
            return
        loop = loops[0]
        later = False
        for call in self.context.analysis.loops.loop_calls(loop):  # in source order
            if call is node:
                later = True
                continue
            if not _is_gradient_pass(call):
                continue
            if not _flag(call, "retain_graph") or _flag(call, "create_graph") or later:
                # Another pass lets the graph go, or builds on it; or a later pass goes
                # through the graph this one kept (``torch.autograd.grad`` on an attack
                # loss after the backward): the last pass of the iteration is the one
                # that should let go.
                return
        if not self._graph_built_in(loop, backward_value(node)):
            return
        self.report(node)

    def _graph_built_in(self, loop: Loop, value: cst.BaseExpression | None) -> bool:
        """Is the backward's tensor computed afresh in the iteration, rather than bound once
        before the loop or built on a graph-carrying value from before the loop (a shared
        trunk that several backward passes go through, which does need the graph kept)?"""
        root = _root(value)
        if root is None:
            return False
        if isinstance(root, cst.Call):
            # `criterion(out, y).backward(...)`: a free call builds the graph right there.
            return last_name(root.func) is not None and not self._uses_outer_graph(loop, root)
        name = dotted_name(root)
        if name is None:
            return False
        if isinstance(loop, cst.For) and name in names_in(loop.target):
            # Built per item only when the loop makes the items: ``for loss in losses``
            # (and ``enumerate``/``zip`` of names) walks losses of one forward made before.
            return not _walks_existing(loop.iter)
        values: list[cst.BaseExpression] = []
        for node in self.context.analysis.tree.walk(loop.body):
            if isinstance(node, cst.Assign):
                if any(name in names_in(t.target) for t in node.targets):
                    values.append(node.value)
            elif (
                isinstance(node, (cst.AnnAssign, cst.AugAssign))
                and name in names_in(node.target)
                and node.value is not None
            ):
                values.append(node.value)
        return bool(values) and not any(self._uses_outer_graph(loop, v) for v in values)

    def _uses_outer_graph(self, loop: Loop, expr: cst.BaseExpression) -> bool:
        """Does ``expr`` read a graph-carrying name that the loop does not rebind?"""
        bound = self._bound_in(loop)
        graph = self.context.analysis.graph
        todo: list[cst.CSTNode] = [expr]
        while todo:
            node = todo.pop()
            if isinstance(node, cst.Name) and node.value not in bound:
                if graph.graph_state(node) is True:
                    return True
            elif isinstance(node, cst.Attribute):
                todo.append(node.value)
            elif isinstance(node, cst.Call):
                # The callee (`model`, `criterion`) is a module, not a graph-carrying value.
                if isinstance(node.func, cst.Attribute):
                    todo.append(node.func.value)
                todo.extend(a.value for a in node.args)
            else:
                todo.extend(node.children)
        return False

    def _bound_in(self, loop: Loop) -> set[str]:
        bound: set[str] = set()
        if isinstance(loop, cst.For):
            bound.update(names_in(loop.target))
        for node in self.context.analysis.tree.walk(loop.body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    bound.update(names_in(t.target))
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
                bound.update(names_in(node.target))
        return bound

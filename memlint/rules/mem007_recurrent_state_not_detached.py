"""MEM007 recurrent-state-not-detached: a hidden state carried across training iterations."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from memlint.analysis.calls import last_name
from memlint.analysis.dataflow import names_in
from memlint.analysis.tree import Loop
from memlint.rules.base import Invalid, Rule, Valid

# Recurrent callees that a name-only model check misses: `self.rnn`, `lstm`, `self.gru`, `cell`.
_RECURRENT = re.compile(r"rnn|lstm|gru|cell|recurren|decoder|encoder|forward", re.IGNORECASE)
# Calls that cut the history: `repackage_hidden(h)`, `h.detach_()`, `detach(hidden)`.
_CUTS_HISTORY = re.compile(r"detach|repackage", re.IGNORECASE)


def _argument_names(call: cst.Call) -> Iterator[str]:
    """Plain names passed in, looking into tuples: ``model(x, (h, c))`` -> x, h, c."""
    for arg in call.args:
        if arg.star:
            continue
        value = arg.value
        if isinstance(value, (cst.Name, cst.Tuple, cst.List)):
            for name in names_in(value):
                if "." not in name:
                    yield name


class RecurrentStateNotDetached(Rule):
    """
    ## What it does
    Flags ``out, hidden = model(x, hidden)`` inside a training loop when ``hidden`` comes from
    before the loop and is never detached, repackaged or re-initialised inside it.

    ## Why is this bad?
    The state returned by a recurrent forward is attached to the graph of that forward. Fed
    back in on the next iteration, it links every iteration's graph to the previous one, so
    the autograd graph (and all the activations it saves) grows with every batch until the
    GPU runs out of memory, and each backward pass walks further back in time. A backward
    through the older part fails with "Trying to backward through the graph a second time",
    which tempts people into ``retain_graph=True`` and makes the leak worse.

    ## Example
    ```python
    hidden = model.init_hidden(batch_size)
    for x, y in batches:
        optimizer.zero_grad()
        out, hidden = model(x, hidden)
        criterion(out, y).backward()
        optimizer.step()
    ```

    ## How to fix
    Cut the history at the start of each iteration (truncated backpropagation through time):
    ```python
    hidden = model.init_hidden(batch_size)
    for x, y in batches:
        hidden = tuple(h.detach() for h in hidden)  # or hidden.detach() for a GRU
        optimizer.zero_grad()
        out, hidden = model(x, hidden)
        criterion(out, y).backward()
        optimizer.step()
    ```
    A state re-initialised in each iteration, and evaluation loops under no-grad, are not
    reported. Models that detach their state internally cannot be seen and are reported;
    suppress the line there.
    """

    code = "MEM007"
    name = "recurrent-state-not-detached"
    message = (
        "recurrent state `{state}` is fed back across training iterations without `.detach()`: "
        "every step's graph stays linked to the previous one"
    )
    triggers = ("hidden", "lstm", "LSTM", "rnn", "RNN", "gru", "GRU", "state", "hx")
    # Only a training loop (backward or an optimizer step) can chain graphs across steps.
    requires = (("backward(", "step("),)
    # Findings are in training code, a loop or function that runs backward or an optimizer
    # step (memlint.analysis.loops), so the code calls one of them.
    code_gate = ("call:backward", "call:manual_backward", "fact:optimizer-step")

    valid = (
        Valid("""
            hidden = model.init_hidden(bsz)
            for x, y in batches:
                hidden = repackage_hidden(hidden)
                out, hidden = model(x, hidden)
                criterion(out, y).backward()
                optimizer.step()
        """),
        Valid("""
            for x, y in loader:
                hidden = model.init_hidden(x.size(0))
                for t in range(x.size(1)):
                    out, hidden = model(x[:, t], hidden)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
        """),
        Valid("""
            import torch
            hidden = model.init_hidden(bsz)
            with torch.no_grad():
                for x, y in batches:
                    out, hidden = model(x, hidden)
                    total += criterion(out, y).item()
        """),
        Valid("""
            h, c = init_state()
            for x, y in loader:
                out, (h, c) = lstm(x, (h, c))
                h.detach_()
                c.detach_()
                criterion(out, y).backward()
                opt.step()
        """),
    )
    invalid = (
        Invalid(
            """
            hidden = model.init_hidden(bsz)
            for x, y in batches:
                optimizer.zero_grad()
                out, hidden = model(x, hidden)
                criterion(out, y).backward()
                optimizer.step()
            """,
            lines=(5,),
        ),
        Invalid(
            """
            def train(self, loader):
                h, c = self.init_state()
                for x, y in loader:
                    out, (h, c) = self.lstm(x, (h, c))
                    loss = self.criterion(self.head(out), y)
                    loss.backward()
                    self.opt.step()
            """,
            lines=(5,),
        ),
    )

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.value, cst.Call):
            return
        target = node.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return
        call = node.value
        bound = {n for n in names_in(target) if "." not in n}
        states = [n for n in dict.fromkeys(_argument_names(call)) if n in bound]
        if not states or not self._is_recurrent_forward(call):
            return
        analysis = self.context.analysis
        training = [
            lp for lp in analysis.tree.enclosing_loops(node) if analysis.loops.is_training_loop(lp)
        ]
        loop = training[0] if training else None
        if loop is None or analysis.grad.grad_mode_at(node) != "on":
            return
        if self._state_cut_in(loop, node, set(states)):
            return
        self.report(node, self.message.format(state=", ".join(states)))

    def _is_recurrent_forward(self, call: cst.Call) -> bool:
        name = last_name(call.func)
        if name is None:
            return False
        qualified = self.context.analysis.imports.qualified_name(call.func) or ""
        if qualified.startswith(("torch.", "jax.", "numpy.", "np.")):
            return False
        return self.context.analysis.calls.is_model_forward(call) or bool(
            _RECURRENT.search(name)
        )

    def _state_cut_in(self, loop: Loop, forward: cst.Assign, states: set[str]) -> bool:
        """Is any state name rebound (re-initialised, repackaged) elsewhere in the loop, a loop
        target, or passed through a detaching call?"""
        tree = self.context.analysis.tree
        for node in tree.walk(loop):
            if node is forward:
                continue
            if isinstance(node, cst.For) and states & set(names_in(node.target)):
                return True
            if isinstance(node, cst.Assign) and tree.is_inside(node, loop.body):
                if any(states & set(names_in(t.target)) for t in node.targets):
                    return True
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and tree.is_inside(
                node, loop.body
            ):
                if states & set(names_in(node.target)):
                    return True
            elif isinstance(node, cst.Call):
                name = last_name(node.func)
                # `h.detach_()` inside `for h in hidden` names the element, not the state.
                if name is not None and _CUTS_HISTORY.search(name) and (
                    name == "detach_" or self._mentions(node, states)
                ):
                    return True
        return False

    @staticmethod
    def _mentions(call: cst.Call, states: set[str]) -> bool:
        todo: list[cst.CSTNode] = [call]
        while todo:
            node = todo.pop()
            if isinstance(node, cst.Name) and node.value in states:
                return True
            todo.extend(node.children)
        return False


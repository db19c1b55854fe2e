"""MEM009 zero-grad-not-none: ``zero_grad(set_to_none=False)`` writes zeros into every gradient."""

from __future__ import annotations

import libcst as cst

from memlint.diagnostics import FixSafety
from memlint.edits import remove_arg
from memlint.rules.base import Fix, Invalid, Rule, Valid


def _set_to_none_false(call: cst.Call) -> cst.Arg | None:
    """The argument that passes ``set_to_none=False`` (keyword or first positional), if any."""
    for index, arg in enumerate(call.args):
        is_false = isinstance(arg.value, cst.Name) and arg.value.value == "False"
        if arg.keyword is not None:
            if arg.keyword.value == "set_to_none" and is_false:
                return arg
        elif index == 0 and arg.star == "" and is_false:
            return arg
    return None


class ZeroGradNotNone(Rule):
    """
    ## What it does
    Flags ``optimizer.zero_grad(set_to_none=False)`` and ``model.zero_grad(False)``.

    ## Why is this bad?
    With ``set_to_none=False`` every ``.grad`` tensor stays allocated between steps and is
    overwritten with zeros by a memset kernel, then summed into by the next backward pass.
    Setting gradients to ``None`` (the default since PyTorch 2.0) frees that memory until the
    backward pass needs it and lets autograd assign the first gradient instead of adding it.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```

    ## How to fix
    Call ``optimizer.zero_grad()`` and let gradients be ``None``:
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```
    Code that reads or accumulates into ``p.grad`` right after zeroing needs the zero tensors;
    the rule stays silent when the same function touches ``.grad`` after the call.

    ## Fix safety
    Dropping the argument is unsafe: code elsewhere (a custom optimizer, a gradient hook, a
    ``p.grad.add_`` in another module) may expect a tensor where it would now find ``None``.
    """

    code = "MEM009"
    name = "zero-grad-not-none"
    message = (
        "`zero_grad(set_to_none=False)` keeps every gradient allocated and memsets it; "
        "drop the argument so gradients are freed (set to None)"
    )
    triggers = ("set_to_none", "zero_grad(False")
    code_gate = ("call:zero_grad",)
    fix_safety = FixSafety.UNSAFE

    valid = (
        Valid("""
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
        """),
        Valid("""
            def step(model, optimizer, noise):
                optimizer.zero_grad(set_to_none=False)
                for p in model.parameters():
                    p.grad.add_(noise)
                optimizer.step()
        """),
        Valid("""
            optimizer.zero_grad(set_to_none=True)
            optimizer.zero_grad(set_to_none=flag)
        """),
    )
    invalid = (
        Invalid(
            """
            for x, y in loader:
                optimizer.zero_grad(set_to_none=False)
                loss_fn(model(x), y).backward()
                optimizer.step()
            """,
            lines=(3,),
            fixed="""
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            def reset(model):
                model.zero_grad(False)
            """,
            lines=(3,),
            fixed="""
            def reset(model):
                model.zero_grad()
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad"):
            return
        arg = _set_to_none_false(node)
        if arg is None or self._grad_read_after(node):
            return
        self.report(node, fix=Fix(FixSafety.UNSAFE, {node: remove_arg(node, arg)}))

    def _grad_read_after(self, call: cst.Call) -> bool:
        """Does the enclosing function (or module) touch ``.grad`` after ``call``, or anywhere
        in a loop around it (the next iteration runs after it too)?"""
        tree = self.context.analysis.tree
        scope: cst.CSTNode = tree.enclosing_function(call) or self.context.module
        loops = tree.enclosing_loops(call)
        outer_loop = loops[-1] if loops else None
        seen_call = False
        for node in tree.walk(scope):
            if node is call:
                seen_call = True
                continue
            if not (isinstance(node, cst.Attribute) and node.attr.value == "grad"):
                continue
            if seen_call or (outer_loop is not None and tree.is_inside(node, outer_loop)):
                return True
        return False

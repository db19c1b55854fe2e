"""Does a node run once per training (or evaluation) step?

Per-step cost rules (host syncs, cache flushes) must tell a statement inside the innermost
batch loop from one in the epoch loop around it: both loops "train", but only the inner one
runs thousands of times. A per-step helper (``def train_step(batch)`` called from a training
loop in this file, with no training loop of its own) counts as the step too, and so does a
closure the loop's optimizer step runs (``optimizer.step(closure)``), and a framework's
per-batch hook (``def training_step(self, batch, batch_idx)`` of a Lightning module or a
Hugging Face ``Trainer``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from memlint.analysis import ModuleAnalysis
from memlint.analysis.calls import is_optimizer_step, last_name
from memlint.analysis.tree import Loop, TreeIndex
from memlint.vocabulary import framework_train_hook, is_model_word

# Names of a step's loss parts: the loss terms, their criteria and metrics.
_LOSS_PARTS = re.compile(r"loss|criteri|metric", re.IGNORECASE)

# How many levels of same-file calls are followed to find the batch loop under an epoch loop.
_MAX_DEPTH = 3
# How many levels of helpers below a step function are part of the step.
_HELPER_DEPTH = 2


class StepAnalysis:
    """Answers per file, with the loop facts cached (a big file has many ``.item()`` calls)."""

    def __init__(self, analysis: ModuleAnalysis) -> None:
        self.analysis = analysis
        self._has_training_loop: dict[cst.CSTNode, bool] = {}
        self._reaches: dict[tuple[str, int, bool, cst.FunctionDef | None], bool] = {}

    def _contains_training_loop(self, root: cst.CSTNode) -> bool:
        cached = self._has_training_loop.get(root)
        if cached is None:
            loops = self.analysis.loops
            cached = any(
                isinstance(inner, (cst.For, cst.While)) and loops.is_training_loop(inner)
                and not self._over_step_parts(inner)
                for inner in self.analysis.tree.walk(root)
            )
            self._has_training_loop[root] = cached
        return cached

    def _over_step_parts(self, loop: Loop) -> bool:
        """``for loss in losses: loss.backward()``, ``for opt in optimizers.values():
        opt.step()``: a loop over the parts of one step, not over batches. It runs backward
        or a step itself, each naming what its header binds, calls no function of the file
        that trains, and draws no batch from a loader."""
        if not isinstance(loop, cst.For) or self.analysis.dataflow.is_dataloader_loop(loop):
            return False
        tree = self.analysis.tree
        loops = self.analysis.loops
        own = [call for call in loops.training_calls if tree.is_inside(call, loop)]
        if not own:
            return False
        targets = loops.loop_targets(loop)
        if not all(_names_part(call, targets) for call in own):
            return False
        return not any(
            isinstance(node, cst.Call) and any(
                loops.function_trains(f)
                for f in tree.functions_by_name.get(last_name(node.func) or "", ()))
            for node in tree.walk(loop))

    def _is_step_loop(self, loop: Loop, *, eval_loops: bool) -> bool:
        loops = self.analysis.loops
        flow = self.analysis.dataflow
        if not (loops.is_training_loop(loop) or (eval_loops and flow.is_dataloader_loop(loop))):
            return False
        # The epoch loop around a batch loop, inline or inside a `train_one_epoch()` helper,
        # is not a step loop; a step loop around a gradient-accumulation loop is.
        if self._contains_training_loop(loop) and not self._accumulates_within(loop):
            return False
        return not any(self._reaches_training_loop(call, 0) for call in loops.loop_calls(loop))

    def _accumulates_within(self, loop: Loop) -> bool:
        """Each iteration of ``loop`` is one optimizer step over micro-batches: it steps the
        optimizer itself (outside its inner loops), and every training loop inside it is a
        gradient-accumulation loop that steps no optimizer of its own (nor through a
        function of the file it calls), counted (``for _ in range(accum): ... backward()``)
        or over the micro-batches of the outer loop's item (``for micro_batches in batches:
        for i, mb in enumerate(micro_batches):``), not over a DataLoader."""
        tree = self.analysis.tree
        calls = self.analysis.loops.training_calls
        if not any(is_optimizer_step(call) and tree.enclosing_loops(call)[:1] == [loop]
                   for call in calls):
            return False
        inner = [node for node in tree.walk(loop)
                 if node is not loop and isinstance(node, (cst.For, cst.While))
                 and self.analysis.loops.is_training_loop(node)]
        flow = self.analysis.dataflow
        items = self.analysis.loops.loop_targets(loop)
        return bool(inner) and all(
            isinstance(node, cst.For) and not flow.is_dataloader_loop(node)
            and (_counted(node) or any(isinstance(n, cst.Name) and n.value in items
                                       for n in (node.iter, *tree.walk(node.iter))))
            and not any(is_optimizer_step(call) and tree.is_inside(call, node)
                        for call in calls)
            and not self._steps_through_calls(node)
            for node in inner)

    def _steps_through_calls(self, loop: cst.For) -> bool:
        """Does the loop call a function of the file that steps an optimizer?"""
        tree = self.analysis.tree
        steps = [call for call in self.analysis.loops.training_calls if is_optimizer_step(call)]
        for node in tree.walk(loop):
            if not isinstance(node, cst.Call):
                continue
            for function in tree.functions_by_name.get(last_name(node.func) or "", ()):
                if any(tree.enclosing_function(call) is function for call in steps):
                    return True
        return False

    def _steps_itself(self, function: cst.FunctionDef) -> bool:
        """Does ``function`` run backward or an optimizer step outside any loop of its own?"""
        tree = self.analysis.tree
        return any(
            tree.enclosing_function(call) is function
            and not any(tree.is_inside(loop, function) for loop in tree.enclosing_loops(call))
            for call in self.analysis.loops.training_calls
        )

    def _reaches_training_loop(self, call: cst.Call, depth: int) -> bool:
        """Does a same-file function this call runs hold a training loop, itself or through
        the functions it calls in turn (``self.train_epoch()`` -> ``self.play_steps()``, whose
        loop trains), a few levels deep? Then the loop around the call runs per epoch."""
        name = last_name(call.func)
        if name is None or depth > _MAX_DEPTH or _mode_switch(call):
            return False
        own = _own_call(call)
        caller = self.analysis.tree.enclosing_function(call)
        # `self.train()` and `self.net.train()` answer differently, and so do calls from
        # different functions (a function never counts as a helper of its own loop).
        key = (name, depth, own, caller)
        cached = self._reaches.get(key)
        if cached is not None:
            return cached
        self._reaches[key] = False  # a recursive helper ends here
        found = False
        for function in self.analysis.tree.functions_by_name.get(name, ()):
            if function is caller:
                continue  # the call sits in this very function: recursion, not a helper
            if self._contains_training_loop(function):
                found = True
                break
            if not own or self._steps_itself(function):
                # Another object's method of the same name (`self.net.train()`), or a step
                # function (backward or step outside any loop of its own), which is the
                # batch loop's step: what it calls is part of the step, not a batch loop.
                continue
            if any(self._reaches_training_loop(inner, depth + 1)
                   for inner in self.analysis.tree.walk(function)
                   if isinstance(inner, cst.Call) and _own_call(inner)):
                found = True
                break
        self._reaches[key] = found
        return found

    def step_loop(self, node: cst.CSTNode, *, eval_loops: bool = False) -> Loop | None:
        """The nearest loop around ``node``, if every iteration of it is one step.

        ``eval_loops`` also accepts a loop over a DataLoader that does not train (evaluation).
        Only the nearest enclosing loop counts: in a nested non-training loop (over a
        model's layers, say) the node runs per item of that loop instead.
        """
        enclosing = self._loops_around(node)
        if not enclosing:
            return None
        nearest = enclosing[0]
        return nearest if self._is_step_loop(nearest, eval_loops=eval_loops) else None

    def _loops_around(self, node: cst.CSTNode) -> list[Loop]:
        """The loops around ``node`` in its function, nearest first, without the loops over
        the parts of one step's loss (``for name in criterion_names:``, ``for k, v in
        losses.items():``): what runs in them runs every step, once per part."""
        loops = self.analysis.tree.enclosing_loops(node)
        while loops and self._over_loss_parts(loops[0]):
            loops = loops[1:]
        return loops

    def _over_loss_parts(self, loop: Loop) -> bool:
        if not isinstance(loop, cst.For) or self.analysis.dataflow.is_dataloader_loop(loop):
            return False
        words = [n.value if isinstance(n, cst.Name) else n.attr.value
                 for n in (loop.iter, *self.analysis.tree.walk(loop.iter))
                 if isinstance(n, cst.Name | cst.Attribute)]
        return (any(_LOSS_PARTS.search(w) for w in words)
                and not any(w in ("range", "enumerate", "zip") for w in words)
                and not self._contains_training_loop(loop)
                and not self._is_step_loop(loop, eval_loops=True))

    def framework_step(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The framework's per-batch hook (``training_step``) ``node`` runs in, outside any
        loop of its own: its body runs every step."""
        tree = self.analysis.tree
        if tree.enclosing_loops(node):
            return None
        func = tree.enclosing_function(node)
        if func is None or not framework_train_hook(
                func.name.value, tree.enclosing_class(func) is not None):
            return None
        return func

    def in_step_helper(
        self, node: cst.CSTNode,
        skip_site: Callable[[cst.Call, Loop], bool] | None = None, depth: int = 0,
    ) -> bool:
        """``node`` is outside any loop in a function a step loop of this file calls, or
        that such a function calls in turn, outside its own loops (detectron2's ``run_step``
        calling ``self._write_metrics(loss_dict)``). ``skip_site``: call sites in the step
        loop that do not run every step (a rule's logging-interval test: ``if step %
        eval_every == 0: self.evaluate()``)."""
        tree = self.analysis.tree
        if self._loops_around(node):
            return False
        func = tree.enclosing_function(node)
        if func is None or self._contains_training_loop(func):
            return False
        if self.framework_step(node) is not None:
            return True  # the framework calls it for every batch
        needed = _given_before(node, func, tree)
        for call in (*(c for c in self.analysis.loops.training_callers(func)
                       if not needed or _passes_all(c, func, needed)),
                     *self._steps_with(func)):
            loop = self.step_loop(call)
            if loop is not None and (skip_site is None or not skip_site(call, loop)):
                return True
        if depth < _HELPER_DEPTH and not needed and not self._runs_a_step(func):
            # A helper of a step function (which runs backward or the optimizer step
            # itself): it runs whenever the step function does.
            return any(self._runs_a_step(caller_function)
                       and not _under_parameter_test(call, caller_function, tree)
                       and self.in_step_helper(call, skip_site, depth + 1)
                       for call in tree.calls_of(func)
                       if (caller_function := tree.enclosing_function(call)) is not None)
        return False

    def _runs_a_step(self, func: cst.FunctionDef) -> bool:
        """Does ``func`` run backward or an optimizer step itself?"""
        return any(self.analysis.tree.enclosing_function(call) is func
                   for call in self.analysis.loops.training_calls)

    def _steps_with(self, func: cst.FunctionDef) -> list[cst.Call]:
        """Optimizer steps given ``func`` as their closure (``optimizer.step(closure)``, the
        L-BFGS way) in the scope that defines it: each step runs it, at least once."""
        tree = self.analysis.tree
        scope = tree.enclosing_function(func)
        return [
            call for call in self.analysis.loops.training_calls
            if is_optimizer_step(call) and tree.enclosing_function(call) is scope
            and any(isinstance(arg.value, cst.Name) and arg.value.value == func.name.value
                    for arg in call.args)
        ]


def _counted(loop: cst.For) -> bool:
    """``for _ in range(accum):``"""
    return (isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name)
            and loop.iter.func.value == "range")


def _names_part(call: cst.Call, targets: set[str]) -> bool:
    """The backward or step call is on a part the loop binds: its receiver is one
    (``loss.backward()``, ``opt.step()``), or an argument of it or of the call it is made
    on (``scaler.scale(loss).backward()``, ``scaler.step(opt)``, ``engine.backward(loss)``);
    an index (``out[k].backward()``) is none."""
    def bound(expr: cst.BaseExpression | None) -> bool:
        return isinstance(expr, cst.Name) and expr.value in targets

    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if bound(func.value) or any(bound(a.value) for a in call.args):
        return True
    inner = func.value
    return isinstance(inner, cst.Call) and any(bound(a.value) for a in inner.args)


def _own_call(call: cst.Call) -> bool:
    """``helper(...)`` or ``self.helper(...)``: a call that names a function of this file
    or a method of the object, not a method of another object (``self.model.train()`` is a
    mode switch, not the file's ``def train``)."""
    func = call.func
    return isinstance(func, cst.Name) or (
        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
        and func.value.value == "self")



def _mode_switch(call: cst.Call) -> bool:
    """``self.model.train()``, ``net.eval()``, ``model.train(False)``: a module's mode
    switch (its receiver named like a module), not a run of the file's ``def train``, even
    when that function holds the training loop the switch sits in."""
    func = call.func
    if (not isinstance(func, cst.Attribute) or func.attr.value not in ("train", "eval")
            or len(call.args) > 1 or _own_call(call)):
        return False
    if call.args:  # `model.train(False)`, `model.train(mode=m)`, not `model.train(loader)`
        arg = call.args[0]
        if not ((arg.keyword is not None and arg.keyword.value == "mode")
                or (isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"))
                or isinstance(arg.value, cst.UnaryOperation)):
            return False
    held = last_name(func.value)
    return held is not None and is_model_word(held)


def _given_before(node: cst.CSTNode, func: cst.FunctionDef, tree: TreeIndex) -> set[str]:
    """Parameters of ``func`` that ``node`` needs: an earlier statement of a block around
    it returns when one is None (``if eval_res is None: return``)."""
    params = {p.name.value for p in (*func.params.posonly_params, *func.params.params,
                                     *func.params.kwonly_params)}
    needed: set[str] = set()
    child: cst.CSTNode = node
    for anc in tree.ancestors(node):
        if anc is func:
            break
        if isinstance(anc, cst.IndentedBlock) and child in anc.body:
            for statement in anc.body[:anc.body.index(child)]:
                name = _returns_when_none(statement)
                if name in params:
                    needed.add(name)
        child = anc
    return needed


def _under_parameter_test(node: cst.CSTNode, func: cst.FunctionDef, tree: TreeIndex) -> bool:
    """Is ``node`` inside an ``if`` on a parameter of ``func`` (``if run_online_evaluation:``
    in nnU-Net's ``run_iteration``, which only its validation callers set)?"""
    params = {p.name.value for p in (*func.params.posonly_params, *func.params.params,
                                     *func.params.kwonly_params)}
    for anc in tree.ancestors(node):
        if anc is func:
            return False
        if isinstance(anc, cst.If):
            test = anc.test
            while isinstance(test, cst.UnaryOperation):
                test = test.expression
            if isinstance(test, cst.Comparison):
                test = test.left
            if isinstance(test, cst.Name) and test.value in params:
                return True
    return False


def _returns_when_none(statement: cst.CSTNode) -> str | None:
    """``P`` of ``if P is None: return``."""
    if not (isinstance(statement, cst.If) and statement.orelse is None):
        return None
    test = statement.test
    if not (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"):
        return None
    body = statement.body
    if not (isinstance(body, cst.IndentedBlock) and all(
            isinstance(line, cst.SimpleStatementLine)
            and all(isinstance(small, cst.Return) for small in line.body)
            for line in body.body)):
        return None
    return test.left.value


def _passes_all(call: cst.Call, func: cst.FunctionDef, needed: set[str]) -> bool:
    """``call`` passes every parameter in ``needed`` (by keyword or position; a starred
    argument may pass any)."""
    if any(arg.star for arg in call.args):
        return True
    names = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if names and names[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        names = names[1:]
    positional = sum(1 for arg in call.args if arg.keyword is None)
    given = set(names[:positional]) | {
        arg.keyword.value for arg in call.args if arg.keyword is not None}
    return needed <= given

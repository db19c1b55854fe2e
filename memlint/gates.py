"""The second prefilter: rules dropped for a file whose code cannot hold their finding.

The byte prefilter (:mod:`memlint.prefilter`) also matches words in docstrings and comments:
a library's docstrings show ``loss.backward()`` and ``model.eval()`` in their examples. Once
the scan pass has the file's stdlib ``ast`` (the module summary needs it anyway), a rule's
``code_gate`` is checked against what the code itself does, before libcst parses the file.

A gate states a necessary condition of the rule's findings, in two kinds of token:
``call:NAME`` (a call whose callee's last name is NAME: ``x.NAME(...)`` or ``NAME(...)``, as
the libcst analyses index calls, or a name imported as NAME: ``ck(...)`` after ``from m import
NAME as ck``) and ``node:TYPE`` (a stdlib ``ast`` node type, ``node:Try``).
The rule stays when the code holds any one of its tokens; a gate that is too narrow loses
findings, so ``tests/memlint/test_gates.py`` checks every gate against the rule's own
examples and the labelled corpus.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Protocol, TypeVar

from memlint.astwalk import fields_of, walk
from memlint.vocabulary import (
    BATCH_INDEX,
    BATCH_ITEM,
    BROAD_ERROR_TYPES,
    DERIVING_FUNCTION_NAMES,
    DETERMINISTIC_FACTORIES,
    DTYPE_NAME,
    ELEMENTWISE_FUNCTION_NAMES,
    EVAL_FUNCTION,
    EVAL_LOADER,
    EVAL_STEP_HOOK,
    FOREIGN_FRAMEWORKS,
    FRAMEWORK_HOOK,
    FUNCTIONAL_LOSSES,
    HOST_WRAPPER_NAMES,
    INFERENCE_METHOD,
    JOINING_FUNCTION_NAMES,
    LEGACY_TENSOR_TYPES,
    LOADER_NAME,
    MASK_FUNCTION_NAMES,
    MODEL_MACHINERY,
    MODULE_BASES,
    OOM_TEXT,
    OOM_TYPE,
    OPTIMIZER_NAME,
    PASS_THROUGH,
    PREDICT_API,
    PROGRESS_WRAPPER,
    RANDOM_FACTORIES,
    SCALER_NAME,
    STAGING_KEYWORDS,
    TORCH_DTYPES,
    forward_by_name,
    framework_batch_feed,
    framework_train_hook,
    is_test_code,
    names_a_loss,
    names_evaluation,
    names_training_data,
)


class Gated(Protocol):
    @property
    def code_gate(self) -> tuple[str, ...]: ...

    @property
    def code_requires(self) -> tuple[tuple[str, ...], ...]: ...


G = TypeVar("G", bound=Gated)


class PathGated(Protocol):
    @property
    def skips_test_code(self) -> bool: ...


P = TypeVar("P", bound=PathGated)


def for_path(rules: Iterable[P], path: str, source: str | bytes | None = None) -> list[P]:
    """The rules that can report in the file at ``path`` (as displayed: the path the rules
    see): in test code (:func:`~memlint.vocabulary.is_test_code`, which reads ``source``
    for a ``*_test.py``), none that leaves it alone. Checked before anything is parsed, and
    again where rules run."""
    kept = list(rules)
    if not is_test_code(path, source):
        return kept
    return [r for r in kept if not r.skips_test_code]


def code_facts(tree: ast.AST, source: bytes | None = None) -> frozenset[str]:
    """The gate tokens a parsed file holds: every callee's last name, every node type and
    the ``fact:`` tokens of :class:`_Structure` (``source``: the bytes ``tree`` was parsed
    from, for what only the text shows, such as comments; without it such facts hold)."""
    structure = _Structure()
    structure.walk(tree)
    aliases = structure.aliases
    return frozenset([*(f"call:{name}" for name in structure.called),
                      # `ck(...)` after `from torch.utils.checkpoint import checkpoint as ck`
                      *(f"call:{aliases[name].rpartition('.')[2]}"
                        for name in structure.called if name in aliases),
                      *(f"node:{kind.__name__}" for kind in structure.kinds),
                      *structure.facts(source)])


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FACTORIES = DETERMINISTIC_FACTORIES | RANDOM_FACTORIES | LEGACY_TENSOR_TYPES
_OOM_BYTES = re.compile(OOM_TEXT.pattern.encode(), re.IGNORECASE)


# What a chain under a move may pass through on its way down to a factory.
_CHAIN_LINKS = frozenset({ast.Call, ast.Subscript, ast.Compare, ast.BinOp})


def _number(node: ast.AST) -> bool:
    return type(node) is ast.Constant and type(node.value) in (int, float)


def _names_cuda_type(call: ast.Call) -> bool:
    """``.type(torch.cuda.FloatTensor)``: a cast to a CUDA tensor type, a copy to the GPU."""
    value = call.args[0] if call.args else call.keywords[0].value
    return (type(value) is ast.Attribute and value.attr.endswith("Tensor")
            and type(value.value) is ast.Attribute and value.value.attr == "cuda")


def may_move(call: ast.Call) -> bool:
    """Can this ``.to(...)`` be a move (not a dtype cast)? Its target is ``device=``, the
    first positional argument or a ``**`` mapping; a name spelled like a dtype (``.to(x.dtype)``,
    ``.to(compute_type)``, ``.to(torch.float16)``) is none, as the dataflow analysis reads it."""
    target = next((k.value for k in call.keywords if k.arg == "device"),
                  call.args[0] if call.args else None)
    if target is None:
        return any(k.arg is None for k in call.keywords)  # `**tpdv` may hold a device
    if type(target) is ast.Attribute:
        last = target.attr
        if (type(target.value) is ast.Name and target.value.id == "torch"
                and last in TORCH_DTYPES):
            return False
    elif type(target) is ast.Name:
        last = target.id
    else:
        return True
    return not (DTYPE_NAME.search(last) or last.lower().endswith("type"))


def _names_eval_loader(iterable: ast.expr) -> bool:
    """Does a loop's iterable name a loader of held-out data (``enumerate(test_loader)``,
    ``self.val_dl``)?"""
    return any((isinstance(n, ast.Name) and EVAL_LOADER.match(n.id) is not None)
               or (isinstance(n, ast.Attribute) and EVAL_LOADER.match(n.attr) is not None)
               for n in walk(iterable))


def draws_batches(loop: ast.For | ast.AsyncFor, evaluating: bool = False) -> bool:
    """``for batch_idx, (x, y) in enumerate(data):``, ``for batch_idx, batch_data in
    enumerate(data):``: a loop header that says it draws batches; or ``for x, y in
    self.train_data:`` (``for batch in self.train_data:``, an item the body unpacks, ``for
    step, (x, y) in enumerate(train_queue):``) with a backward pass in the body or in a
    function named for evaluation (``evaluating``), a loop that trains or evaluates on what
    it unpacks from data named as such (the dataflow analysis takes such an iterable for a
    loader when a parameter or an attribute hands it in)."""
    target, items = loop.target, loop.iter
    enumerated = (isinstance(items, ast.Call) and isinstance(items.func, ast.Name)
                  and items.func.id == "enumerate")
    if enumerated:
        # `for i, item in enumerate(data)` unpacks an index, not a batch; `for batch_idx,
        # batch in enumerate(data)` draws batches, and so does `for step, (x, y) in
        # enumerate(data)` in a loop that trains or evaluates
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                and isinstance(index := target.elts[0], ast.Name)):
            return False
        item = target.elts[1]
        if BATCH_INDEX.match(index.id) is not None and (
                isinstance(item, (ast.Tuple, ast.List))
                or (isinstance(item, ast.Name) and BATCH_ITEM.match(item.id) is not None)):
            return True
        if not _unpacks_into_names(item):
            return False
    elif not (_unpacks_into_names(target)
              or (isinstance(target, ast.Name) and (BATCH_ITEM.match(target.id) is not None
                                                    or _unpacked_in(loop, target.id)))):
        return False
    # The evaluation loops the analysis takes are over what a parameter or the object hands
    # in, at most under progress bars (`tqdm(enumerate(test_data))`), not `zip(samples, s)`.
    wrapped_only = True
    while isinstance(items, ast.Call) and items.args:  # `tqdm(self.data)`: the data itself
        callee = items.func.attr if isinstance(items.func, ast.Attribute) else (
            items.func.id if isinstance(items.func, ast.Name) else "")
        wrapped_only = wrapped_only and (callee in PASS_THROUGH
                                         or PROGRESS_WRAPPER.search(callee) is not None)
        items = items.args[0]
    name = items.id if isinstance(items, ast.Name) else (
        items.attr if isinstance(items, ast.Attribute) else None)
    return name is not None and names_training_data(name) and (
        (evaluating and wrapped_only) or any(
            type(n) is ast.Call and type(n.func) is ast.Attribute
            and n.func.attr in ("backward", "manual_backward")
            for stmt in loop.body for n in walk(stmt)))


def _names_no_grad(decorator: ast.expr) -> bool:
    """``@torch.no_grad()``, ``@no_grad``, ``@torch.inference_mode()``: by its last name, a
    looser test than the analysis's import-resolved one."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else (
        target.id if isinstance(target, ast.Name) else "")
    return name in ("no_grad", "inference_mode")


def _unpacks_into_names(target: ast.expr) -> bool:
    """``x, y`` (or ``[x, y]``): a loop target that unpacks each item into plain names."""
    return (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) >= 2
            and all(type(e) is ast.Name for e in target.elts))


def _unpacked_in(loop: ast.For | ast.AsyncFor, name: str) -> bool:
    """``for data_pair in client_data: (data, target) = data_pair``: the body unpacks the
    item into plain names, as a header that unpacks it does."""
    return any(
        type(n) is ast.Assign and len(n.targets) == 1 and type(n.value) is ast.Name
        and n.value.id == name and type(n.targets[0]) in (ast.Tuple, ast.List)
        and len(n.targets[0].elts) >= 2  # type: ignore[attr-defined]
        and all(type(e) is ast.Name for e in n.targets[0].elts)  # type: ignore[attr-defined]
        for stmt in loop.body for n in walk(stmt))


def _opens_block(tree: ast.AST, switches: set[int]) -> bool:
    """Does one of these eval switches open an evaluation block, as MEM002 reads one: a
    statement of its own with statements after it in its block, where a model call can be
    evaluation code (not in a model's ``forward``/``__init__``) or a plain-name call can run a
    helper as inference code?"""
    # (node, enclosing function, whether statements follow the node's chain of enclosing
    # `if`/`for` statements: a switch under a guard, or for each model of a collection,
    # opens a block for what follows the guard or the loop)
    stack: list[tuple[ast.AST, str, bool]] = [(tree, "", False)]
    while stack:
        node, function, follows = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        guarded = follows and type(node) in (ast.If, ast.For)
        for field in fields_of(type(node)):
            value = getattr(node, field)
            if type(value) is not list:
                if isinstance(value, ast.AST):
                    stack.append((value, function, False))
                continue
            for index, item in enumerate(value):
                if not isinstance(item, ast.AST):
                    continue
                later = index + 1 < len(value)
                stack.append((item, function, later or guarded))
                if (type(item) in (ast.Expr, ast.Assign)
                        and id(item.value) in switches):  # type: ignore[attr-defined]
                    if guarded and not later:
                        return True
                    if later and (function not in MODEL_MACHINERY or any(
                            type(n) is ast.Call and type(n.func) is ast.Name
                            for after in value[index + 1:] for n in walk(after))):
                        return True
    return False


def _says_oom(source: bytes, spans: list[tuple[int, int]]) -> bool:
    """Do these lines, or the blank and comment lines right after them (a block's trailing
    comments belong to it in libcst), mention running out of memory?"""
    lines = source.splitlines()
    for first, last in spans:
        end = last
        while end < len(lines) and (not lines[end].strip()
                                    or lines[end].lstrip().startswith(b"#")):
            end += 1
        if any(_OOM_BYTES.search(line) for line in lines[first - 1:end]):
            return True
    return False


class _Structure:
    """Where things sit in the code, as far as the gates need it, in one walk.

    The ``fact:`` tokens are necessary conditions of the analyses' own questions, each
    looser than the analysis it stands for (a nested scope counts as its parent's, any
    enclosing loop counts):

    - ``fact:loader-name``: a name in the code (not in a string) that could hold a
      DataLoader, or a loop header that draws batches (``for batch_idx, (x, y) in
      enumerate(data):``), or a method a framework hands batches (BasicSR's ``def
      feed_data(self, data)``); every loader the dataflow analysis follows starts at one.
    - ``fact:eval-collection``: ``c.append(v)``/``c.extend(v)``/``c += [v]`` inside a loop of a
      function named like evaluation or that calls ``.eval()`` itself (module level: a
      module-level ``.eval()``), unless the function sits in a model class: one that defines
      ``forward``, or whose base defined in this file (by its plain name) is one. Its
      methods are never evaluation code by name or switch (the analysis asks
      ``is_module_class``, which is true at least for these).
    - ``fact:loader-collection``: such a site in any loop, or a list comprehension, in a
      file with a loader name.
    - ``fact:eval-block``: ``m.eval()`` or ``m.train(False)`` opening a block of evaluation
      code (:func:`_opens_block`).
    - ``fact:eval-loader-loop``: a ``for`` loop over a loader named for held-out data
      (``test_loader``, ``val_dl``: :data:`~memlint.vocabulary.EVAL_LOADER`).
    - ``fact:eval-function``: a function named like evaluation code (MEM002's names), outside
      a class, or a method of that name looping in a file with a loader name or in a class
      with an eval switch; or, in a file with a loader name, a class with an eval switch and
      a ``for`` loop in a method (an inference wrapper holding its networks in eval mode);
      or a ``predict()`` API (:data:`~memlint.vocabulary.PREDICT_API`) in a file with a
      class based on ``nn.Module``, unless its own class calls it on ``self`` (a head the
      model runs, as MEM002 reads it); or a method of that name, other than ``predict()``,
      that runs itself (``self(x)``, ``self.forward(x)``).
    - ``fact:oom-handler``: ``except ...OutOfMemoryError``, or a ``RuntimeError``/``Exception``
      handler whose lines (with the comments that follow them) mention running out of memory.
    - ``fact:foreign-framework``: the module imports another framework (JAX, Warp, ...:
      :data:`~memlint.vocabulary.FOREIGN_FRAMEWORKS`) and nothing from torch, anywhere in
      it; not a condition of any rule but their common exclusion (:func:`gated`).
    - ``fact:factory-move``: ``.cuda(...)``, ``.type_as(tensor)``, or ``.to(...)`` given a
      device or a positional argument, on a chain of calls that starts at a tensor factory
      (``torch.zeros(n).float().cuda()``, also through ``from torch import`` aliases, or
      wrapped in ``nn.Parameter(...)``/``Variable(...)``) given no keyword that places its
      result; or a name bound to such a chain (``h = torch.zeros(n)``) that some
      ``h.cuda()``/``h.to(...)``/``h.type_as(t)`` moves, also after casts and reshapes
      (``h.repeat(b, 1).to(device)``).
    - ``fact:optimizer-step``: ``x.step(...)`` on a receiver named like an optimizer or an
      AMP scaler (``opts[0].step()`` reads as ``opts``), the steps the training analysis
      (:mod:`memlint.analysis.loops`) counts; a scheduler's or an environment's ``step()``
      is none.
    - ``fact:unplaced-load``: a ``load(...)`` call that leaves its tensors' device to the
      file (no ``map_location`` by keyword or second position, no ``*``/``**`` arguments),
      called on ``torch`` or a module alias of it, or by a bare ``load``; or any call of a
      name imported as ``load`` (``from torch import load as tl``).
    - ``fact:forward-call``: a call with arguments that MEM002 can take for a forward pass
      (a superset, by name): ``m.forward(x)``, a call named like a module (``model(x)``,
      ``self.text_encoder(ids)``), an inference method (``self.net.predict(x)``),
      ``self(x)``, a call of a plain name that the file switches to eval (``bm.eval()``
      ... ``bm(x)``) or of a method on one (``model.deeptabular(x)``), or any call in a
      file with a class whose base is named like ``nn.Module`` (its instances' calls are
      forwards); or ``self.forward()`` without
      arguments (a graph network running over the inputs it holds).
    - ``fact:model-call``: a call that MEM016 can take for a model's forward (a superset of
      :meth:`~memlint.analysis.calls.CallClassifier.is_model_forward`, by name): any call of
      ``forward`` or of a name :func:`~memlint.vocabulary.forward_by_name` accepts, whatever
      its arguments, a call of a name the file switches to eval, or any call in a file with
      a class whose base is named like ``nn.Module``.
    - ``fact:looped-empty-cache``: ``torch.cuda.empty_cache()`` (by its last name, or a name
      imported as it) called inside a loop, or in the body of a per-batch hook
      (``training_step``): where MEM012 reports it.
    - ``fact:train-hook``: a method named ``training_step`` or ``train_on_batch`` in a class
      body (a framework's per-batch hook, which it calls every step:
      :func:`~memlint.vocabulary.framework_train_hook`).
    - ``fact:copy-call``: a method call named like a device copy (``x.to(...)``,
      ``x.cuda()``, ``x.type(...)``); not a rule's gate, but what the runner asks of a file
      linted for MEM003 (:func:`copies_in_code`).
    - ``fact:graph-source``: something the graph analysis starts an autograd graph at (a
      superset, by name): a call named like a module's forward or a loss
      (:func:`_starts_graph`), a backward pass, a name ending in ``loss`` (``out.loss``), a
      subscript by a string naming a loss (``out["loss"]``), or a class whose base is named
      like ``nn.Module`` (calls of its instances are forwards).
    """

    def __init__(self) -> None:
        self.called: set[str] = set()
        self.kinds: set[type[ast.AST]] = set()
        self.names: set[str] = set()
        self.eval_scopes: set[int] = set()
        self.collecting: set[int] = set()
        self.eval_methods: dict[int, int] = {}  # evaluation-named method -> its class
        self.scope_class: dict[int, int] = {}  # function -> the innermost class around it
        self.forward_classes: set[int] = set()  # classes that define `forward` in their body
        self.class_bases: dict[int, list[str]] = {}  # class -> its bases' plain names
        self.classes_named: dict[str, list[int]] = {}
        self.method_loops = False
        # Classes with a ``for`` loop in one of their methods (an inference wrapper's loader
        # loop, evaluation code when the class holds its networks in eval mode).
        self.loop_classes: set[int] = set()
        self.comprehension = False
        self.switches: set[int] = set()  # the eval switch calls
        self.switch_classes: set[int] = set()
        self.tree: ast.AST | None = None
        self.eval_function = False
        # Methods named `predict`/`predict_proba` (class, name), and those a method of the
        # same class calls on `self` (a head its `forward` runs, no API).
        self.predict_methods: set[tuple[int, str]] = set()
        self.self_predicts: set[tuple[int, str]] = set()
        self.aliases: dict[str, str] = {}
        self.moved: set[str] = set()  # callees at the root of a `.to()`/`.cuda()` chain
        self.moved_names: set[str] = set()  # `h` of `h.cuda()`, `self.h` of `self.h.to(d)`
        self.factory_names: set[str] = set()  # `h` of `h = torch.zeros(n)`
        self.oom_handler = False
        self.broad_handlers: list[tuple[int, int]] = []  # their first and last lines
        self.eval_loader_loop = False
        self.batch_loop = False  # `for batch_idx, (x, y) in enumerate(data):`, `feed_data`
        self.inference_scopes: set[int] = set()  # functions decorated with a no-grad switch
        self.imported: set[str] = set()  # top-level packages of absolute imports
        self.loss_entry = False  # `out["loss"]`
        self.optimizer_step = False  # `optimizer.step()`, `scaler.step(opt)`
        self.forward_call = False  # `model(x)`, `self.net.predict(x)`, `self(x)`
        self.self_runs: set[int] = set()  # functions that run `self(x)`, `self.forward(x)`
        self.named_methods: set[int] = set()  # evaluation-named methods, `predict()` aside
        self.switched_names: set[str] = set()  # `bm` of `bm.eval()`
        self.method_receivers: set[str] = set()  # `model` of `model.deeptabular(x)`
        self.name_calls: set[str] = set()  # `bm` of `bm(x)`
        self.module_class = False  # a class with a base named like `nn.Module`
        # `r` of `r.load(f)` in a call that leaves `map_location` to the file; a bare
        # `load(f)` that does
        self.load_receivers: set[str] = set()
        self.bare_load = False
        self.train_hook = False  # a framework's per-batch hook (`training_step`)
        self.copy_call = False  # `x.to(...)`, `x.cuda(...)`, `x.type(...)`
        # Callees (last names) called in a loop, or directly in a per-batch hook's body.
        self.looped_calls: set[str] = set()
        self.hook_scopes: set[int] = set()  # `def training_step(...)` in a class

    def walk(self, tree: ast.AST) -> None:
        # (node, id of its function (0: the module), inside a loop, ids of the classes around
        # it, innermost last, directly in the innermost one's body)
        self.tree = tree
        stack: list[tuple[ast.AST, int, bool, tuple[int, ...], bool]] = [
            (tree, 0, False, (), False)]
        pop, push = stack.pop, stack.append
        kinds, names = self.kinds, self.names
        call_t, name_t, attribute_t = ast.Call, ast.Name, ast.Attribute
        ast_type = ast.AST
        while stack:
            node, scope, in_loop, klass, in_body = pop()
            kind = type(node)
            kinds.add(kind)
            inner_scope, inner_loop, inner_class, inner_body = scope, in_loop, klass, False
            if kind is call_t:
                self._call(node, scope, in_loop, klass)  # type: ignore[arg-type]  # checked above
            elif kind is name_t:
                names.add(node.id)  # type: ignore[attr-defined]  # an ast.Name
            elif kind is attribute_t:
                names.add(node.attr)  # type: ignore[attr-defined]  # an ast.Attribute
            elif kind in _FUNCTIONS:
                inner_scope = id(node)
                if klass:
                    self.scope_class[inner_scope] = klass[-1]
                    if in_body and node.name == "forward":  # type: ignore[attr-defined]
                        self.forward_classes.add(klass[-1])
                    if framework_train_hook(node.name, True):  # type: ignore[attr-defined]
                        self.hook_scopes.add(inner_scope)
                        if in_body:
                            self.train_hook = True
                self._function(node, inner_scope,  # type: ignore[arg-type]
                               klass[-1] if in_body else 0)
            elif kind in _LOOPS:
                inner_loop = True
                if kind is not ast.While:
                    if scope in self.eval_methods:
                        self.method_loops = True
                    if scope in self.scope_class:
                        self.loop_classes.add(self.scope_class[scope])
                    if not self.eval_loader_loop and _names_eval_loader(
                            node.iter):  # type: ignore[attr-defined]  # a for loop
                        self.eval_loader_loop = True
                    if not self.batch_loop and draws_batches(
                            node,  # type: ignore[arg-type]
                            scope in self.eval_scopes or scope in self.inference_scopes):
                        self.batch_loop = True
            elif kind is ast.ClassDef:
                inner_class, inner_body = (*klass, id(node)), True
                names.add(node.name)  # type: ignore[attr-defined]  # an ast.ClassDef
                self.classes_named.setdefault(node.name, []).append(  # type: ignore[attr-defined]
                    id(node))
                self.class_bases[id(node)] = [
                    b.id for b in node.bases if type(b) is name_t]  # type: ignore[attr-defined]
                if not self.module_class and any(
                        (b.attr if type(b) is attribute_t else getattr(b, "id", None))
                        in MODULE_BASES for b in node.bases):  # type: ignore[attr-defined]
                    self.module_class = True
            elif kind is ast.Subscript:
                key = node.slice  # type: ignore[attr-defined]  # an ast.Subscript
                if (type(key) is ast.Constant and type(key.value) is str
                        and "loss" in key.value.lower()):
                    self.loss_entry = True
            elif kind is ast.AugAssign:
                if (in_loop and type(node.op) is ast.Add  # type: ignore[attr-defined]
                        and type(node.value) in (ast.List, ast.ListComp)):  # type: ignore[attr-defined]
                    self.collecting.add(scope)
            elif kind is ast.ListComp:
                self.comprehension = True
            elif kind is ast.Assign:
                if type(node.value) in (call_t, ast.BinOp, ast.UnaryOp):  # type: ignore[attr-defined]
                    self._factory_binding(node)  # type: ignore[arg-type]  # checked above
            elif kind is ast.ExceptHandler:
                self._handler(node)  # type: ignore[arg-type]  # checked above
            elif kind is ast.arg:
                names.add(node.arg)  # type: ignore[attr-defined]  # an ast.arg
            elif kind is ast.keyword:
                if node.arg is not None:  # type: ignore[attr-defined]  # an ast.keyword
                    names.add(node.arg)  # type: ignore[attr-defined]
            elif kind is ast.Import:
                self.imported.update(a.name.partition(".")[0]
                                     for a in node.names)  # type: ignore[attr-defined]
            elif kind is ast.ImportFrom:
                if not node.level and node.module:  # type: ignore[attr-defined]
                    self.imported.add(node.module.partition(".")[0])  # type: ignore[attr-defined]
            elif kind is ast.alias:
                names.add(node.name)  # type: ignore[attr-defined]  # an ast.alias
                if node.asname is not None:  # type: ignore[attr-defined]
                    names.add(node.asname)  # type: ignore[attr-defined]
                    self.aliases[node.asname] = node.name  # type: ignore[attr-defined]
            for field in fields_of(kind):
                value = getattr(node, field)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast_type):
                            push((item, inner_scope, inner_loop, inner_class, inner_body))
                elif isinstance(value, ast_type):
                    push((value, inner_scope, inner_loop, inner_class, inner_body))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, key: int,
                  klass: int) -> None:
        """``klass``: the class whose body holds the definition (0: not a method)."""
        name = node.name
        self.names.add(name)
        if names_evaluation(name):
            self.eval_scopes.add(key)
        elif any(_names_no_grad(d) for d in node.decorator_list):
            self.inference_scopes.add(key)  # `@torch.no_grad()`: inference code by its mode
        if klass and name in PREDICT_API:
            self.predict_methods.add((klass, name))
        if framework_batch_feed(name, bool(klass)):
            self.batch_loop = True  # the framework's loop hands it batches
        if EVAL_FUNCTION.match(name) and not FRAMEWORK_HOOK.search(name):
            if klass:
                # Counts with a loop over a loader, or an eval switch in its class (below).
                self.eval_methods[key] = klass
                if name not in PREDICT_API:
                    self.named_methods.add(key)  # may detach its own forward (MEM002)
            else:
                self.eval_function = True

    def _call(self, node: ast.Call, scope: int, in_loop: bool, klass: tuple[int, ...]) -> None:
        func = node.func
        looped = in_loop or scope in self.hook_scopes
        if type(func) is ast.Attribute:
            method = func.attr
            self.called.add(method)
            if looped:
                self.looped_calls.add(method)
            count = len(node.args) + len(node.keywords)
            if method == "forward" and type(func.value) is ast.Name and (
                    func.value.id == "self"):
                self.self_runs.add(scope)
                self.forward_call = True  # `self.forward()` too: a run over inputs it holds
            if method == "__call__" and type(func.value) is ast.Name:
                # `net.__call__(x)` is `net(x)`
                if func.value.id == "self":
                    self.self_runs.add(scope)
                if count:
                    self.name_calls.add(func.value.id)
                    if func.value.id == "self" or forward_by_name(func.value.id):
                        self.forward_call = True
            if count and not self.forward_call and (
                    method == "forward" or INFERENCE_METHOD.match(method)
                    or EVAL_STEP_HOOK.match(method) or forward_by_name(method)):
                self.forward_call = True
            if count and type(func.value) is ast.Name:
                self.method_receivers.add(func.value.id)  # `model.deeptabular(x)`
            if method in _COPY_METHODS:
                self.copy_call = True
            if method in PREDICT_API and klass and type(func.value) is ast.Name and (
                    func.value.id == "self"):
                self.self_predicts.add((klass[-1], method))
            if method in ("append", "extend"):
                if in_loop and count == 1:
                    self.collecting.add(scope)
            elif method == "eval":
                if count == 0:
                    self._switch(node, klass)
                    self.eval_scopes.add(scope)
                    if type(func.value) is ast.Name:
                        self.switched_names.add(func.value.id)
            elif method == "train":
                value = node.args[0] if node.args else (
                    node.keywords[0].value if node.keywords else None)
                if count == 1 and type(value) is ast.Constant and value.value is False:
                    self._switch(node, klass)
            elif method == "load":
                if type(func.value) is ast.Name and _leaves_location(node):
                    self.load_receivers.add(func.value.id)
            elif method == "step":
                if not self.optimizer_step and _steps_optimizer(func.value):
                    self.optimizer_step = True
            elif (method == "cuda" or (method == "to" and may_move(node))
                  or (method == "type_as" and count == 1)
                  or (method == "type" and count == 1 and _names_cuda_type(node))):
                self._moved_chain(func.value)
                moved = func.value
                while type(moved) is ast.Call and type(moved.func) is ast.Attribute:
                    # `mask.repeat(b, 1, 1).to(device)`: the rule follows a name's casts and
                    # reshapes to its move (its factory bound by the statement before).
                    moved = moved.func.value
                receiver = _dotted(moved)
                if receiver is not None:
                    self.moved_names.add(receiver)
        elif type(func) is ast.Name:
            self.called.add(func.id)
            if looped:
                self.looped_calls.add(func.id)
            if func.id == "load" and _leaves_location(node):
                self.bare_load = True
            if node.args or node.keywords:
                self.name_calls.add(func.id)
            if func.id == "self":
                self.self_runs.add(scope)
            if (not self.forward_call and (node.args or node.keywords)
                    and (func.id == "self" or forward_by_name(func.id))):
                self.forward_call = True

    def _switch(self, node: ast.Call, klass: tuple[int, ...]) -> None:
        """``m.eval()`` / ``m.train(False)``, and the classes it is in."""
        self.switches.add(id(node))
        self.switch_classes.update(klass)

    def _handler(self, node: ast.ExceptHandler) -> None:
        kind = node.type
        items = kind.elts if isinstance(kind, ast.Tuple) else [kind]
        types = {t.attr if isinstance(t, ast.Attribute) else t.id
                 for t in items if isinstance(t, (ast.Attribute, ast.Name))}
        if OOM_TYPE in types:
            self.oom_handler = True
        elif types & BROAD_ERROR_TYPES:
            self.broad_handlers.append((node.lineno, node.end_lineno or node.lineno))

    def _moved_chain(self, value: ast.expr) -> None:
        """The callees of the calls chained under a move (``torch.arange(t).view(1, t)``),
        but not one given a keyword that already places its result (``device=``, ``out=``,
        ``pin_memory=``, ``generator=``) or ``**`` options that may hold one."""
        while type(value) in _CHAIN_LINKS:
            if isinstance(value, ast.Subscript):
                value = value.value  # `torch.arange(n)[None, :].to(device)`: a view
                continue
            if isinstance(value, ast.Compare):
                value = value.left  # `(torch.ones(n) == 1).to(device)`
                continue
            if isinstance(value, ast.BinOp):  # `(1 - torch.eye(n)).cuda()`
                # Either side may hold the factory (`-math.log(p) * torch.arange(h) / h`,
                # `torch.ones(b) * x.size(-1)`): follow both.
                self._moved_chain(value.left)
                value = value.right
                continue
            if not isinstance(value, ast.Call):
                return
            call = value
            if not any(k.arg is None or k.arg in STAGING_KEYWORDS for k in call.keywords):
                callee = call.func
                if type(callee) is ast.Attribute:
                    self.moved.add(callee.attr)
                elif type(callee) is ast.Name:
                    self.moved.add(callee.id)
            last = (call.func.attr if type(call.func) is ast.Attribute
                    else call.func.id if type(call.func) is ast.Name else None)
            if last in HOST_WRAPPER_NAMES and call.args:
                value = call.args[0]  # `nn.Parameter(torch.zeros(n)).cuda()`
                continue
            func = call.func
            if last in MASK_FUNCTION_NAMES and call.args and (type(func) is ast.Name or (
                    type(func) is ast.Attribute and type(func.value) is ast.Name)):
                value = call.args[0]  # `torch.triu(torch.ones(n, n), 1).to(device)`
                continue
            if (last in ELEMENTWISE_FUNCTION_NAMES or last in DERIVING_FUNCTION_NAMES) and (
                    call.args and type(func) is ast.Attribute and type(func.value) is ast.Name):
                value = call.args[0]  # `torch.log2(torch.arange(2, k).float()).to(device)`
                continue
            if last in JOINING_FUNCTION_NAMES and call.args and type(
                    call.args[0]) in (ast.List, ast.Tuple) and type(
                    func) is ast.Attribute and type(func.value) is ast.Name:
                # `torch.cat([torch.ones(b, 1), torch.zeros(b, t)], dim=1).to(device)`
                for element in call.args[0].elts:  # type: ignore[attr-defined]
                    self._moved_chain(element)
                return
            if type(call.func) is not ast.Attribute:
                return
            value = call.func.value

    def _factory_binding(self, node: ast.Assign) -> None:
        """``h = torch.zeros(n)`` (maybe cast or wrapped): a name that a later ``h.cuda()``
        may move (MEM010's factory moved by the next statement)."""
        if len(node.targets) != 1:
            return
        target = _dotted(node.targets[0])
        if target is None:
            return
        value = node.value
        while True:  # `1 - torch.eye(n)`: arithmetic with numbers alone
            if isinstance(value, ast.UnaryOp):
                value = value.operand
            elif isinstance(value, ast.BinOp) and _number(value.left):
                value = value.right
            elif isinstance(value, ast.BinOp) and _number(value.right):
                value = value.left
            elif isinstance(value, ast.BinOp):
                return
            else:
                break
        roots: set[str] = set()
        before = self.moved
        self.moved = roots
        try:
            self._moved_chain(value)
        finally:
            self.moved = before
        if any(name in _FACTORIES or self.aliases.get(name) in _FACTORIES for name in roots):
            self.factory_names.add(target)

    def facts(self, source: bytes | None) -> list[str]:
        aliases_of = {local: name.rpartition(".")[2] for local, name in self.aliases.items()}
        loader = self.batch_loop or any(LOADER_NAME.search(name) for name in self.names)
        found = []
        if self.oom_handler or (self.broad_handlers and (
                source is None or _says_oom(source, self.broad_handlers))):
            found.append("fact:oom-handler")
        if loader:
            found.append("fact:loader-name")
            if self.collecting or self.comprehension:
                found.append("fact:loader-collection")
        if any(self.scope_class.get(scope, 0) not in self._model_classes()
               for scope in self.collecting & self.eval_scopes):
            found.append("fact:eval-collection")
        if self.switches and self.tree is not None and _opens_block(self.tree, self.switches):
            found.append("fact:eval-block")
        if self.eval_function or (self.module_class and not (
                self.predict_methods <= self.self_predicts)) or (
                self.method_loops and loader) or any(
                    key in self.self_runs for key in self.named_methods) or any(
                klass in self.switch_classes for klass in self.eval_methods.values()) or (
                loader and not self.switch_classes.isdisjoint(self.loop_classes)):
            found.append("fact:eval-function")
        if self.eval_loader_loop:
            found.append("fact:eval-loader-loop")
        if "torch" not in self.imported and not self.imported.isdisjoint(FOREIGN_FRAMEWORKS):
            found.append(FOREIGN_FRAMEWORK)
        if any(name in _FACTORIES or self.aliases.get(name) in _FACTORIES
               for name in self.moved) or self.factory_names & self.moved_names:
            found.append("fact:factory-move")
        if self.optimizer_step:
            found.append("fact:optimizer-step")
        if any(n == "empty_cache" or aliases_of.get(n) == "empty_cache"
               for n in self.looped_calls):
            found.append("fact:looped-empty-cache")
        if self.train_hook:
            found.append("fact:train-hook")
        if self.copy_call:
            found.append(COPY_CALL)
        aliases = self.aliases
        # A call of a name imported as `load` (`tl(p)`) counts whatever its arguments: rare,
        # and not worth checking every plain call's arguments on the way.
        if self.bare_load or any(
                r == "torch" or aliases.get(r) == "torch" for r in self.load_receivers) or any(
                aliases.get(n) == "load" for n in self.called):
            found.append("fact:unplaced-load")
        if self.forward_call or self.module_class or not self.switched_names.isdisjoint(
                self.name_calls | self.method_receivers):
            found.append("fact:forward-call")
        if self.module_class or "forward" in self.called or any(
                map(forward_by_name, self.called)) or not self.switched_names.isdisjoint(
                self.called):
            found.append("fact:model-call")
        if (self.module_class or self.loss_entry or any(map(_starts_graph, self.called))
                or any(n == "loss" or n.endswith("_loss") for n in self.names)):
            found.append("fact:graph-source")
        return found

    def _model_classes(self) -> set[int]:
        """The classes that surely are model code: they define ``forward``, or a base named
        by a class of this file that is (every class of that name, as the analysis follows
        a local base)."""
        found = set(self.forward_classes)
        grew = True
        while grew:
            grew = False
            for klass, bases in self.class_bases.items():
                if klass not in found and any(
                        name in self.classes_named
                        and any(c in found for c in self.classes_named[name])
                        for name in bases):
                    found.add(klass)
                    grew = True
        return found


def _starts_graph(callee: str) -> bool:
    """Can a call of this (last) name return a value with an autograd graph of its own
    making, as :class:`~memlint.analysis.graph.GraphAnalysis` reads calls? A module's forward
    or a loss, by name (``model(x)``, ``m.forward(x)``, ``criterion(p, y)``,
    ``F.cross_entropy``, ``nn.MSELoss()`` whose instance is then called), or a backward pass
    (it marks the names it consumes as carrying a graph)."""
    return (callee in ("forward", "backward", "manual_backward") or names_a_loss(callee)
            or callee in FUNCTIONAL_LOSSES or forward_by_name(callee))


def _leaves_location(call: ast.Call) -> bool:
    """No ``map_location`` given: neither by keyword, nor second positional, nor maybe in
    ``*args``/``**kwargs`` (as MEM014 reads a ``torch.load`` call)."""
    return len(call.args) < 2 and not any(type(a) is ast.Starred for a in call.args) and all(
        k.arg is not None and k.arg != "map_location" for k in call.keywords)


def _steps_optimizer(receiver: ast.expr) -> bool:
    """Is ``receiver.step(...)`` an optimizer or scaler step by the receiver's last name?"""
    while type(receiver) is ast.Subscript:
        receiver = receiver.value
    if type(receiver) is ast.Attribute:
        last = receiver.attr
    elif type(receiver) is ast.Name:
        last = receiver.id
    else:
        return False
    return bool(OPTIMIZER_NAME.search(last) or SCALER_NAME.search(last))


def _dotted(node: ast.expr) -> str | None:
    """``h`` or ``self.h``: a plain name or one attribute of one."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute and type(node.value) is ast.Name:
        return f"{node.value.id}.{node.attr}"
    return None


FOREIGN_FRAMEWORK = "fact:foreign-framework"

# The methods a device copy is called as (``x.to(d)``, ``x.cuda()``, ``x.type(torch.cuda.T)``).
_COPY_METHODS = frozenset({"to", "cuda", "type"})
COPY_CALL = "fact:copy-call"


def copies_in_code(facts: frozenset[str]) -> bool:
    """Does the code call a device copy itself (``fact:copy-call``)? MEM003 reports at such
    a call, or at the call of a copy helper that the project model found in another module:
    in a file without one, only the project's helpers can make a finding (the runner asks
    after the model)."""
    return COPY_CALL in facts


def gated(rules: Iterable[G], facts: frozenset[str]) -> list[G]:
    """The rules whose gate the code passes (a rule without a gate always does): one token
    of ``code_gate`` and one of each ``code_requires`` group; none in another framework's
    code (``fact:foreign-framework``)."""
    if FOREIGN_FRAMEWORK in facts:
        return []
    return [r for r in rules
            if (not r.code_gate or any(t in facts for t in r.code_gate))
            and all(any(t in facts for t in group) for group in r.code_requires)]

"""One module's summary: the few facts about its functions and classes that other files need.

Built with the standard library's ``ast`` (several times faster than libcst, and no libcst
import in the parent process), from the file's content alone, so it is cached by content
hash. Names are kept as written; the project model resolves them once every module of the
project is summarised (a decorator here may be a factory defined in another file).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from memlint.astwalk import dotted, fields_of, walk
from memlint.gates import draws_batches, may_move
from memlint.prefilter import search
from memlint.vocabulary import (
    COPYING_CONSTRUCTORS,
    DETACHED_ATTRIBUTES,
    DETACHING_METHODS,
    EVAL_FUNCTION,
    EVAL_STEP_DEF,
    FRAMEWORK_HOOK,
    HOST_BUILTINS,
    LEGACY_TENSOR_TYPES,
    LOADER_NAME,
    MUTATORS,
    SAME_GRAPH_METHODS,
    TORCH_FACTORIES,
    grad_switch,
    host_annotation,
    returns_indices,
)

SCHEMA = 21

# A file that no rule applies to is summarised only when it may define what other modules ask
# about: a grad-switching factory or wrapper, an ExitStack switch, a caller that switches a
# model to eval, or a framework's evaluation hook, which runs what it calls without grad
# (Lightning's ``predict_step`` calling ``self.predict``); or, with both a ``__call__`` and a
# ``.detach()``, a loss class returning detached parts. Summarising every file of a large
# library instead would cost an ``ast`` parse each (transformers: 1,085 files against 54).
_PROJECT_FACTS = (
    rb"return[^\n]*(?:no_grad|inference_mode|set_grad_enabled)"
    rb"|(?:no_grad|inference_mode|set_grad_enabled)\([^\n]*:\s*\n\s+return"
    rb"|enter_context\(|\.eval\(\)|" + EVAL_STEP_DEF
)
_COPIES = (b".to(", b".cuda(")
_CALLABLE_CLASS = b"def __call__"
_DETACHES = b".detach()"
_LOOP = (ast.For, ast.AsyncFor, ast.While)
_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef)
# Nested scopes: their returns are not the function's own.
_FUNCTION_AND_CLASS: frozenset[type[ast.AST]] = frozenset(
    {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_DETACHING_BUILTINS = HOST_BUILTINS | {"abs"}
# Methods that put their arguments into the container they are called on.
_ADDING_METHODS = MUTATORS | {"update", "setdefault", "extendleft"}
# Containers that start empty when called without arguments (``defaultdict(list)`` too).
_EMPTY_CONTAINERS = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict", "deque"})
_ELEMENT_TYPES = frozenset({"list", "dict", "set", "int", "float"})


@dataclass(frozen=True)
class Switch:
    """An expression that may set the grad mode (``torch.no_grad()``, a project factory)."""

    name: str  # dotted, as written
    called: bool
    has_args: bool = False
    flag: bool | None = None  # the first argument, when it is a literal True/False


@dataclass(frozen=True)
class Site:
    """A call written as a dotted name, with what the project model needs about its place."""

    callee: str
    switches: tuple[Switch, ...] = ()  # enclosing ``with`` items / enter_context, outermost first
    after_eval: bool = False  # a ``.eval()`` ran before it on the way here
    discarded: bool = False  # an expression statement: the result is not used
    in_backward_loop: bool = False  # inside a loop whose body calls ``backward()``
    passed: tuple[tuple[str, str], ...] = ()  # (position or keyword, dotted argument)
    # For a call of one of the object's own methods (``self.training_step(batch)``): the
    # positions or keywords (as in ``passed``) given the batch of a loop around it over
    # something named like a loader, unchanged (the loop does not rebind it first).
    batch_args: tuple[str, ...] = ()
    # For such a call: the positions or keywords given a loader itself (``self.predict_batches(
    # loader)``, a name bound from ``DataLoader(...)`` or a loader-named factory), which the
    # method (maybe a subclass's override) loops over.
    loader_args: tuple[str, ...] = ()
    # For a call given a batch: what the loop draws it from, when that is the object's own
    # (``self.train_loader``), or what one of its methods returned (``self.training_prepare()``
    # for ``loader, net = self.training_prepare(X)``); "" when neither.
    batch_source: str = ""
    # In a module-level function named for evaluation (``predict_pdf``): a function that only
    # such sites call is evaluation code too (:meth:`ProjectModel.eval_called`).
    in_evaluation: bool = False


@dataclass(frozen=True)
class Returned:
    """One ``return`` of a function.

    ``kind``: "switch" (returns what may be a grad switch), "apply" (returns a switch
    applied to a parameter: ``torch.no_grad()(fn)``), "param" (a parameter unchanged),
    "inner" (a function defined inside), or "value". ``detached`` holds, per element of a
    returned tuple (one element otherwise), whether it can carry no autograd graph;
    ``under`` the grad switches around the ``return``.
    """

    kind: str
    switches: tuple[Switch, ...] = ()
    name: str = ""
    detached: tuple[bool, ...] = ()
    under: tuple[Switch, ...] = ()


@dataclass(frozen=True)
class Function:
    qualname: str  # "f", "Cls.method", "outer.inner"
    params: tuple[str, ...]
    decorators: tuple[Switch, ...] = ()
    sites: tuple[Site, ...] = ()
    # Calls of a parameter of this function or of an enclosing one: (parameter, switches).
    param_calls: tuple[tuple[str, tuple[Switch, ...]], ...] = ()
    returns: tuple[Returned, ...] = ()
    # Ends without a return on some path (or yields): returns None or a generator.
    falls_through: bool = True
    # Clears gradients itself: ``opt.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``.
    clears_grad: bool = False
    # A generator handing on the items of this parameter unchanged (``yield from loader``).
    yields_param: str = ""
    # Parameters whose tensors it copies to a device without ``non_blocking``
    # (``to_device(batch, device)``), itself or by calling itself on their parts.
    moves_params: tuple[str, ...] = ()
    # The parameter, False or None by default, that its copies take for ``non_blocking``
    # (``def cuda(x, available=True, non_blocking=False)``): they block unless a caller
    # passes it.
    nonblocking_flag: str = ""
    # Every ``return`` hands on a parameter's data as it is or cast on the host (``return
    # x.float()``, ``return batch["image"]``), and nothing is moved: a method that keeps a
    # batch a host batch (``self.convert_tensor_type(data["image"])``).
    host_cast: bool = False
    # A ``@contextmanager``: the ``with`` switches around each of its ``yield``s (outermost
    # first), which set the grad mode of the block that enters it (``with torch.no_grad():
    # yield``: MONAI's ``eval_mode(net)``).
    entered: tuple[tuple[Switch, ...], ...] = ()


@dataclass(frozen=True)
class Class:
    qualname: str
    bases: tuple[str, ...]
    # ``self.attr = Ctor(...)``: the attribute and the dotted constructor, when only one.
    attributes: tuple[tuple[str, str], ...] = ()
    methods: tuple[str, ...] = ()
    # ``self.train_loader, self.net = self.training_prepare(X)``: (attribute, method) for each
    # attribute its methods bind from what one of the object's own methods returns.
    made_by: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Import:
    """``local`` is bound to ``target``; ``level`` > 0 for a relative import."""

    local: str
    target: str
    level: int = 0


@dataclass(frozen=True)
class ModuleSummary:
    imports: tuple[Import, ...] = ()
    functions: tuple[Function, ...] = ()
    classes: tuple[Class, ...] = ()
    sites: tuple[Site, ...] = ()  # module-level calls (scripts, ``if __name__ == "__main__"``)
    defined: tuple[str, ...] = ()  # top-level names bound by def/class
    # Methods called on what no dotted name holds (``self.models["pi"].loss(x)``, ``f().m()``)
    method_calls: tuple[str, ...] = ()

    def to_json(self) -> Any:
        return _encode(self)

    @classmethod
    def from_json(cls, data: Any) -> ModuleSummary:
        summary = _decode(cls, data)
        assert isinstance(summary, ModuleSummary)
        return summary


# ---------------------------------------------------------------- JSON, compactly

_TYPES: dict[str, type] = {
    t.__name__: t for t in (Switch, Site, Returned, Function, Class, Import, ModuleSummary)
}


def _encode(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return [_encode(getattr(value, name)) for name in value.__dataclass_fields__]
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(kind: Any, data: Any) -> Any:
    """Rebuild ``kind`` (a dataclass or a ``tuple[...]`` annotation string) from lists."""
    return _decoder(kind)(data)


Decoder = Callable[[Any], Any]


@cache
def _decoder(kind: Any) -> Decoder:
    """A decoder for one type, built once: a store holds thousands of summaries, and
    re-reading the annotations for each value would cost more than the JSON parse."""
    if isinstance(kind, type) and hasattr(kind, "__dataclass_fields__"):
        fields = list(kind.__dataclass_fields__.values())
        decoders = [_decoder(f.type) for f in fields]
        name = kind.__name__

        def build(data: Any) -> Any:
            if not isinstance(data, list) or len(data) != len(decoders):
                raise ValueError(f"bad {name}")
            return kind(*[d(v) for d, v in zip(decoders, data, strict=True)])
        return build
    text = str(kind).replace(" ", "")
    if text.startswith("tuple[") and text.endswith(",...]"):
        inner = _decoder(text[len("tuple["):-len(",...]")])

        def many(data: Any) -> Any:
            if not isinstance(data, list):
                raise ValueError("bad tuple")
            return tuple([inner(v) for v in data])
        return many
    if text.startswith("tuple[") and text.endswith("]"):
        parts = [_decoder(p) for p in _split_top(text[len("tuple["):-1])]

        def fixed(data: Any) -> Any:
            if not isinstance(data, list) or len(data) != len(parts):
                raise ValueError("bad pair")
            return tuple([d(v) for d, v in zip(parts, data, strict=True)])
        return fixed
    if text in _TYPES:
        return _decoder(_TYPES[text])
    if text in ("str", "int", "bool", "bool|None"):
        def scalar(data: Any) -> Any:
            if not isinstance(data, (str, int, bool, type(None))):
                raise ValueError(f"unexpected {text}")
            return data
        return scalar
    raise ValueError(f"unexpected {kind}")


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


# ---------------------------------------------------------------- building

def _literal_flag(node: ast.expr) -> bool | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


def as_switches(node: ast.expr) -> tuple[Switch, ...]:
    """The switch candidates an expression names: ``torch.no_grad()``, ``f``,
    ``(torch.inference_mode if new else torch.no_grad)()``. Empty when not switch-shaped."""
    called = isinstance(node, ast.Call)
    target = node.func if isinstance(node, ast.Call) else node
    has_args = isinstance(node, ast.Call) and bool(node.args or node.keywords)
    flag = None
    if isinstance(node, ast.Call):
        first = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg in ("mode", "enabled")), None)
        flag = None if first is None else _literal_flag(first)
    options = [target.body, target.orelse] if isinstance(target, ast.IfExp) else [target]
    out = []
    for option in options:
        name = dotted(option)
        if name is None:
            return ()
        out.append(Switch(name, called, has_args, flag))
    return tuple(out)


def _is_eval_switch(call: ast.Call) -> bool:
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr == "eval":
        return not call.args and not call.keywords
    if call.func.attr == "train" and len(call.args) == 1:
        return _literal_flag(call.args[0]) is False
    return False


def _is_train_switch(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "train" and not (
        _is_eval_switch(call))


def _calls_backward(nodes: Sequence[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
        and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id)
        in ("backward", "manual_backward")
        for stmt in nodes for n in walk(stmt)
    )


def _params(args: ast.arguments) -> tuple[str, ...]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg is not None:
        every.append(args.vararg)
    if args.kwarg is not None:
        every.append(args.kwarg)
    return tuple(a.arg for a in every)


def _number_params(args: ast.arguments) -> frozenset[str]:
    """Parameters that hold Python numbers: annotated so (``beta: float``) or given a number
    as their default (``beta=1.0``)."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = [*zip(positional, defaults, strict=True),
             *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    return frozenset(
        arg.arg for arg, default in pairs
        if (arg.annotation is not None and host_annotation(ast.unparse(arg.annotation)))
        or (isinstance(default, ast.Constant) and type(default.value) in (int, float)))


def _integer(node: ast.expr) -> int | None:
    """The value of an integer literal (``1``, ``-1``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return None if inner is None else -inner
    return None


def _returns_indices(node: ast.expr) -> bool:
    """A reduction call returning (values, indices): ``torch.max(out, 1)``, ``out.topk(5)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    function = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
    at = 1 if function else 0  # `torch.max(x, 1)`, `x.max(1)`
    dim_given = any(k.arg == "dim" for k in node.keywords) or (
        len(node.args) > at and _integer(node.args[at]) is not None)
    return returns_indices(node.func.attr, dim_given)


# Methods whose arguments only lend a dtype or a device, never their graph.
_PLACING_METHODS = frozenset({"to", "type", "type_as", "cuda", "cpu"})


def is_detached(node: ast.expr, detached_names: frozenset[str] = frozenset()) -> bool:
    """Can ``node`` carry no autograd graph, whatever its inputs?"""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in detached_names
    if isinstance(node, (ast.JoinedStr, ast.Compare, ast.Lambda)):
        return True
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Not) or is_detached(node.operand, detached_names)
    if isinstance(node, ast.Subscript):
        if _integer(node.slice) == 1 and _returns_indices(node.value):
            return True  # the indices of `out.max(1)[1]`
        return is_detached(node.value, detached_names)
    if isinstance(node, ast.Attribute):
        if node.attr == "indices" and _returns_indices(node.value):
            return True
        return node.attr in DETACHED_ATTRIBUTES
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "torch":
                # `torch.mean(w)`, `torch.tensor(mask, dtype=f)`: as the method would be.
                if func.attr in TORCH_FACTORIES:
                    return not any(k.arg == "requires_grad" for k in node.keywords)
                if func.attr in DETACHING_METHODS:
                    return True
                return func.attr in SAME_GRAPH_METHODS and all(
                    is_detached(a, detached_names) for a in node.args)
            if func.attr in DETACHING_METHODS:
                return func.attr not in ("append", "extend")
            # `correct.sum()`, `preds.double()[mask]`: a graph only if the receiver has one.
            return func.attr in SAME_GRAPH_METHODS and is_detached(
                func.value, detached_names) and (func.attr in _PLACING_METHODS or all(
                    is_detached(a, detached_names) for a in node.args))
        if isinstance(func, ast.Name):
            return func.id in _DETACHING_BUILTINS or _empty_container(node)
        if isinstance(func, ast.Call) and _parameter_free_module(func):
            # `nn.Softmax(dim=1)(energy)`: a module built on the spot that holds no weights
            return bool(node.args) and all(is_detached(a, detached_names) for a in node.args)
        return False
    if isinstance(node, ast.BinOp):
        return is_detached(node.left, detached_names) and is_detached(node.right, detached_names)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(is_detached(e, detached_names) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(is_detached(v, detached_names) for v in node.values)
    return False


# nn modules without parameters: built and called at once, they only apply their function.
_PARAMETER_FREE_MODULES = frozenset({
    "Softmax", "LogSoftmax", "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "SiLU",
    "Softplus", "Identity", "Flatten",
})


def _parameter_free_module(call: ast.Call) -> bool:
    """``nn.Softmax(dim=1)``, ``torch.nn.ReLU()``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    return name in _PARAMETER_FREE_MODULES


def _empty_container(call: ast.Call) -> bool:
    """``dict()``, ``OrderedDict()``, ``defaultdict(list)``: a new container holding nothing
    (what is put into it later is the caller's to judge)."""
    func = call.func
    return (type(func) is ast.Name and func.id in _EMPTY_CONTAINERS and not call.keywords
            and all(type(a) is ast.Name and a.id in _ELEMENT_TYPES for a in call.args))


@dataclass
class _Scope:
    """A function being summarised (the module itself for top-level code)."""

    qualname: str
    params: tuple[str, ...]
    outer_params: frozenset[str]
    inner: set[str] = field(default_factory=set)
    sites: list[Site] = field(default_factory=list)
    param_calls: list[tuple[str, tuple[Switch, ...]]] = field(default_factory=list)
    returns: list[tuple[ast.expr | None, tuple[Switch, ...]]] = field(default_factory=list)
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    # local name -> the object's method whose result (or part of it, unpacked) it was bound
    # from: ``loader, net = self.prepare(X)`` (``Site.batch_source``)
    made: dict[str, str] = field(default_factory=dict)
    # What else reaches a local name: values stored into it or added to it (``d[k] = v``,
    # ``out.append(v)``, ``total += v``); names bound by unpacking, a loop or ``as``.
    stored: dict[str, list[ast.expr]] = field(default_factory=dict)
    rebound: set[str] = field(default_factory=set)
    # ids of the values assigned to local names under a no-grad switch: no graph
    graphless: set[int] = field(default_factory=set)
    # parameters that hold Python numbers (``_number_params``)
    numbers: frozenset[str] = frozenset()
    yields: bool = False
    # the ``with`` switches around each ``yield`` (outermost first)
    yield_switches: list[tuple[Switch, ...]] = field(default_factory=list)
    clears_grad: bool = False
    # Might the scope (nested scopes included) hold what :func:`_data_facts` looks for: a
    # yield, a ``.to()``/``.cuda()`` call, or code the statement walk does not read (a
    # lambda's body, a loop target, a match guard)? Only then is the function walked again.
    data: bool = False


def _makes_loader(value: ast.expr) -> bool:
    """``DataLoader(ds)``, ``build_dataloader(...)``, ``self.get_val_loader()``."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")
    return bool(LOADER_NAME.search(name))


def _is_loader(arg: ast.expr, assigned: dict[str, list[ast.expr]]) -> bool:
    """An argument that is a loader: named like one, made by a loader factory, or a name
    the function bound from one (``dataset_iter = dataloader(data, 32)``)."""
    if isinstance(arg, ast.Name):
        return bool(LOADER_NAME.search(arg.id)) or any(
            _makes_loader(v) for v in assigned.get(arg.id, ()))
    if isinstance(arg, ast.Attribute):
        return bool(LOADER_NAME.search(arg.attr))
    return _makes_loader(arg)


def _names_loader(expr: ast.expr) -> bool:
    """Does the expression name a loader (``tqdm(self.test_loader)``, ``enumerate(dl)``)?"""
    return any((isinstance(n, ast.Name) and LOADER_NAME.search(n.id))
               or (isinstance(n, ast.Attribute) and LOADER_NAME.search(n.attr))
               for n in walk(expr))


def _loader_batch_names(loop: ast.stmt, assigned: dict[str, list[ast.expr]],
                        ) -> frozenset[str]:
    """The names a ``for`` loop over something named like a loader, or bound from one before
    it (``it = tqdm(self.test_loader) if verbose else self.test_loader``), or whose header
    says it draws batches (``for batch_idx, batch in enumerate(data)``), binds to each batch
    (``for x, y in enumerate(train_loader)``), less those its body rebinds to something
    else: a batch moved before it is handed on (``batch = batch.to(device)``), or a name
    bound to other data. A batch rebound from itself on the host (``batch =
    postprocess(batch)``) is still the loader's batch."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return frozenset()
    if not _names_loader(loop.iter) and not draws_batches(loop) and not any(
            _names_loader(value) for n in walk(loop.iter) if isinstance(n, ast.Name)
            for value in assigned.get(n.id, ())):
        return frozenset()
    targets = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
    for node in walk(loop):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            kept = _host_rebinding(node, targets)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                targets -= {n.id for n in walk(target) if isinstance(n, ast.Name)} - kept
    return frozenset(targets)


def _own_method_called(value: ast.expr) -> str:
    """``self.training_prepare(X)`` -> ``training_prepare``; "" for any other value."""
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "self"):
        return value.func.attr
    return ""


def _unpacked(target: ast.expr) -> list[ast.expr]:
    """The targets an assignment binds: ``a, (b, c)`` -> a, b, c."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _unpacked(element)]
    if isinstance(target, ast.Starred):
        return _unpacked(target.value)
    return [target]


def _batch_source(loop: ast.For | ast.AsyncFor, assigned: dict[str, list[ast.expr]],
                  made: dict[str, str]) -> str:
    """Where a loader loop draws its batches from, when the object holds or makes it:
    ``self.train_loader`` (also under a wrapper, or through a name bound from it first:
    ``it = tqdm(self.test_loader)``), or ``self.prepare()`` for a name bound from what one
    of the object's methods returns (``loader, net = self.prepare(X)``); "" otherwise."""
    names = [n.id for n in walk(loop.iter) if isinstance(n, ast.Name)]
    for name in names:
        if name in made:
            return f"self.{made[name]}()"
    values: list[ast.expr] = [loop.iter]
    values += [v for name in names for v in assigned.get(name, ())]
    for value in values:
        maker = _own_method_called(value)
        if maker:
            return f"self.{maker}()"
        for node in walk(value):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "self" and LOADER_NAME.search(node.attr)):
                return f"self.{node.attr}"
    return ""


def _host_rebinding(node: ast.Assign | ast.AugAssign | ast.AnnAssign,
                    batch: set[str]) -> set[str]:
    """The batch names an assignment rebinds from the batch itself without copying it
    (``batch = postprocess(batch)``): a plain name bound from a value that reads it and
    holds no ``.to()``/``.cuda()`` call."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(
            node.targets[0], ast.Name) or node.targets[0].id not in batch:
        return set()
    name = node.targets[0].id
    read = False
    for n in walk(node.value):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
                n.func.attr in _COPY_METHODS):
            return set()
        read = read or (isinstance(n, ast.Name) and n.id == name)
    return {name} if read else set()


class _Builder:
    def __init__(self) -> None:
        self.imports: list[Import] = []
        self.functions: list[Function] = []
        self.classes: list[Class] = []
        self.defined: list[str] = []
        self.method_calls: set[str] = set()
        # `@to_cuda.register(torch.Tensor) def _(data): ...`: module-level implementations
        # registered on a singledispatch function, by that function's name.
        self.registered: dict[str, list[str]] = {}
        # class qualname -> attribute -> the constructors assigned to ``self.attr``
        self._attributes: dict[str, dict[str, set[str]]] = {}
        # The batch names of the loader loops around the statement being read, in its function,
        # and where each loop draws them from (``Site.batch_source``).
        self._batches: list[frozenset[str]] = []
        self._sources: list[str] = []
        # class qualname -> (attribute, method): ``self.attr = self.method(...)`` (``made_by``)
        self._made_by: dict[str, set[tuple[str, str]]] = {}

    # -- statements, in order, carrying the with-contexts, eval state and loops around them

    def block(self, body: Sequence[ast.stmt], scope: _Scope, switches: tuple[Switch, ...],
              after_eval: bool, loop_backward: bool, prefix: str, class_stack: list[str]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if _is_eval_switch(call):
                    after_eval = True
                elif _is_train_switch(call):
                    after_eval = False
                elif (isinstance(call.func, ast.Attribute) and call.func.attr == "enter_context"
                      and len(call.args) == 1):
                    # ``stack.enter_context(torch.no_grad())``: on for the rest of the block.
                    entered = as_switches(call.args[0])
                    self.expressions([call], scope, switches, after_eval, loop_backward, stmt)
                    switches = switches + entered
                    continue
            self.statement(stmt, scope, switches, after_eval, loop_backward, prefix, class_stack)

    def statement(self, stmt: ast.stmt, scope: _Scope, switches: tuple[Switch, ...],
                  after_eval: bool, loop_backward: bool, prefix: str,
                  class_stack: list[str]) -> None:
        if isinstance(stmt, _FUNCTION):
            self.function(stmt, scope, prefix, class_stack)
            return
        if isinstance(stmt, ast.ClassDef):
            self.klass(stmt, scope, prefix, class_stack)
            return
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                self.imports.append(Import(local, alias.name if alias.asname else local))
            return
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                base = stmt.module or ""
                if alias.name == "*":
                    # `from .utils import *`: the project model binds the module's names.
                    self.imports.append(Import("*", base, stmt.level))
                    continue
                self.imports.append(Import(alias.asname or alias.name,
                                           f"{base}.{alias.name}" if base else alias.name,
                                           stmt.level))
            return
        if type(stmt) in _UNREAD and not scope.data and _holds_code(_unread_parts(stmt)):
            scope.data = True
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            inner = switches
            for item in stmt.items:
                if item.optional_vars is not None:
                    scope.rebound.update(_bound_names(item.optional_vars))
                self.expressions([item.context_expr], scope, inner, after_eval, loop_backward,
                                 stmt)
                inner = inner + as_switches(item.context_expr)
            self.block(stmt.body, scope, inner, after_eval, loop_backward, prefix, class_stack)
            return
        if isinstance(stmt, _LOOP):
            header = [stmt.iter] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [stmt.test]
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                scope.rebound.update(_bound_names(stmt.target))
            self.expressions(header, scope, switches, after_eval, loop_backward, stmt)
            backward = loop_backward or _calls_backward(stmt.body)
            self._batches.append(_loader_batch_names(stmt, scope.assigned))
            self._sources.append(
                _batch_source(stmt, scope.assigned, scope.made)
                if self._batches[-1] and not isinstance(stmt, ast.While) else "")
            self.block(stmt.body, scope, switches, after_eval, backward, prefix, class_stack)
            self._batches.pop()
            self._sources.pop()
            self.block(stmt.orelse, scope, switches, after_eval, loop_backward, prefix,
                       class_stack)
            return
        if isinstance(stmt, ast.If):
            self.expressions([stmt.test], scope, switches, after_eval, loop_backward, stmt)
            self.block(stmt.body, scope, switches, after_eval, loop_backward, prefix, class_stack)
            self.block(stmt.orelse, scope, switches, after_eval, loop_backward, prefix,
                       class_stack)
            return
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse,  # type: ignore[attr-defined]
                         stmt.finalbody):  # type: ignore[attr-defined]
                self.block(part, scope, switches, after_eval, loop_backward, prefix, class_stack)
            return
        if isinstance(stmt, ast.Match):
            self.expressions([stmt.subject], scope, switches, after_eval, loop_backward, stmt)
            for case in stmt.cases:
                self.block(case.body, scope, switches, after_eval, loop_backward, prefix,
                           class_stack)
            return
        if isinstance(stmt, ast.Return):
            scope.returns.append((stmt.value, switches))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and self._no_grad(switches):
            scope.graphless.add(id(stmt.value))
        if isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in stmt.targets):
                scope.clears_grad = True
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    scope.assigned.setdefault(target.id, []).append(stmt.value)
                else:
                    _record_store(scope, target, stmt.value)
                self._self_attribute(target, stmt.value, class_stack)
            maker = _own_method_called(stmt.value)
            if maker and class_stack:
                # `self.train_loader, self.net = self.training_prepare(X)`
                bound = [t for target in stmt.targets for t in _unpacked(target)]
                self._made_by.setdefault(class_stack[-1], set()).update(
                    (t.attr, maker) for t in bound
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self")
                scope.made.update((t.id, maker) for t in bound if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            if isinstance(stmt.target, ast.Name):
                scope.assigned.setdefault(stmt.target.id, []).append(stmt.value)
            else:
                _record_store(scope, stmt.target, stmt.value)
            self._self_attribute(stmt.target, stmt.value, class_stack)
        elif isinstance(stmt, ast.AugAssign):
            _record_store(scope, stmt.target, stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            _record_mutation(scope, stmt.value)
        self.expressions([stmt], scope, switches, after_eval, loop_backward, stmt)

    def _self_attribute(self, target: ast.expr, value: ast.expr, class_stack: list[str]) -> None:
        if not class_stack or not isinstance(target, ast.Attribute):
            return
        if not (isinstance(target.value, ast.Name) and target.value.id == "self"):
            return
        ctor = value
        # `Loss(...).to(device)`, `Net().cuda()`: the constructor under a method chain.
        while isinstance(ctor, ast.Call) and isinstance(ctor.func, ast.Attribute) and isinstance(
                ctor.func.value, ast.Call):
            ctor = ctor.func.value
        name = dotted(ctor.func) if isinstance(ctor, ast.Call) else None
        self._attributes.setdefault(class_stack[-1], {}).setdefault(target.attr, set()).add(
            name or "?")

    # -- expressions: the calls in them

    def expressions(self, nodes: Sequence[ast.AST], scope: _Scope, switches: tuple[Switch, ...],
                    after_eval: bool, loop_backward: bool, stmt: ast.stmt) -> None:
        for node in nodes:
            for sub in _walk_expression(node):
                if isinstance(sub, (ast.Yield, ast.YieldFrom)):
                    scope.yields = True
                    scope.data = True
                    scope.yield_switches.append(switches)
                elif type(sub) is ast.Lambda:
                    scope.data = True
                if not isinstance(sub, ast.Call):
                    continue
                if type(sub.func) is ast.Attribute and sub.func.attr in _COPY_METHODS:
                    scope.data = True
                if _clears_grad(sub):
                    scope.clears_grad = True
                name = dotted(sub.func)
                if name is None:
                    if type(sub.func) is ast.Attribute:
                        self.method_calls.add(sub.func.attr)
                    continue
                if isinstance(sub.func, ast.Name) and (
                        sub.func.id in scope.params or sub.func.id in scope.outer_params):
                    scope.param_calls.append((sub.func.id, switches))
                passed = tuple(
                    (str(i), d) for i, a in enumerate(sub.args) if (d := dotted(a)) is not None
                ) + tuple(
                    (k.arg, d) for k in sub.keywords
                    if k.arg is not None and (d := dotted(k.value)) is not None
                )
                discarded = isinstance(stmt, ast.Expr) and stmt.value is sub
                batch_args: tuple[str, ...] = ()
                loader_args: tuple[str, ...] = ()
                source = ""
                if name.startswith("self."):
                    if any(self._batches):
                        batches = frozenset().union(*self._batches)
                        batch_args = tuple(k for k, d in passed if d in batches)
                        source = next((src for names, src in zip(
                            reversed(self._batches), reversed(self._sources), strict=True)
                            if names), "") if batch_args else ""
                    loader_args = tuple(
                        k for k, a in [*((str(i), a) for i, a in enumerate(sub.args)),
                                       *((k.arg, k.value) for k in sub.keywords if k.arg)]
                        if _is_loader(a, scope.assigned))
                scope.sites.append(Site(name, switches, after_eval, discarded, loop_backward,
                                        passed, batch_args, loader_args, source))

    # -- definitions

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, parent: _Scope, prefix: str,
                 class_stack: list[str]) -> None:
        qualname = f"{prefix}{node.name}"
        if not prefix:
            self.defined.append(node.name)
        parent.inner.add(node.name)
        decorators: list[Switch] = []
        for deco in node.decorator_list:
            decorators.extend(as_switches(deco))
            base = _registered_on(deco)
            if base is not None and not prefix:
                self.registered.setdefault(base, []).append(qualname)
            self.expressions([deco], parent, (), False, False, node)
        outer = parent.outer_params | frozenset(parent.params) if parent.qualname else frozenset()
        scope = _Scope(qualname, _params(node.args), outer,
                       numbers=_number_params(node.args))
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.expressions([default], parent, (), False, False, node)
        stack = class_stack if class_stack and prefix.endswith(f"{class_stack[-1]}.") else []
        outer_batches, self._batches = self._batches, []  # a def in a loop runs when called
        self.block(node.body, scope, (), False, False, f"{qualname}.", stack)
        self._batches = outer_batches
        if _holds_code([*node.decorator_list, node.args, node.returns]):
            scope.data = True
        parent.data = parent.data or scope.data
        host = node.returns is not None and host_annotation(ast.unparse(node.returns))
        sites = tuple(scope.sites)
        host_cast = bool(prefix) and _host_cast(node, [value for value, _ in scope.returns])
        if not prefix and _evaluation_function(node.name):
            sites = tuple(replace(site, in_evaluation=True) for site in sites)
        self.functions.append(Function(
            qualname=qualname,
            params=scope.params,
            decorators=tuple(decorators),
            sites=sites,
            param_calls=tuple(scope.param_calls),
            returns=tuple(self._returned(value, under, scope, host)
                          for value, under in scope.returns),
            falls_through=scope.yields or not _always_returns(node.body),
            clears_grad=scope.clears_grad,
            host_cast=host_cast,
            entered=tuple(scope.yield_switches) if any(
                d.name.rpartition(".")[2] == "contextmanager" for d in decorators) else (),
            **(_data_facts(node, scope.params) if scope.data else {}),
        ))

    def klass(self, node: ast.ClassDef, parent: _Scope, prefix: str,
              class_stack: list[str]) -> None:
        qualname = f"{prefix}{node.name}"
        if not prefix:
            self.defined.append(node.name)
        bases = tuple(d for b in node.bases if (d := dotted(b)) is not None)
        self.expressions(node.bases, parent, (), False, False, node)
        if _holds_code([*node.decorator_list, *node.keywords]):
            parent.data = True
        methods = tuple(s.name for s in node.body if isinstance(s, _FUNCTION))
        self.block(node.body, parent, (), False, False, f"{qualname}.", [*class_stack, qualname])
        attributes = self._attributes.pop(qualname, {})
        self.classes.append(Class(
            qualname, bases,
            tuple(sorted((a, next(iter(c))) for a, c in attributes.items()
                         if len(c) == 1 and "?" not in c)),
            methods,
            tuple(sorted(self._made_by.pop(qualname, ()))),
        ))

    def _no_grad(self, switches: tuple[Switch, ...]) -> bool:
        """Does one of these switches turn autograd off (``torch.no_grad()``, imports of
        the module read so far resolved)?"""
        if not switches:
            return False
        names = {i.local: i.target for i in self.imports if not i.level}
        for switch in switches:
            head, dot, rest = switch.name.partition(".")
            name = names.get(head, head) + dot + rest
            if grad_switch(name, switch.called, switch.has_args, switch.flag) == "off":
                return True
        return False

    def _returned(self, value: ast.expr | None, under: tuple[Switch, ...],
                  scope: _Scope, host: bool = False) -> Returned:
        """``host``: the function's return annotation names host values only."""
        if value is None:
            return Returned("value", detached=(True,), under=under)
        if isinstance(value, ast.Name) and value.id in scope.params:
            return Returned("param", name=value.id, under=under)
        if isinstance(value, ast.Name) and value.id in scope.inner:
            return Returned("inner", name=value.id, under=under)
        if (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
                and isinstance(value.args[0], ast.Name) and value.args[0].id in scope.params):
            applied = as_switches(value.func)
            if applied and all(s.called for s in applied):
                return Returned("apply", applied, value.args[0].id, under=under)
        elements = value.elts if isinstance(value, ast.Tuple) else [value]
        if host or self._no_grad(under):
            detached = (True,) * len(elements)
        else:
            detached_names = _detached_names(scope)
            detached = tuple(is_detached(e, detached_names) for e in elements)
        switches = as_switches(value)
        kind = "switch" if switches else "value"
        return Returned(kind, switches, detached=detached, under=under)


_DETACHED_ROUNDS = 6  # a longer chain of names built on one another stays unknown


def _detached_names(scope: _Scope) -> frozenset[str]:
    """The local names every assignment of which is detached, and every value stored into or
    added to them, names already known detached included (``preds = out.max(1)[1]``, then
    ``correct = preds.eq(y).sum()``; ``log = {}`` then ``log[k] = v.item()``; ``e =
    critic(x).detach()`` then ``e = e.reshape(n, k)``), or assigned under a no-grad switch.
    A name also bound by unpacking, a loop, ``as`` or as a parameter is not known.

    Names are dropped from all candidates until the rest hold one another up: a local name
    read before its first assignment would not run, so a name that only ever holds values
    made from itself got its first value elsewhere, and that value is among those judged."""
    stored, graphless = scope.stored, scope.graphless
    # A number parameter the function never rebinds stays a number.
    numbers = frozenset(n for n in scope.numbers
                        if n not in scope.assigned and n not in scope.rebound)
    known = numbers | frozenset(name for name, values in scope.assigned.items()
                                if values and name not in scope.rebound
                                and name not in scope.params)
    for _ in range(_DETACHED_ROUNDS):
        found = numbers | frozenset(
            name for name in known - numbers
            if all(id(v) in graphless or is_detached(v, known) for v in scope.assigned[name])
            and all(is_detached(v, known) for v in stored.get(name, ())))
        if found == known:
            return known
        known = found
    return numbers


def _bound_names(target: ast.expr) -> Iterator[str]:
    """The names an unpacking, loop or ``as`` target binds (``a, (b, *c)``)."""
    return (n.id for n in walk(target) if type(n) is ast.Name)


def _record_store(scope: _Scope, target: ast.expr, value: ast.expr) -> None:
    """``d[k] = v``, ``obj.x = v``, ``total += v``: ``v`` reaches the target's root name;
    ``a, b = v``: the names are bound to what is not known here."""
    if isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
        scope.rebound.update(_bound_names(target))
        return
    root = _root_name(target)
    if root is not None:
        scope.stored.setdefault(root, []).append(value)


def _record_mutation(scope: _Scope, call: ast.Call) -> None:
    """``out.append(v)``, ``log.update(d)``, ``seen.add(v)``: the arguments reach ``out``."""
    func = call.func
    if type(func) is ast.Attribute and func.attr in _ADDING_METHODS and (
            type(func.value) is ast.Name):
        scope.stored.setdefault(func.value.id, []).extend(
            [*call.args, *(k.value for k in call.keywords)])


def _root_name(node: ast.expr) -> str | None:
    """``batch`` for ``batch``, ``batch.x``, ``batch["x"]``, ``batch[0].float()``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def _fresh_host_copy(value: ast.expr) -> bool:
    """``torch.tensor(x)``, ``torch.tensor(x).unsqueeze(1)``, ``[torch.tensor(m) for m in
    ms]``: a new host tensor (or a list of them) built from whatever data (see
    ``memlint.analysis.dataflow``, which judges the file's own loops the same way)."""
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        value = value.elt
    while (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
           and value.func.attr not in ("to", "cuda", "cpu")
           and isinstance(value.func.value, ast.Call)):
        value = value.func.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in COPYING_CONSTRUCTORS and value.args
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "torch"):
        return False
    return value.func.attr not in LEGACY_TENSOR_TYPES or len(value.args) == 1


def _wrapped_root(iterable: ast.expr) -> str | None:
    """The name under the first arguments of nested calls (``enumerate(tqdm(loader))``)."""
    while isinstance(iterable, ast.Call) and iterable.args:
        iterable = iterable.args[0]
    return iterable.id if isinstance(iterable, ast.Name) else None


def _unsteady(loop: ast.For) -> bool:
    """A loop that stops after its first item, or that waits for the device every time."""
    if loop.body and isinstance(loop.body[-1], ast.Break):
        return True
    return any(isinstance(sub, ast.Call) and (
        (isinstance(sub.func, ast.Attribute) and sub.func.attr == "synchronize")
        or (isinstance(sub.func, ast.Name) and sub.func.id == "synchronize"))
        for stmt in loop.body for sub in walk(stmt))


def _assigned_pairs(assign: ast.Assign) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs of an assignment: a tuple assigned a tuple of the same length
    element by element (``a, b = x[0], x[1]``), anything else whole."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for target in assign.targets:
        value = assign.value
        if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                and len(target.elts) == len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))):
            pairs.extend(zip(target.elts, value.elts, strict=True))
        else:
            pairs.append((target, value))
    return pairs


def _data_facts(node: ast.FunctionDef | ast.AsyncFunctionDef,
                params: tuple[str, ...]) -> dict[str, Any]:
    """What the function does with the data it is given: re-yields a parameter's items, or
    copies a parameter's tensors to a device without ``non_blocking``."""
    wanted = set(params) - {"self", "cls"}
    if not wanted:
        return {}
    # Names standing for a parameter's parts: loop and comprehension variables over it.
    parts: dict[str, str] = {p: p for p in wanted}
    yielded: set[str] = set()
    loops: dict[str, str] = {}  # loop variable -> parameter it iterates
    moved: set[str] = set()
    # Lines where a name is rebound to a fresh host tensor (`masks = torch.tensor(masks)`):
    # a later copy of it is no copy of the parameter's data (as in the file analysis).
    fresh: dict[str, list[int]] = {}
    iterated: dict[str, str] = {}  # comprehension variable -> the name it iterates
    # Parameters that default to False or None: `non_blocking=flag` copies block by default.
    off = _off_by_default(node.args)
    flags: set[str] = set()
    nodes = list(walk(node))
    for sub in nodes:
        if isinstance(sub, ast.Assign) and _fresh_host_copy(sub.value):
            for bound in sub.targets:
                if isinstance(bound, ast.Name):
                    fresh.setdefault(bound.id, []).append(sub.lineno)
        if isinstance(sub, ast.comprehension) and isinstance(sub.iter, ast.Name):
            for target in walk(sub.target):
                if isinstance(target, ast.Name):
                    iterated[target.id] = sub.iter.id
        if isinstance(sub, ast.Assign):
            # `inputs, targets = batch`, `images = batch["image"]`: parts of it too; and
            # `data, target = element[0], element[1]`, pair by pair.
            for bound, value in _assigned_pairs(sub):
                root = _root_name(value)
                if root in parts:
                    for name in walk(bound):
                        if isinstance(name, ast.Name):
                            parts[name.id] = parts[root]
        elif isinstance(sub, (ast.For, ast.comprehension)):
            root = _root_name(sub.iter)
            if root in parts and not (isinstance(sub, ast.For) and _unsteady(sub)):
                for target in walk(sub.target):
                    if isinstance(target, ast.Name):
                        parts[target.id] = parts[root]
                        if isinstance(sub, ast.For):
                            loops[target.id] = parts[root]
            elif isinstance(sub, ast.For) and root not in parts:
                # `for i, batch in enumerate(loader)`, `log_every(loader, 10)`: the batches of a
                # loader parameter, copied batch after batch unless the loop stops at once or
                # waits for the device anyway.
                wrapped = _wrapped_root(sub.iter)
                if wrapped in parts and not _unsteady(sub):
                    for target in walk(sub.target):
                        if isinstance(target, ast.Name):
                            parts[target.id] = parts[wrapped]
    for sub in nodes:
        if isinstance(sub, ast.YieldFrom) and isinstance(sub.value, ast.Name) and (
                sub.value.id in wanted):
            yielded.add(sub.value.id)
        elif isinstance(sub, ast.Yield) and isinstance(sub.value, ast.Name) and (
                sub.value.id in loops):
            yielded.add(loops[sub.value.id])
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if sub.func.attr not in ("to", "cuda") or any(k.arg is None for k in sub.keywords):
                continue
            given = next((k.value for k in sub.keywords if k.arg == "non_blocking"), None)
            if given is not None and not (isinstance(given, ast.Name) and given.id in off):
                continue  # non_blocking decided here, or by a parameter that defaults to True
            if sub.func.attr == "to" and not may_move(sub):
                continue  # no target, or a dtype cast (`gt.to(torch.float32)`)
            first = sub.args[0] if sub.args else None
            first = next((k.value for k in sub.keywords if k.arg == "device"), first)
            if isinstance(first, ast.Constant) and first.value == "cpu":
                continue  # `.to("cpu")`, `.to(device="cpu")`: a copy to the host
            root = _root_name(sub.func.value)
            if root in parts and not any(
                    line < sub.lineno for name in (root, iterated.get(root))
                    if name is not None for line in fresh.get(name, ())):
                moved.add(parts[root])
                flags.add(given.id if isinstance(given, ast.Name) else "")
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and (
                sub.func.id == node.name):
            # Recursion on a part (`to_device(v, device) for v in batch.values()`).
            for arg in sub.args[:1]:
                root = _root_name(arg)
                if root in parts:
                    moved.add(f"?{parts[root]}")
    recursive = {m[1:] for m in moved if m.startswith("?")}
    direct = {m for m in moved if not m.startswith("?")}
    facts: dict[str, Any] = {}
    if len(yielded) == 1:
        facts["yields_param"] = yielded.pop()
    if direct:
        # A recursive mover copies its parts: the first parameter moves when any call does.
        if recursive:
            direct |= recursive
        facts["moves_params"] = tuple(p for p in params if p in direct)
        if len(flags) == 1 and "" not in flags:  # every copy takes the one flag
            facts["nonblocking_flag"] = flags.pop()
    return facts


def _host_cast(node: ast.FunctionDef | ast.AsyncFunctionDef,
               returns: Sequence[ast.expr | None]) -> bool:
    """See ``Function.host_cast``: a method (its first parameter left out) whose every
    ``return`` (``returns``: those of its own body) is a parameter, a part of one, or a
    method called on either (``x.float()``, ``x.permute(0, 2, 1)``), undecorated, and that
    calls no ``.to()``/``.cuda()``. The returns decide most methods, without a walk."""
    args = [*node.args.posonlyargs, *node.args.args][1:]
    params = {a.arg for a in args}
    if not params or node.decorator_list or not returns or not all(
            value is not None and _root_name(value) in params for value in returns):
        return False
    return not any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                   and sub.func.attr in ("to", "cuda")
                   for sub in walk(node, stop=_FUNCTION_AND_CLASS))


def _off_by_default(args: ast.arguments) -> frozenset[str]:
    """The parameters whose default is ``False`` or ``None``."""
    positional = [*args.posonlyargs, *args.args]
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults,
                  strict=True),
             *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
               if d is not None)]
    return frozenset(a.arg for a, d in pairs
                     if isinstance(d, ast.Constant) and d.value in (False, None))


def _clears_grad(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "zero_grad":
        return True
    return func.attr in ("zero_", "detach_", "fill_") and isinstance(
        func.value, ast.Attribute) and func.value.attr == "grad"


_NESTED_SCOPES: frozenset[type[ast.AST]] = frozenset(
    {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})


_COPY_METHODS = frozenset({"to", "cuda"})
# Statements with parts the statement walk does not read as expressions.
_UNREAD: frozenset[type[ast.AST]] = frozenset(
    {ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Match, ast.Try,
     *([ast.TryStar] if hasattr(ast, "TryStar") else [])})


def _unread_parts(stmt: ast.stmt) -> list[ast.AST | None]:
    """The parts of a statement the statement walk does not read as expressions."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in stmt.items]
    if isinstance(stmt, ast.Match):
        return [part for case in stmt.cases for part in (case.pattern, case.guard)]
    handlers = getattr(stmt, "handlers", None)  # try, try*
    if handlers:
        return [handler.type for handler in handlers]
    return []


def _holds_code(parts: Sequence[ast.AST | None]) -> bool:
    """Is there a call, a yield or a lambda anywhere in these parts?"""
    return any(type(n) in _CODE_NODES for part in parts if part is not None
               for n in walk(part))


_CODE_NODES = frozenset({ast.Call, ast.Yield, ast.YieldFrom, ast.Lambda})


def _walk_expression(node: ast.AST) -> Iterator[ast.AST]:
    """The calls, yields and lambdas of an expression (or a simple statement), not entering
    nested scopes (a lambda is yielded, its body is not)."""
    return walk(node, _NESTED_SCOPES, _CODE_NODES)


def _always_returns(body: Sequence[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _always_returns(last.body)
    return False


def _registered_on(deco: ast.expr) -> str | None:
    """``@f.register`` / ``@f.register(T)`` -> ``f``."""
    if isinstance(deco, ast.Call):
        deco = deco.func
    if (isinstance(deco, ast.Attribute) and deco.attr == "register"
            and isinstance(deco.value, ast.Name)):
        return deco.value.id
    return None


def _with_registered_movers(functions: list[Function],
                            registered: dict[str, list[str]]) -> tuple[Function, ...]:
    """A singledispatch function moves its argument when an implementation registered on
    it moves its own (baal's ``to_cuda``: the base returns the data, ``@to_cuda.register(
    torch.Tensor)`` calls ``.cuda()``)."""
    if not registered:
        return tuple(functions)
    by_name = {f.qualname: f for f in functions}
    out = []
    for function in functions:
        impls = [by_name[q] for q in registered.get(function.qualname, ()) if q in by_name]
        if function.params and not function.moves_params and any(
                impl.params and impl.params[0] in impl.moves_params for impl in impls):
            function = replace(function, moves_params=function.params[:1])
        out.append(function)
    return tuple(out)


_DELEGATION_ROUNDS = 4


def _function_nodes(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of the module by qualname (``f``, ``Cls.method``, ``outer.inner``)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    todo: list[tuple[list[ast.stmt], str]] = [(tree.body, "")]
    while todo:
        body, prefix = todo.pop()
        for node in body:
            if isinstance(node, _FUNCTION):
                found.setdefault(prefix + node.name, node)
                todo.append((node.body, f"{prefix}{node.name}."))
            elif isinstance(node, ast.ClassDef):
                todo.append((node.body, f"{prefix}{node.name}."))
            else:  # `if TYPE_CHECKING:`, `try:` ... blocks add no name
                for field_name in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field_name, None)
                    if isinstance(inner, list):
                        stmts = [h for h in inner if isinstance(h, ast.stmt)]
                        for handler in inner:
                            if isinstance(handler, ast.ExceptHandler):
                                stmts.extend(handler.body)
                        todo.append((stmts, prefix))
    return found


def _delegating_calls(tree: ast.Module,
                      owners: dict[int, str]) -> dict[str, list[ast.Call]]:
    """Per function (``owners``: node id -> qualname), the calls in it, nested functions'
    included, that can hand a parameter on to a same-file function: one that names a plain
    name as its callee or as an argument, with no ``non_blocking=`` or ``**`` keyword.
    One walk of the module, instead of one per function and per round of
    :func:`_with_delegated_movers`."""
    found: dict[str, list[ast.Call]] = {name: [] for name in owners.values()}
    stack: list[tuple[ast.AST, tuple[str, ...]]] = [(tree, ())]
    pop, push = stack.pop, stack.append
    ast_type, call_t, name_t = ast.AST, ast.Call, ast.Name
    while stack:
        node, inside = pop()
        kind = type(node)
        if kind is call_t and inside and (
                type(node.func) is name_t  # type: ignore[attr-defined]  # an ast.Call
                or any(type(a) is name_t for a in node.args)  # type: ignore[attr-defined]
        ) and not any(k.arg == "non_blocking" or k.arg is None
                      for k in node.keywords):  # type: ignore[attr-defined]
            for qualname in inside:
                found[qualname].append(node)  # type: ignore[arg-type]  # an ast.Call
        owner = owners.get(id(node))
        if owner is not None:
            inside = (*inside, owner)
        for name in fields_of(kind):
            value = getattr(node, name)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast_type):
                        push((item, inside))
            elif isinstance(value, ast_type):
                push((value, inside))
    return found


def _with_delegated_movers(tree: ast.Module,
                           functions: Sequence[Function]) -> tuple[Function, ...]:
    """A function moves a parameter when it hands it to a same-file function that moves
    it (``prepare(batch)`` -> ``move_to_cuda(batch)``), or applies a same-file function that
    moves its argument to it (``apply_to_sample(_move_to_cuda, sample)``, ``map(to_gpu,
    batch)``: a callback copying each tensor of a nested batch)."""
    by_name = {f.qualname: f for f in functions}
    nodes = _function_nodes(tree)
    moved = {f.qualname: set(f.moves_params) for f in functions}
    calls = _delegating_calls(tree, {id(node): qualname for qualname, node in nodes.items()})

    def callee(name: str, scope: str) -> Function | None:
        # A function nested in this one (or in an enclosing one), else a top-level one.
        parts = scope.split(".")
        for cut in range(len(parts), -1, -1):
            found = by_name.get(".".join([*parts[:cut], name]))
            if found is not None:
                return found
        return None

    def moves_at(function: Function, index: int) -> bool:
        params = [p for p in function.params if p not in ("self", "cls")]
        return index < len(params) and params[index] in moved[function.qualname]

    for _ in range(_DELEGATION_ROUNDS):
        changed = False
        for qualname in nodes:
            function = by_name.get(qualname)
            if function is None:
                continue
            wanted = set(function.params) - {"self", "cls"} - moved[qualname]
            if not wanted:
                continue
            for sub in calls[qualname]:
                roots = [_root_name(arg) for arg in sub.args]
                if isinstance(sub.func, ast.Name):
                    target = callee(sub.func.id, qualname)
                    if target is not None and target.qualname != qualname:
                        for index, root in enumerate(roots):
                            if root in wanted and moves_at(target, index):
                                moved[qualname].add(root)
                                changed = True
                callbacks = [callee(arg.id, qualname) for arg in sub.args
                             if isinstance(arg, ast.Name)]
                if any(cb is not None and cb.qualname != qualname and moves_at(cb, 0)
                       for cb in callbacks):
                    for arg, root in zip(sub.args, roots, strict=True):
                        if root in wanted and not (
                                isinstance(arg, ast.Name) and callee(arg.id, qualname)):
                            moved[qualname].add(root)
                            changed = True
        if not changed:
            break
    return tuple(
        replace(f, moves_params=tuple(p for p in f.params if p in moved[f.qualname]))
        if moved[f.qualname] != set(f.moves_params) else f
        for f in functions
    )


def summarise(tree: ast.Module) -> ModuleSummary:
    builder = _Builder()
    top = _Scope("", (), frozenset())
    builder.block(tree.body, top, (), False, False, "", [])
    functions = _with_registered_movers(builder.functions, builder.registered)
    if any(f.moves_params for f in functions):
        functions = _with_delegated_movers(tree, functions)
    return ModuleSummary(
        imports=tuple(builder.imports),
        functions=functions,
        classes=tuple(builder.classes),
        sites=tuple(top.sites),
        defined=tuple(builder.defined),
        method_calls=tuple(sorted(builder.method_calls)),
    )


def needs_summary(source: bytes) -> bool:
    """May this file (which no rule applies to) hold facts that other modules need, whoever
    calls it (grad-mode factories, ``.eval()`` switches, a framework's evaluation hooks,
    detaching callables)?"""
    return search(_PROJECT_FACTS, source) or (_CALLABLE_CLASS in source and _DETACHES in source)


def _evaluation_function(name: str) -> bool:
    """A module-level function named for evaluation (``predict_pdf``, ``evaluate``), whose
    calls are ``in_evaluation``. Not the ``test*`` names (pytest's, in a test module) nor a
    framework's hooks (which run under no-grad)."""
    return (EVAL_FUNCTION.match(name) is not None and not name.lstrip("_").startswith("test")
            and FRAMEWORK_HOOK.search(name) is None)


def may_define_mover(source: bytes) -> bool:
    """May this file (which no rule applies to) define a blocking device-copy helper? Any
    file that copies may (``prepare(samples, cuda_enabled)`` is one too): it matters only to
    a module that calls into it, so it is summarised only then
    (:func:`memlint.project.model.build_views` asks), and a model library's modeling files,
    which all copy, are never read for it."""
    return any(c in source for c in _COPIES)


def defines_one_of(source: bytes, names: Collection[str]) -> bool:
    """Does this file's text define a function (or method) of one of these names? A copy
    helper that a module looks up elsewhere (``util.batch_to_device(batch)``) is one; a
    module named for a class or a constant it holds is not read for one."""
    return any(re.search(rb"def\s+" + re.escape(name.encode()) + rb"\s*[(\[]", source)
               for name in names if name.isidentifier())


def parse_source(source: bytes, filename: str = "<file>") -> ast.Module | None:
    """The stdlib tree of a file's bytes; None when it does not parse (MEM999 is the engine's).
    Python 3.12's parser warns about invalid escapes: the user's business, not ours to print."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def summary_of(tree: ast.Module) -> ModuleSummary | None:
    """The module's summary; None for a tree too deep to walk."""
    try:
        return summarise(tree)
    except RecursionError:
        return None


def summarise_source(source: bytes, filename: str = "<file>") -> ModuleSummary | None:
    """The summary of a file's bytes; None when it does not parse."""
    tree = parse_source(source, filename)
    return None if tree is None else summary_of(tree)

"""Where a loop's data comes from, and where a ``.to()`` sends it.

Two questions several rules share:

- Is this loop fed by a DataLoader, and does this expression hold (part of) its batch?
  Batches travel through unpacking (``x, y = batch``), indexing (``batch["input_ids"]``),
  method calls on the batch (``batch.items()``, ``x.float()``) and comprehensions
  (``{k: v.to(device) for k, v in batch.items()}``), but not through a model forward: the
  output of ``model(x)`` is a result, not input data.
- Where does ``t.to(...)`` / ``t.cuda()`` send a tensor? Only a move to an accelerator is a
  host-to-device copy; dtype casts, ``.to(other_tensor)`` and device-to-host copies are not.

:func:`classify_to_target` answers the second question from the call alone (plus the file's
imports); :class:`DataflowAnalysis` adds the file-wide facts (names bound only to the CPU,
DataLoader bindings) and caches per-loop answers so a rule can ask per call cheaply.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable, Iterator
from functools import cached_property

import libcst as cst

from memlint.analysis.imports import ImportTable, dotted_name
from memlint.analysis.tree import TreeIndex


class DeviceTarget(enum.Enum):
    """Where a ``.to()`` / ``.cuda()`` / ``.cpu()`` call sends its receiver."""

    # Plainly CUDA at the call: "cuda", "cuda:1", f"cuda:{rank}", torch.device("cuda"),
    # an integer device index, .cuda().
    CUDA = "cuda"
    # A device value whose kind is not known statically: `device`, `args.device`, `x.device`,
    # torch.device(name), "cuda" if available else "cpu". Usually an accelerator.
    ACCELERATOR = "accelerator"
    # The host: .cpu(), "cpu", torch.device("cpu"), a name only ever bound to the CPU.
    HOST = "host"
    # A named non-CUDA device ("mps", "xpu", "meta"): asynchronous copies differ there.
    OTHER_DEVICE = "other-device"
    # Not a device move: dtype casts, .to(other_tensor), memory_format, or nothing we can read.
    NOT_A_MOVE = "not-a-move"

    @property
    def to_accelerator(self) -> bool:
        """A host-to-device copy (to CUDA, or to a device variable that usually is CUDA)."""
        return self in (DeviceTarget.CUDA, DeviceTarget.ACCELERATOR)


TRANSFER_METHODS = frozenset({"to", "cuda", "cpu"})

# `device`, `dev`, `gpu`, `local_rank`, `self.device`, `args.gpu`, `train_device`, `device_id`.
_DEVICE_NAME = re.compile(
    r"^(?:device|dev|gpu|gpu_id|device_id|local_rank|rank|cuda_device|target_device)$"
    r"|_device$|_dev$|_gpu$",
    re.IGNORECASE,
)
_DTYPE_NAME = re.compile(r"dtype$|^(?:half|float|precision)$", re.IGNORECASE)
_TORCH_DTYPES = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8",
    "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})
_OTHER_DEVICES = ("mps", "xpu", "meta", "hpu", "xla", "npu", "ipu", "privateuseone")

# Calls that hand their first iterable's items through unchanged (for loader provenance).
_PASS_THROUGH = frozenset({"enumerate", "tqdm", "islice", "iter", "track"})
# Framework calls that return loaders whose batches arrive on the device already.
_PLACING_CALLS = ("prepare", "prepare_data_loader", "setup_dataloaders")
_LOADER_NAME = re.compile(r"(?<!down)(?<!up)loader|(?:^|_)dl(?:$|_)", re.IGNORECASE)


def _string_value(expr: cst.BaseExpression) -> str | None:
    """The text of a plain string literal, or the literal prefix of an f-string."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expr, cst.FormattedString):
        prefix = ""
        for part in expr.parts:
            if not isinstance(part, cst.FormattedStringText):
                break
            prefix += part.value
        return prefix
    if isinstance(expr, cst.ConcatenatedString):
        return _string_value(expr.left)
    return None


def _classify_device_string(text: str) -> DeviceTarget:
    low = text.strip().lower()
    if low.startswith("cuda"):
        return DeviceTarget.CUDA
    if low.startswith("cpu"):
        return DeviceTarget.HOST
    if low.startswith(_OTHER_DEVICES):
        return DeviceTarget.OTHER_DEVICE
    return DeviceTarget.NOT_A_MOVE


def _last_part(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def classify_device_expr(expr: cst.BaseExpression, imports: ImportTable) -> DeviceTarget:
    """What kind of device an expression names, judged from its spelling alone."""
    text = _string_value(expr)
    if text is not None:
        return _classify_device_string(text)
    if isinstance(expr, cst.Integer):
        return DeviceTarget.CUDA
    if isinstance(expr, cst.IfExp):
        kinds = {classify_device_expr(expr.body, imports),
                 classify_device_expr(expr.orelse, imports)}
        if len(kinds) == 1:
            return kinds.pop()
        if kinds & {DeviceTarget.CUDA, DeviceTarget.ACCELERATOR}:
            return DeviceTarget.ACCELERATOR
        return DeviceTarget.NOT_A_MOVE
    if isinstance(expr, cst.Call):
        qualified = imports.qualified_name(expr.func) or ""
        if qualified in ("torch.device", "device") and expr.args:
            inner = classify_device_expr(expr.args[0].value, imports)
            # torch.device(some_name) is a device even when the name does not look like one.
            return DeviceTarget.ACCELERATOR if inner is DeviceTarget.NOT_A_MOVE else inner
        if qualified.endswith(("current_device", "get_device")):
            return DeviceTarget.ACCELERATOR
        return DeviceTarget.NOT_A_MOVE
    if isinstance(expr, (cst.Name, cst.Attribute)):
        qualified = imports.qualified_name(expr) or ""
        last = _last_part(expr) or ""
        if qualified.startswith("torch.") and last in _TORCH_DTYPES:
            return DeviceTarget.NOT_A_MOVE
        if _DTYPE_NAME.search(last):
            return DeviceTarget.NOT_A_MOVE
        if _DEVICE_NAME.search(last):
            return DeviceTarget.ACCELERATOR
    return DeviceTarget.NOT_A_MOVE


def transfer_method(call: cst.Call) -> str | None:
    """``to`` / ``cuda`` / ``cpu`` for a tensor transfer method call, else None."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in TRANSFER_METHODS:
        return func.attr.value
    return None


def device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The expression a ``.to()`` / ``.cuda()`` call takes its device from, if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            return arg.value
    return None


def classify_to_target(call: cst.Call, imports: ImportTable) -> DeviceTarget:
    """Where ``call`` sends its receiver, from the call's own text.

    ``x.cuda(...)`` is CUDA and ``x.cpu()`` the host. For ``x.to(...)`` the device comes from
    the first positional argument or ``device=``; a call with only ``dtype=`` or
    ``memory_format=``, or with ``*args``, is no move we can read.
    """
    method = transfer_method(call)
    if method == "cuda":
        return DeviceTarget.CUDA
    if method == "cpu":
        return DeviceTarget.HOST
    if method != "to" or any(arg.star for arg in call.args):
        return DeviceTarget.NOT_A_MOVE
    target = device_argument(call)
    if target is None:
        return DeviceTarget.NOT_A_MOVE
    return classify_device_expr(target, imports)


def has_non_blocking(call: cst.Call) -> bool:
    """Does the transfer call pass ``non_blocking`` (by keyword, positionally or via ``**``)?

    Any value counts, a variable included: the author has thought about it.
    """
    positional = 0
    for arg in call.args:
        if arg.star:
            return True
        if arg.keyword is not None:
            if arg.keyword.value == "non_blocking":
                return True
            continue
        positional += 1
    method = transfer_method(call)
    # Tensor.cuda(device, non_blocking) and Tensor.to(device, dtype, non_blocking).
    return (method == "cuda" and positional >= 2) or (method == "to" and positional >= 3)


def names_in(target: cst.BaseExpression) -> Iterator[str]:
    """Dotted names bound by an assignment or loop target (``a, (b, self.c)``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from names_in(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from names_in(target.value)
    else:
        name = dotted_name(target)
        if name is not None:
            yield name


def _call_name(expr: cst.BaseExpression) -> str | None:
    return _last_part(expr.func) if isinstance(expr, cst.Call) else None


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_DATA_BUILDERS = frozenset({"tuple", "list", "dict", "map"})


class DataflowAnalysis:
    """File-wide data provenance, built lazily; every per-loop answer is cached."""

    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree
        self._loader_loop: dict[cst.For, bool] = {}
        self._batch_names: dict[cst.For, frozenset[str]] = {}

    # -- device targets -------------------------------------------------------------------

    @cached_property
    def host_device_names(self) -> frozenset[str]:
        """Dotted names every assignment in the file binds to the CPU (``device = "cpu"``)."""
        verdicts: dict[str, bool] = {}
        for node in self.tree.parents:
            value: cst.BaseExpression | None
            if isinstance(node, cst.Assign):
                value, targets = node.value, [t.target for t in node.targets]
            elif isinstance(node, cst.AnnAssign):
                value, targets = node.value, [node.target]
            elif isinstance(node, (cst.AugAssign, cst.For)):
                value, targets = None, [node.target]
            else:
                continue
            host = value is not None and (
                classify_device_expr(value, self.tree.imports) is DeviceTarget.HOST
            )
            for target in targets:
                for name in names_in(target):
                    verdicts[name] = verdicts.get(name, True) and host
        return frozenset(name for name, host in verdicts.items() if host)

    def device_target(self, call: cst.Call) -> DeviceTarget:
        """:func:`classify_to_target`, refined by the file: a device name only ever bound to
        the CPU (a CPU-only script) is the host."""
        kind = classify_to_target(call, self.tree.imports)
        if kind is DeviceTarget.ACCELERATOR:
            arg = device_argument(call)
            name = None if arg is None else dotted_name(arg)
            if name is not None and name in self.host_device_names:
                return DeviceTarget.HOST
        return kind

    # -- DataLoader provenance ------------------------------------------------------------

    def is_dataloader_call(self, call: cst.Call) -> bool:
        """``DataLoader(...)``, ``torch.utils.data.DataLoader(...)``, ``data.DataLoader(...)``."""
        name = _last_part(call.func)
        return name is not None and name.endswith("DataLoader")

    @cached_property
    def dataloader_calls(self) -> tuple[cst.Call, ...]:
        calls: list[cst.Call] = []
        for name, found in self.tree.calls_by_name.items():
            if name.endswith("DataLoader"):
                calls.extend(found)
        return tuple(calls)

    @cached_property
    def _loader_bound_names(self) -> frozenset[str]:
        """Names bound, anywhere in the file, to a DataLoader or to a wrapper of one."""
        return frozenset(self._loader_facts[0])

    @cached_property
    def _loader_facts(self) -> tuple[set[str], dict[str, str]]:
        """(names bound to a loader, ``progress -> train_loader`` for wrapper-bound names)."""
        bound: set[str] = set()
        wrapped: dict[str, str] = {}
        for call in self.dataloader_calls:
            bound.update(self.bindings(call))
        # `progress = tqdm(train_loader)`: a wrapper bound to a name before the loop.
        for wrapper in _PASS_THROUGH:
            for call in self.tree.calls_by_name.get(wrapper, ()):
                parent = self.tree.parent(call)
                if not isinstance(parent, cst.Assign) or not call.args:
                    continue
                inner = call.args[0].value
                if not self._is_loader_like(inner, follow_params=False, bound=bound):
                    continue
                inner_key = self._key_of(inner)
                for target in parent.targets:
                    for name in names_in(target.target):
                        bound.add(name)
                        if inner_key is not None:
                            wrapped[name] = inner_key
        return bound, wrapped

    def bindings(self, value: cst.BaseExpression) -> set[str]:
        """Keys under which ``value`` can be found later: assigned names, a dict or list that
        holds it, or ``fn()`` when ``fn`` returns it (and the names bound from ``fn(...)``)."""
        keys: set[str] = set()
        node: cst.CSTNode = value
        parent = self.tree.parent(node)
        while isinstance(parent, (cst.DictElement, cst.Element, cst.Dict, cst.List, cst.Tuple,
                                  cst.DictComp, cst.ListComp, cst.CompFor)):
            if isinstance(parent, cst.CompFor):
                return keys
            node = parent
            parent = self.tree.parent(node)
        if isinstance(parent, cst.Assign):
            for target in parent.targets:
                keys.update(names_in(target.target))
        elif isinstance(parent, cst.AnnAssign):
            keys.update(names_in(parent.target))
        elif isinstance(parent, cst.Return):
            function = self.tree.enclosing_function(parent)
            if function is not None:
                fn = function.name.value
                keys.add(f"{fn}()")
                for call in self.tree.calls_by_name.get(fn, ()):
                    call_parent = self.tree.parent(call)
                    if isinstance(call_parent, cst.Assign):
                        for target in call_parent.targets:
                            keys.update(names_in(target.target))
        return keys

    def loader_source(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The loader-like expression a loop iterable unwraps to, if it plainly is one.

        ``enumerate(tqdm(train_loader))`` -> ``train_loader``; ``zip(a_loader, b_loader)`` ->
        the first loader; ``dataloaders[phase]`` -> itself; ``DataLoader(ds)`` -> itself.
        """
        for source in self._sources(expr):
            if self._is_loader_like(source):
                return source
        return None

    def _sources(self, expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
        if isinstance(expr, cst.Call):
            name = _call_name(expr)
            if name in _PASS_THROUGH and expr.args:
                yield from self._sources(expr.args[0].value)
                return
            if name == "zip":
                for arg in expr.args:
                    if not arg.star:
                        yield from self._sources(arg.value)
                return
        yield expr

    def _is_loader_like(
        self,
        expr: cst.BaseExpression,
        *,
        follow_params: bool = True,
        bound: Collection[str] | None = None,
    ) -> bool:
        known = self._loader_bound_names if bound is None else bound
        if isinstance(expr, cst.Call):
            if self.is_dataloader_call(expr):
                return True
            name = _call_name(expr)
            return name is not None and (
                bool(_LOADER_NAME.search(name)) or f"{name}()" in known
            )
        base = expr
        while isinstance(base, cst.Subscript):
            base = base.value
        name = dotted_name(base)
        if name is None:
            return False
        if name in known or _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
            return True
        # `def run(model, data): for x, y in data:` called as `run(model, train_loader)`.
        return follow_params and isinstance(base, cst.Name) and any(
            self._is_loader_like(arg, follow_params=False)
            for arg in self._arguments_for(base, name)
        )

    def is_dataloader_loop(self, loop: cst.CSTNode) -> bool:
        """A ``for`` loop whose iterable is (a pass-through wrapper of) a DataLoader."""
        if not isinstance(loop, cst.For):
            return False
        cached = self._loader_loop.get(loop)
        if cached is None:
            cached = self.loader_source(loop.iter) is not None
            self._loader_loop[loop] = cached
        return cached

    @cached_property
    def _framework_placed(self) -> frozenset[str]:
        """Names bound from ``accelerator.prepare(...)`` / ``fabric.setup_dataloaders(...)``."""
        names: set[str] = set()
        for callee in _PLACING_CALLS:
            for call in self.tree.calls_by_name.get(callee, ()):
                parent = self.tree.parent(call)
                if isinstance(parent, cst.Assign):
                    for target in parent.targets:
                        names.update(names_in(target.target))
        return frozenset(names)

    def framework_places_batches(self, loop: cst.For) -> bool:
        """The loop iterates a loader that Accelerate or Fabric prepared: its batches already
        arrive on the device, so a ``.to(device)`` in the loop copies nothing."""
        key = self.loader_key(loop)
        return key is not None and key in self._framework_placed

    def loader_key(self, loop: cst.For) -> str | None:
        """The dotted name (or ``fn()``) a DataLoader loop iterates, to match bindings."""
        source = self.loader_source(loop.iter)
        if source is None:
            return None
        key = self._key_of(source)
        return self._loader_facts[1].get(key, key) if key is not None else None

    def _key_of(self, source: cst.BaseExpression) -> str | None:
        if isinstance(source, cst.Call):
            name = _call_name(source)
            return None if name is None else f"{name}()"
        while isinstance(source, cst.Subscript):
            source = source.value
        return dotted_name(source)

    # -- batch data -----------------------------------------------------------------------

    def _target_names(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> set[str]:
        """Names in a loop target that hold batch data (``enumerate``'s index excluded)."""
        if (
            isinstance(iterable, cst.Call)
            and _call_name(iterable) == "enumerate"
            and iterable.args
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == 2
        ):
            return self._target_names(target.elements[1].value, iterable.args[0].value)
        if (
            isinstance(iterable, cst.Call)
            and _call_name(iterable) in _PASS_THROUGH
            and iterable.args
        ):
            return self._target_names(target, iterable.args[0].value)
        return set(names_in(target))

    def batch_names(self, loop: cst.For) -> frozenset[str]:
        """Names in a DataLoader loop's body that hold (parts of) the batch."""
        cached = self._batch_names.get(loop)
        if cached is not None:
            return cached
        names = self._target_names(loop.target, loop.iter)
        for node in self.tree.walk(loop.body):
            if isinstance(node, cst.Assign) and self._derives(node.value, names):
                for target in node.targets:
                    names.update(names_in(target.target))
            elif isinstance(node, cst.AnnAssign):
                if node.value is not None and self._derives(node.value, names):
                    names.update(names_in(node.target))
            elif isinstance(node, cst.For) and self._derives(node.iter, names):
                names.update(names_in(node.target))
        frozen = frozenset(names)
        self._batch_names[loop] = frozen
        return frozen

    def _derives(self, expr: cst.BaseExpression, names: Iterable[str]) -> bool:
        """Does ``expr`` hand on batch data from ``names``? A model forward does not."""
        known = names if isinstance(names, (set, frozenset)) else set(names)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr)
            if name is not None and name in known:
                return True
            return isinstance(expr, cst.Attribute) and self._derives(expr.value, known)
        if isinstance(expr, cst.Subscript):
            return self._derives(expr.value, known)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self._derives(e.value, known) for e in expr.elements)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                return self._derives(expr.func.value, known)
            if _call_name(expr) in _DATA_BUILDERS:
                return any(self._derives(a.value, known) for a in expr.args)
            return False
        if isinstance(expr, _COMPREHENSIONS):
            for_in: cst.CompFor | None = expr.for_in
            while for_in is not None:
                if self._derives(for_in.iter, known):
                    return True
                for_in = for_in.inner_for_in
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self._derives(expr.left, known) or self._derives(expr.right, known)
        if isinstance(expr, cst.Comparison):  # `(labels != pad_id)` is a host tensor too
            return self._derives(expr.left, known)
        if isinstance(expr, cst.UnaryOperation):
            return self._derives(expr.expression, known)
        if isinstance(expr, cst.IfExp):
            return self._derives(expr.body, known) or self._derives(expr.orelse, known)
        return False

    def is_batch_data(self, expr: cst.BaseExpression, loop: cst.For) -> bool:
        """Does ``expr`` (inside ``loop``'s body) hold batch data from the loop's DataLoader?

        Comprehension variables count when the comprehension iterates batch data.
        """
        if not self.is_dataloader_loop(loop):
            return False
        names = set(self.batch_names(loop))
        comprehensions: list[cst.CompFor] = []
        for anc in self.tree.ancestors(expr):
            if anc is loop:
                break
            if isinstance(anc, _COMPREHENSIONS):
                for_in: cst.CompFor | None = anc.for_in
                while for_in is not None:
                    comprehensions.append(for_in)
                    for_in = for_in.inner_for_in
        for for_in in reversed(comprehensions):
            if self._derives(for_in.iter, names):
                names.update(names_in(for_in.target))
        return self._derives(expr, names)

    # -- which DataLoaders feed an accelerator --------------------------------------------

    def loaders_feeding(self, loops: Iterable[cst.For]) -> list[cst.Call]:
        """The file's ``DataLoader(...)`` calls whose batches the given loops iterate.

        A loop matches a DataLoader bound to the name it iterates, and, one call level up,
        when it iterates a parameter of its function and a same-file call passes the
        DataLoader (or a name bound to it) for that parameter.
        """
        keys: set[str] = set()
        direct_args: set[cst.CSTNode] = set()
        for loop in loops:
            key = self.loader_key(loop)
            if key is None:
                continue
            keys.add(key)
            for arg in self._arguments_for(loop, key):
                direct_args.add(arg)
                name = dotted_name(arg)
                if name is not None:
                    keys.add(name)
        return [
            call
            for call in self.dataloader_calls
            if call in direct_args or self.bindings(call) & keys
        ]

    def _arguments_for(self, node: cst.CSTNode, key: str) -> Iterator[cst.BaseExpression]:
        """Arguments same-file callers pass for the parameter ``key`` of ``node``'s function."""
        function = self.tree.enclosing_function(node)
        if function is None:
            return
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if key not in params:
            return
        index = params.index(key)
        is_method = bool(params) and params[0] in ("self", "cls")
        for call in self.tree.calls_by_name.get(function.name.value, ()):
            position = index - 1 if is_method and isinstance(call.func, cst.Attribute) else index
            positional = [a for a in call.args if a.keyword is None and not a.star]
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == key:
                    yield arg.value
            if 0 <= position < len(positional):
                yield positional[position].value

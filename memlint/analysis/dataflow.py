"""Where a loop's data comes from, and where a ``.to()`` sends it.

Two questions several rules share:

- Is this loop fed by a DataLoader, and does this expression hold (part of) its batch?
  Batches travel through unpacking (``x, y = batch``), indexing (``batch["input_ids"]``),
  method calls on the batch (``batch.items()``, ``x.float()``) and comprehensions
  (``{k: v.to(device) for k, v in batch.items()}``), but not through a model forward: the
  output of ``model(x)`` is a result, not input data.
- Where does ``t.to(...)`` / ``t.cuda()`` send a tensor? Only a move to an accelerator is a
  host-to-device copy; dtype casts, ``.to(other_tensor)`` and device-to-host copies are not.

A loader reaches its loop through pass-through wrappers (``enumerate``, ``tqdm``,
``metric_logger.log_every``, ``iter``), names bound to them, generator expressions, and
same-file infinite-iterator helpers (a generator that re-iterates its argument, or a small
class with ``__iter__``/``__next__`` around it). Batches also arrive through ``next(it)``
inside a loop, through a same-file fetch helper a step loop calls (``next(it)`` in it,
restarted on ``StopIteration``), through same-file helpers and callbacks the loop hands its
batch to, and through step functions an engine runs over a loader
(``Engine(step).run(loader)``): :meth:`DataflowAnalysis.host_batch_origins` follows all of
these, and leaves out batches that are already on the device (a loader Accelerate or Fabric
prepared, a dataset built from device tensors, a value moved earlier in the same iteration).

:func:`classify_to_target` answers the second question from the call alone (plus the file's
imports); :class:`DataflowAnalysis` adds the file-wide facts (names bound only to the CPU,
DataLoader bindings) and caches per-loop answers so a rule can ask per call cheaply. Nothing
here walks the whole tree per question: lookups go through the tree index's call and
definition tables, the statements before a node in its own blocks, or one walk of a loop or
function that is cached.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Collection, Iterable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.grad import bool_literal
from memlint.analysis.imports import ImportTable, dotted_name
from memlint.analysis.loops import LoopAnalysis
from memlint.analysis.tree import Loop, TreeIndex, class_methods
from memlint.vocabulary import (
    BATCH_INDEX,
    BATCH_ITEM,
    COPYING_CONSTRUCTORS,
    DTYPE_NAME,
    LEGACY_TENSOR_TYPES,
    LOADER_NAME,
    PASS_THROUGH,
    PROGRESS_WRAPPER,
    TORCH_DTYPES,
    framework_batch_feed,
    grad_switch,
    names_evaluation,
    names_training_data,
)

if TYPE_CHECKING:
    from memlint.project.view import ModuleView


class DeviceTarget(enum.Enum):
    """Where a ``.to()`` / ``.cuda()`` / ``.cpu()`` call sends its receiver."""

    # Plainly CUDA at the call: "cuda", "cuda:1", f"cuda:{rank}", torch.device("cuda"),
    # an integer device index, .cuda().
    CUDA = "cuda"
    # A device value whose kind is not known statically: `device`, `args.device`, `x.device`,
    # torch.device(name), `devices[0]`, "cuda" if available else "cpu". Usually an accelerator.
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

# `device`, `dev`, `gpu`, `local_rank`, `self.device`, `args.gpu`, `train_device`, `device_id`
# (and `self.device_`, trailing underscores aside).
_DEVICE_NAME = re.compile(
    r"^(?:device|dev|gpu|gpu_id|device_id|local_rank|rank|cuda_device|target_device)$"
    r"|_device$|_dev$|_gpu$",
    re.IGNORECASE,
)
# A list of devices whose items are devices (`devices[0]`, `self.gpus[rank]`, `device_ids[0]`).
_DEVICES_NAME = re.compile(r"^(?:devices|gpus|device_ids|gpu_ids)$|_devices$|_gpus$", re.IGNORECASE)
# A mapping key that holds a device (`state["device"]`, `state[keys.DEVICE]`, `DEVICE_KEY`).
_DEVICE_KEY = re.compile(r"(?:^|_)(?:device|gpu)(?:_key)?$", re.IGNORECASE)
_OTHER_DEVICES = ("mps", "xpu", "meta", "hpu", "xla", "npu", "ipu", "privateuseone")

# Framework calls that return loaders whose batches arrive on the device already.
_PLACING_CALLS = ("prepare", "prepare_data_loader", "setup_dataloaders", "skip_first_batches")
# Same-file helpers named like these return their argument on the device (`batch =
# send_to_device(batch, device)`): a later `.to(device)` of that value copies nothing.
_MOVING_HELPER = re.compile(
    r"^(?:send_|move_|batch_|data_)?to_(?:device|cuda|gpu)$|^move_to(?:_device|_cuda|_gpu)?$",
    re.IGNORECASE,
)
# A step function's parameter that receives the batch (`def train_step(engine, batch)`).
_BATCH_PARAM = re.compile(r"batch", re.IGNORECASE)
# How many helper calls (or callbacks) a batch is followed through from its loop.
_MAX_HOPS = 4
# A collection of loaders (`loaders`, `train_dataloaders`, `dls`): its items are loaders.
_LOADERS_NAME = re.compile(r"loaders$|(?:^|_)dls$", re.IGNORECASE)


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
    # A template filled in: `"cuda:{}".format(rank)`, `"cuda:%d" % rank`: the literal text
    # before the first placeholder, as for an f-string.
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "format"
        and isinstance(expr.func.value, cst.SimpleString)
    ):
        text = _string_value(expr.func.value)
        return None if text is None else text.split("{", 1)[0]
    if (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Modulo)
        and isinstance(expr.left, cst.SimpleString)
    ):
        text = _string_value(expr.left)
        return None if text is None else text.split("%", 1)[0]
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


def _self_attribute(expr: cst.BaseExpression) -> bool:
    """``self.train_data``: an attribute of the object itself."""
    return (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
            and expr.value.value == "self")


def _annotates_loader(annotation: cst.BaseExpression) -> bool:
    """``DataLoader``, ``data.DataLoader``, ``"DataLoader"``, ``DataLoader[Batch]``,
    ``Optional[DataLoader]``, ``DataLoader | None``: an annotation of one loader (maybe
    absent)."""
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        return isinstance(text, str) and text.rsplit(".", 1)[-1].endswith("DataLoader")
    if isinstance(annotation, cst.BinaryOperation) and isinstance(
            annotation.operator, cst.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_annotates_loader(side) for side in sides) and all(
            _annotates_loader(side) or (isinstance(side, cst.Name) and side.value == "None")
            for side in sides)
    if isinstance(annotation, cst.Subscript) and (_last_part(annotation.value) or "").endswith(
            "DataLoader"):
        return True  # `DataLoader[Batch]`: generic in its batch type
    if isinstance(annotation, cst.Subscript) and _last_part(annotation.value) in (
            "Optional", "Union"):
        items = [e.slice.value for e in annotation.slice if isinstance(e.slice, cst.Index)]
        return any(_annotates_loader(item) for item in items) and all(
            _annotates_loader(item) or (isinstance(item, cst.Name) and item.value == "None")
            for item in items)
    name = _last_part(annotation)
    return name is not None and name.endswith("DataLoader")


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
        if names_dtype(expr, imports):
            return DeviceTarget.NOT_A_MOVE
        # `self.device_`: scikit-learn's spelling of what `fit()` sets
        if _DEVICE_NAME.search((_last_part(expr) or "").rstrip("_")):
            return DeviceTarget.ACCELERATOR
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        # A device picked from a list of devices: `devices[0]`, `self.gpus[rank]`.
        index = expr.slice[0].slice
        if (
            isinstance(index, cst.Index)
            and isinstance(index.value, (cst.Integer, cst.Name))
            and _DEVICES_NAME.search(_last_part(expr.value) or "")
        ):
            return DeviceTarget.ACCELERATOR
        # A device kept in a mapping under a device-like key: `state["device"]`,
        # `state[torchbearer.DEVICE]`, `cfg[DEVICE_KEY]`.
        if isinstance(index, cst.Index):
            key = _string_value(index.value)
            if key is None and isinstance(index.value, (cst.Name, cst.Attribute)):
                key = _last_part(index.value)
            if key is not None and _DEVICE_KEY.search(key):
                return DeviceTarget.ACCELERATOR
    return DeviceTarget.NOT_A_MOVE


def names_dtype(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    """Is ``expr`` a dtype: ``torch.long``, ``torch.float32``, or a name like ``x.dtype``,
    ``self.input_dtype``, ``precision``?"""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return False
    last = _last_part(expr) or ""
    qualified = imports.qualified_name(expr) or ""
    return (qualified.startswith("torch.") and last in TORCH_DTYPES) or bool(
        DTYPE_NAME.search(last))


# Methods that hand back a tensor on the receiver's device, taking no arguments.
_SAME_DEVICE_VIEWS = frozenset({"detach", "clone", "contiguous", "float", "double", "half"})


def names_other_tensor(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    """Does a ``.to(expr)`` argument name another tensor (``.to(lprobs)``, ``.to(x.grad)``,
    ``.type_as(output.detach())``), whose device and dtype the result takes? Not a device,
    a dtype or a literal."""
    while (isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value in _SAME_DEVICE_VIEWS):
        expr = expr.func.value  # `output.detach()` is on `output`'s device
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
        return False
    if classify_device_expr(expr, imports) is not DeviceTarget.NOT_A_MOVE:
        return False
    base: cst.BaseExpression = expr
    while isinstance(base, cst.Subscript):
        index = base.slice[0].slice if len(base.slice) == 1 else None
        key = _string_value(index.value) if isinstance(index, cst.Index) else None
        if key is not None and (DTYPE_NAME.search(key) or key.lower().endswith("type")):
            return False  # `state["dtype"]`
        base = base.value
    last = _last_part(base) or ""
    qualified = imports.qualified_name(base) or ""
    return bool(last) and not (
        DTYPE_NAME.search(last) or last.lower().endswith("type") or last in TORCH_DTYPES
        or qualified.startswith("torch.")
        or last.lower() in ("memory_format", "non_blocking", "copy", "none", "true", "false")
    )


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


def _device_entry(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The device in ``dict(..., device=d)`` or ``{..., "device": d}``."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and (
            value.func.value == "dict"):
        return next((a.value for a in value.args
                     if a.keyword is not None and a.keyword.value == "device"), None)
    if isinstance(value, cst.Dict):
        return next((e.value for e in value.elements if isinstance(e, cst.DictElement)
                     and isinstance(e.key, cst.SimpleString)
                     and e.key.evaluated_value == "device"), None)
    return None


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


def _identity_param(function: cst.FunctionDef) -> str | None:
    """The parameter a function returns unchanged as its only statement (a docstring aside):
    ``def tqdm(iterable, **kwargs): return iterable``."""
    small: list[cst.BaseSmallStatement] = []
    if isinstance(function.body, cst.SimpleStatementSuite):
        small.extend(function.body.body)
    else:
        for statement in function.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                return None
            small.extend(statement.body)
    if small and isinstance(small[0], cst.Expr) and isinstance(small[0].value, cst.SimpleString):
        small = small[1:]  # the docstring
    if len(small) != 1 or not isinstance(small[0], cst.Return):
        return None
    value = small[0].value
    if isinstance(value, cst.Name) and value.value in _positional_params(function):
        return value.value
    return None


def _unsubscripted(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``loaders["train"]`` -> ``loaders``."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


def _param_names(func: cst.FunctionDef) -> set[str]:
    params = func.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _handed_in(value: cst.BaseExpression, func: cst.FunctionDef) -> bool:
    """One of the object's own (``self.train_data``), a parameter of ``func``, or either
    under a progress bar (``tqdm(data)``): data someone else built."""
    if _self_attribute(value) or (isinstance(value, cst.Name)
                                  and value.value in _param_names(func)):
        return True
    return (isinstance(value, cst.Call) and bool(value.args)
            and not value.args[0].star and value.args[0].keyword is None
            and _is_progress_wrapper(value) and _handed_in(value.args[0].value, func))


def _unpacks_into_names(target: cst.BaseExpression) -> bool:
    """``x, y`` (or ``[x, y]``): a loop target that unpacks each item into plain names."""
    return (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) >= 2
            and all(isinstance(e.value, cst.Name) for e in target.elements))


def _is_progress_wrapper(call: cst.Call) -> bool:
    """``tqdm(data, ...)``, ``enumerate(data)``, ``track(data)``: hands on its first
    argument's items."""
    name = _call_name(call)
    return name is not None and (name in PASS_THROUGH
                                 or PROGRESS_WRAPPER.search(name) is not None)


def _call_name(expr: cst.BaseExpression) -> str | None:
    return _last_part(expr.func) if isinstance(expr, cst.Call) else None


def _is_builtin_next(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Name) and call.func.value == "next" and bool(call.args)


def _positional_params(function: cst.FunctionDef | cst.Lambda) -> list[str]:
    return [p.name.value for p in (*function.params.posonly_params, *function.params.params)]


def _param_name(function: cst.FunctionDef, name: str) -> cst.Name:
    """The ``Name`` node of one parameter of ``function``."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.name
    raise KeyError(name)


def _data_params(function: cst.FunctionDef | cst.Lambda) -> list[str]:
    """Parameters that can carry data: positional and keyword-only, ``self``/``cls`` left out."""
    names = [*_positional_params(function),
             *(p.name.value for p in function.params.kwonly_params)]
    return [name for name in names if name not in ("self", "cls")]


def _argument_for(
    call: cst.Call, function: cst.FunctionDef, param: str, *, constructor: bool = False
) -> cst.BaseExpression | None:
    """The argument ``call`` passes for ``function``'s parameter ``param``, if visible.

    ``constructor``: ``call`` builds the class whose ``__init__`` is ``function``.
    """
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    params = _positional_params(function)
    if param not in params:
        return None
    index = params.index(param)
    if constructor or (params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute)):
        index -= 1
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index].value if 0 <= index < len(positional) else None


def _param_default(function: cst.FunctionDef, param: str) -> cst.BaseExpression | None:
    for p in (*function.params.posonly_params, *function.params.params,
              *function.params.kwonly_params):
        if p.name.value == param:
            return p.default
    return None


def _index_text(node: cst.Subscript) -> str:
    """``"x"`` for ``batch["x"]``, ``0`` for ``batch[0]``, ``*`` for anything else."""
    if len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, (cst.SimpleString,
                                                                      cst.Integer)):
            return index.value.value
    return "*"


def value_key(expr: cst.BaseExpression) -> tuple[str, ...] | None:
    """A value's access path: ``batch["x"].float()`` -> ``("batch", "[\\"x\\"]")``.

    Method calls other than transfers keep the path (``x.float()`` is still ``x``); a path
    segment ``[*]`` stands for an index that is not a literal.
    """
    if isinstance(expr, cst.Name):
        return (expr.value,)
    if isinstance(expr, cst.Attribute):
        base = value_key(expr.value)
        return None if base is None else (*base, expr.attr.value)
    if isinstance(expr, cst.Subscript):
        base = value_key(expr.value)
        return None if base is None else (*base, f"[{_index_text(expr)}]")
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value not in TRANSFER_METHODS
    ):
        return value_key(expr.func.value)
    return None


def _covers(moved: tuple[str, ...], key: tuple[str, ...]) -> bool:
    """Is ``key`` the moved value or a part of it (``[*]`` matches any index)?"""
    return len(key) >= len(moved) and all(
        a == b or "[*]" in (a, b) for a, b in zip(moved, key, strict=False)
    )


def _same_part(moved: tuple[str, ...], key: tuple[str, ...]) -> bool:
    """Is ``key`` certainly the moved value or a part of it? Unlike :func:`_covers`, an index
    that is not a literal (``[*]``) matches nothing."""
    return len(key) >= len(moved) and all(
        a == b and a != "[*]" for a, b in zip(moved, key, strict=False)
    )


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
# Calls that hand on the data they are given: containers, and autograd's legacy wrapper
# (``Variable(batch)`` is the batch's own tensor since torch 0.4; older code still wraps
# every batch in it before the copy: ``Variable(data).cuda()``).
_DATA_BUILDERS = frozenset({"tuple", "list", "dict", "map", "Variable"})
_Comprehension = cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp
_Function = cst.FunctionDef | cst.Lambda


def _cuda_test(test: cst.BaseExpression) -> bool:
    """A test that holds only on CUDA: ``device == TorchDevice.CUDA``, ``device.type ==
    "cuda"``, ``torch.cuda.is_available()``, ``use_cuda``, ``args.cuda``."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
            test.comparisons[0].operator, (cst.Equal, cst.Is)):
        sides = [test.left, test.comparisons[0].comparator]
        return any((isinstance(side, cst.SimpleString) and side.evaluated_value == "cuda")
                   or (isinstance(side, cst.Attribute) and side.attr.value in ("CUDA", "cuda"))
                   for side in sides)
    if isinstance(test, cst.Call) and dotted_name(test.func) in (
            "torch.cuda.is_available", "cuda.is_available"):
        return True
    name = dotted_name(test)
    return name is not None and name.rsplit(".", 1)[-1] in ("cuda", "use_cuda", "is_cuda",
                                                            "with_cuda", "on_cuda")


# Methods whose result lives on the host: a tensor copy, a NumPy array, Python values.
_TO_HOST = frozenset({"cpu", "numpy", "tolist", "item"})


def _host_copy_value(expr: cst.BaseExpression) -> bool:
    """``logits.argmax(1).cpu()``, ``out.detach().cpu().numpy()``: the outermost call of the
    chain hands back a host value (a later ``.float()`` or ``.long()`` on it stays there)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method in _TO_HOST and not expr.args:
            return True
        if method not in ("float", "long", "int", "double", "half", "bool", "squeeze",
                          "unsqueeze", "view", "reshape", "flatten", "detach", "clone"):
            return False
        expr = expr.func.value
    return False


def _fresh_host_copy(expr: cst.BaseExpression) -> bool:
    """``torch.tensor(mask_batch)``, ``[torch.tensor(x).unsqueeze(1) for x in weights]``: a
    tensor (or a list of them) the code builds on the host from the batch's Python data. A
    DataLoader's ``pin_memory`` never reaches it and an asynchronous copy of it overlaps with
    nothing, as with ``torch.tensor(part).to(device)``, which is no loader batch either."""
    if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return _fresh_host_copy(expr.elt)
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value not in TRANSFER_METHODS
           and isinstance(expr.func.value, cst.Call)):
        expr = expr.func.value  # `.unsqueeze(1)`, `.float()` on the new tensor
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in COPYING_CONSTRUCTORS
        and dotted_name(expr.func.value) == "torch"
        and len(expr.args) >= 1
        and (expr.func.attr.value not in LEGACY_TENSOR_TYPES
             or sum(1 for a in expr.args if a.keyword is None) == 1)
    )


def _comprehension_sources(
    expr: cst.BaseExpression, comprehensions: list[_Comprehension],
) -> list[cst.BaseExpression]:
    """What the comprehensions around ``expr`` iterate to bind its root name: ``masks`` for
    ``x`` in ``[x.to(device) for x in masks]``."""
    root = expr
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name):
        return []
    out: list[cst.BaseExpression] = []
    for comprehension in comprehensions:
        for_in: cst.CompFor | None = comprehension.for_in
        while for_in is not None:
            if root.value in names_in(for_in.target):
                out.append(for_in.iter)
            for_in = for_in.inner_for_in
    return out


@dataclasses.dataclass(frozen=True)
class BatchOrigin:
    """Where a value's DataLoader batch comes from.

    ``site`` runs once per batch: the ``for``/``while`` loop or comprehension that draws it,
    or the ``engine.run(loader)`` call that drives a step function. ``source`` is the
    loader-like expression the batches are drawn from (``train_loader``, ``it``).
    """

    site: cst.CSTNode
    source: cst.BaseExpression


# A loop's batch-holding names from one source: (source, names, drawn with next()).
_Group = tuple[cst.BaseExpression, frozenset[str], bool]


# A loop over this many batches or fewer is a peek, not an input pipeline.
_FEW = 8


def _few_items(iterable: cst.BaseExpression) -> bool:
    """``zip(range(3), loader)`` / ``islice(loader, 2)`` / ``range(2)``: a handful of items."""
    if not isinstance(iterable, cst.Call):
        return False
    name = _call_name(iterable)
    args = [a.value for a in iterable.args if not a.star and a.keyword is None]
    if name == "zip":
        return any(_few_items(a) for a in args)
    if name == "enumerate" and args:
        return _few_items(args[0])
    if name == "range" and len(args) == 1:
        return isinstance(args[0], cst.Integer) and int(args[0].value, 0) <= _FEW
    if name == "islice" and len(args) == 2:
        return isinstance(args[1], cst.Integer) and int(args[1].value, 0) <= _FEW
    return False


def nth_argument(call: cst.Call, index: int, name: str) -> cst.BaseExpression | None:
    """The argument a call passes for a parameter, by keyword or by position."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if index < len(positional) and not any(a.star for a in positional[:index + 1]):
        return positional[index].value
    return None


_BINDING_TYPES: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For})


class DataflowAnalysis:
    """File-wide data provenance, built lazily; every per-loop answer is cached.

    ``project``: the project model's answers (loader wrappers defined in other modules)."""

    def __init__(self, tree: TreeIndex, project: ModuleView | None = None,
                 loops: LoopAnalysis | None = None) -> None:
        self.tree = tree
        self.project = project
        self.loops = loops if loops is not None else LoopAnalysis(tree)
        self._loader_loop: dict[cst.For, bool] = {}
        self._loader_annotations: dict[cst.FunctionDef, tuple[str, ...]] = {}
        self._batch_names: dict[cst.For, frozenset[str]] = {}
        self._groups: dict[Loop, tuple[_Group, ...]] = {}
        self._moves: dict[Loop | cst.FunctionDef,
                          tuple[dict[cst.CSTNode, int],
                                list[tuple[tuple[str, ...], int, cst.CSTNode]]]] = {}
        self._param_names: dict[tuple[cst.FunctionDef, tuple[str, ...]], frozenset[str]] = {}
        self._yields: dict[cst.FunctionDef, str | None] = {}
        self._class_wraps: dict[cst.ClassDef, str | None] = {}
        self._class_moves: dict[cst.ClassDef, bool] = {}
        self._device_datasets: dict[cst.Call, bool] = {}
        self._returns: dict[cst.FunctionDef, frozenset[str]] = {}
        self._host_helpers: dict[cst.FunctionDef, bool] = {}
        self._callers: dict[cst.FunctionDef, tuple[list[cst.Call], list[cst.Call]]] = {}
        self._blocks: dict[tuple[cst.CSTNode, bool], tuple[
            dict[cst.CSTNode, int], dict[str, list[tuple[int, cst.BaseExpression]]]]] = {}
        self._loader_scopes: dict[cst.Call, list[tuple[str, cst.FunctionDef | None]]] = {}
        self._loader_index: dict[bool, dict[str, list[cst.Call]]] = {}
        # id(node) -> bindings(node); the nodes are the tree's, alive as long as this is
        self._bindings: dict[int, frozenset[str]] = {}
        self._helper_draw_calls: dict[cst.Call, cst.BaseExpression] | None = None

    # -- device targets -------------------------------------------------------------------

    @cached_property
    def host_device_names(self) -> frozenset[str]:
        """Dotted names every assignment in the file binds to the CPU (``device = "cpu"``)."""
        verdicts: dict[str, bool] = {}
        for node in self.tree.preorder:
            value: cst.BaseExpression | None
            kind = type(node)
            if kind not in _BINDING_TYPES:  # an exact type test: most nodes stop here
                continue
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
        the CPU (a CPU-only script) is the host; ``x.to(**tpdv)`` moves to the device its
        mapping holds."""
        kind = classify_to_target(call, self.tree.imports)
        arg = device_argument(call)
        where: cst.CSTNode = call  # where the device expression is read
        if kind is DeviceTarget.NOT_A_MOVE:
            mapped = self._mapped_device(call)
            if mapped is None:
                # `def act(obs, tpdv): torch.zeros(n).to(**tpdv)`: the MAPPO mapping handed
                # in by the caller (`self.tpdv = dict(dtype=..., device=device)` elsewhere).
                return DeviceTarget.ACCELERATOR if self._tpdv_parameter(call) else kind
            arg, where = mapped
            kind = classify_device_expr(arg, self.tree.imports)
        if kind is DeviceTarget.ACCELERATOR:
            name = None if arg is None else dotted_name(arg)
            if name is not None and self._host_name_at(name, where):
                return DeviceTarget.HOST
            if self._host_batch_device(arg, call):
                return DeviceTarget.HOST
            if self._past_cuda_test(call):
                return DeviceTarget.HOST
        return kind

    def _tpdv_parameter(self, call: cst.Call) -> bool:
        """``x.to(**tpdv)`` with ``tpdv`` a parameter of the function (the MAPPO family's
        name for its dtype-and-device mapping), bound nowhere else in it."""
        if transfer_method(call) != "to" or len(call.args) != 1 or call.args[0].star != "**":
            return False
        value = call.args[0].value
        func = self.tree.enclosing_function(call)
        return (isinstance(value, cst.Name) and value.value == "tpdv" and func is not None
                and "tpdv" in _param_names(func)
                and not self.tree.assignments_to("tpdv", call))

    def _mapped_device(self, call: cst.Call) -> tuple[cst.BaseExpression, cst.Assign] | None:
        """The device of ``x.to(**tpdv)`` when every binding of ``tpdv`` in its scope (the
        class, for ``self.tpdv``) is a mapping with a device key: ``dict(dtype=torch.float32,
        device=device)`` or ``{"device": device}``, the MAPPO idiom."""
        if transfer_method(call) != "to" or len(call.args) != 1 or call.args[0].star != "**":
            return None
        name = dotted_name(call.args[0].value)
        if name is None:
            return None
        bindings = self.tree.assignments_to(name, call)
        devices = [_device_entry(assign.value) for assign in bindings]
        first = devices[0] if devices else None
        if first is None or any(d is None for d in devices):
            return None
        return first, bindings[0]

    def _past_cuda_test(self, call: cst.Call) -> bool:
        """``if device == "cuda": x = x.cuda(non_blocking=True) else: x = x.to(device)``: the
        ``else`` of a test that the device is CUDA (``torch.cuda.is_available()``, a
        ``use_cuda`` flag) runs only when it is not, so its move to an unnamed device goes to
        the CPU (or another backend whose copies the host does not wait on)."""
        child: cst.CSTNode = call
        for anc in self.tree.ancestors(call):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(anc, cst.If) and child is anc.orelse and _cuda_test(anc.test):
                return True
            child = anc
        return False

    def _host_batch_device(self, arg: cst.BaseExpression | None, call: cst.Call) -> bool:
        """``y.to(x.device)`` where ``x`` is, at ``call``, batch data of a loop of the same
        function still on the host (the same batch's unmoved input): the target is the
        host, the call copies nothing.

        Not when a loader behind ``x`` is a class of this file or a project class named like
        a DataLoader that is none: it assembles its batches itself, maybe on the device
        (cellbender's ``DataLoader`` returns ``dense_tensor.to(device=self.device)``)."""
        if not (isinstance(arg, cst.Attribute) and arg.attr.value == "device"
                and isinstance(arg.value, cst.Name)):
            return False
        # Only batch data of this function's own loops: what callers pass for a parameter
        # may have been moved on the way (ART's `_projection(values)` gets a perturbation
        # already on the device).
        origins = [o for o in self._origins(arg.value, call, _MAX_HOPS, set())
                   if self.is_steady(o)]
        if not origins:
            return False
        project = self.project
        for loader in self.loaders_feeding_origins(origins):
            written = dotted_name(loader.func)
            if written is not None and (
                    written in self.tree.classes_by_name  # a loader class of this file
                    or (project is not None and project.is_plain_loader(written))):
                return False
        return True

    def _host_name_at(self, name: str, at: cst.CSTNode) -> bool:
        """``name`` is bound only to the CPU in this file, and at ``at`` it is not a pytest
        fixture.

        A parameter of a pytest test (``def test_adjoint(device):``) gets its value from a
        fixture, whatever the file binds the same name to in another test (``device =
        torch.device("cpu")`` in one test of many). Only the test's own name and
        parameters decide (no caller is looked at), so a lint that leaves other bodies out
        of the parse gives the same answer.
        """
        if name not in self.host_device_names:
            return False
        if "." in name:  # `self.device`, `args.device`: an attribute, not a parameter
            return True
        function = self.tree.enclosing_function(at)
        while function is not None:
            params = function.params
            if any(p.name.value == name for p in (*params.posonly_params, *params.params,
                                                  *params.kwonly_params)):
                return not function.name.value.startswith("test")
            function = self.tree.enclosing_function(function)
        return True

    def _moves_to_accelerator(self, call: cst.Call) -> bool:
        """The call's own spelling says it moves to an accelerator. Cheaper than
        :meth:`device_target` (no file-wide pass); used where a wrong yes only keeps quiet."""
        return classify_to_target(call, self.tree.imports).to_accelerator

    def _device_kind(self, expr: cst.BaseExpression) -> DeviceTarget:
        """What device an argument names, with the file's CPU-only names as the host."""
        name = dotted_name(expr)
        if name is not None and name in self.host_device_names:
            return DeviceTarget.HOST
        return classify_device_expr(expr, self.tree.imports)

    def places_on_device(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a value just moved to an accelerator?

        ``x.to(device)``, ``x.cuda().float()``, ``{k: v.to(device) for ...}``,
        ``[t.cuda() for t in batch]``, ``tuple(t.to(device) for t in batch)``, and the result
        of a helper named like ``to_device`` / ``send_to_device`` / ``move_to_cuda``.
        """
        while (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value not in TRANSFER_METHODS
        ):
            expr = expr.func.value
        if isinstance(expr, cst.Call):
            method = transfer_method(expr)
            if method is not None:
                return method != "cpu" and self._moves_to_accelerator(expr)
            name = _call_name(expr)
            if name is not None and _MOVING_HELPER.search(name):
                return True
            if name in _DATA_BUILDERS and len(expr.args) == 1:
                return self.places_on_device(expr.args[0].value)
            return False
        if isinstance(expr, cst.DictComp):
            return self.places_on_device(expr.value)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self.places_on_device(expr.elt)
        return False

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
        """(names bound to a loader, ``progress -> train_loader`` for wrapper-bound names).

        Wrappers are the pass-through calls, same-file iterator helpers and those the project
        model found in other modules; a wrapper of a wrapper (``it = iter(pbar)``) is found
        on a later pass.
        """
        bound: set[str] = set()
        wrapped: dict[str, str] = {}
        for call in self.dataloader_calls:
            bound.update(self.bindings(call))
        for name, calls in self.tree.calls_by_name.items():
            # `train_iter = dataloader(data, batch_size)`, `batches = get_loader(split)`: a
            # helper function named like a loader (from any module) hands one out, as a loop
            # over `get_loader(split)` itself would say; one named for several does not, and
            # a class (`ValDataLoaderIter(loader)`, a wrapper) is judged as a wrapper.
            if (not LOADER_NAME.search(name) or _LOADERS_NAME.search(name)
                    or name[:1].isupper() or name.endswith("DataLoader")):
                continue
            for call in calls:
                parent = self.tree.parent(call)
                if (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                        and isinstance(parent.targets[0].target, cst.Name)):
                    bound.add(parent.targets[0].target.value)
        local = {*self.tree.functions_by_name, *self.tree.classes_by_name}
        if self.project is not None:  # wrappers defined in other modules of the project
            local |= {w.rsplit(".", 1)[-1] for w in self.project.wrappers}
        candidates: list[tuple[cst.Call, list[str]]] = []
        progress = {n for n in self.tree.calls_by_name if PROGRESS_WRAPPER.search(n)}
        for name in sorted(PASS_THROUGH | progress | (local & self.tree.calls_by_name.keys())):
            for call in self.tree.calls_by_name.get(name, ()):
                parent = self.tree.parent(call)
                if not call.args:
                    continue
                if isinstance(parent, cst.Assign):
                    candidates.append((call, [n for target in parent.targets
                                              for n in names_in(target.target)]))
                elif isinstance(parent, cst.WithItem) and parent.asname is not None:
                    # `with tqdm(enumerate(loader)) as pbar:`: the bar hands on the batches
                    candidates.append((call, list(names_in(parent.asname.name))))
        self._with_wrapped(bound, wrapped)
        aliases = self._plain_aliases() if bound else []
        for _ in range(4):
            grew = False
            for alias, aliased in aliases:  # `self.train_loader = train_loader`
                if aliased in bound and alias not in bound:
                    wrapped.setdefault(alias, aliased)
                    bound.add(alias)
                    grew = True
            for call, names in candidates:
                source = self._wrapped_loader(call, bound)
                if source is None:
                    continue
                key = self._key_of(source)
                for name in names:
                    if key is not None and name != key:
                        wrapped.setdefault(name, key)
                    if name not in bound:
                        bound.add(name)
                        grew = True
            if not grew:
                break
        return bound, wrapped

    def _plain_aliases(self) -> list[tuple[str, str]]:
        """``(self.train_loader, train_loader)`` for each ``a = b`` between plain or dotted
        names: a loader kept on the object under a second name is the same loader."""
        found: list[tuple[str, str]] = []
        for node in self.tree.preorder:
            if type(node) is not cst.Assign or len(node.targets) != 1:
                continue
            if not isinstance(node.value, (cst.Name, cst.Attribute)):
                continue
            source = dotted_name(node.value)
            target = dotted_name(node.targets[0].target)
            if source is not None and target is not None and source != target:
                found.append((target, source))
        return found

    def _with_wrapped(self, bound: set[str], wrapped: dict[str, str]) -> None:
        """``with Manager(data_loader=train_loader, ...) as safe_loader:``: a context manager
        that takes a loader and hands out one named like a loader gives out the same batches
        (a memory-limiting or sharding wrapper); ``safe_loader`` leads back to
        ``train_loader``."""
        for node in self.tree.preorder:
            if type(node) is not cst.WithItem or node.asname is None:
                continue
            target = node.asname.name
            if not (isinstance(target, cst.Name) and isinstance(node.item, cst.Call)
                    and LOADER_NAME.search(target.value)):
                continue
            for arg in node.item.args:
                key = self._key_of(arg.value) if not arg.star else None
                if key is not None and self._is_loader_like(
                        arg.value, follow_params=False, bound=bound):
                    bound.add(target.value)
                    if key != target.value:
                        wrapped.setdefault(target.value, key)
                    break

    def _wrapped_loader(
        self, call: cst.Call, bound: Collection[str]
    ) -> cst.BaseExpression | None:
        """The loader a wrapper call hands on, judged against the names ``bound`` so far."""
        # Cheap test first: most assigned calls of local functions take no loader at all.
        if not any(
            self._is_loader_like(source, follow_params=False, bound=bound)
            for arg in call.args
            for source in self._sources(arg.value, follow_names=False)
        ):
            return None
        inner = self._wrapped_arg(call)
        if inner is None:
            return None
        for source in self._sources(inner, follow_names=False):
            if self._is_loader_like(source, follow_params=False, bound=bound):
                return source
        return None

    def copied_to_host(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """``expr`` is a name whose latest binding before ``at`` (in the blocks around it, up
        to its function) is already a host copy: ``preds = logits.argmax(1).cpu()`` and
        later ``preds.detach().cpu()``. Reading it again waits for nothing."""
        while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
               and expr.func.attr.value in ("detach", "clone") and not expr.args):
            expr = expr.func.value
        if not isinstance(expr, cst.Name):
            return False
        values = self._bindings_before(at, expr.value, deep=True)
        return bool(values) and _host_copy_value(values[0])

    def bindings(self, value: cst.BaseExpression) -> frozenset[str]:
        """Keys under which ``value`` can be found later: assigned names, a dict or list that
        holds it, or ``fn()`` when ``fn`` returns it (and the names bound from ``fn(...)``).
        Kept per node: each loader is asked about by every loop that may draw from it."""
        known = self._bindings.get(id(value))
        if known is None:
            known = self._bindings[id(value)] = frozenset(self._bindings_uncached(value))
        return known

    def _bindings_uncached(self, value: cst.BaseExpression) -> set[str]:
        keys: set[str] = set()
        node: cst.CSTNode = value
        parent = self.tree.parent(node)
        while isinstance(parent, (cst.DictElement, cst.Element, cst.Dict, cst.List, cst.Tuple,
                                  cst.DictComp, cst.ListComp, cst.CompFor, cst.Arg,
                                  cst.IfExp)):  # `loader = DataLoader(...) if val else None`
            if isinstance(parent, cst.CompFor):
                return keys
            if isinstance(parent, cst.Arg):
                wrapper = self._wrapper_of(parent)
                if wrapper is None:
                    return keys
                parent = wrapper
            node = parent
            parent = self.tree.parent(node)
        if isinstance(parent, cst.Assign):
            for target in parent.targets:
                keys.update(names_in(target.target))
        elif isinstance(parent, cst.AnnAssign):
            keys.update(names_in(parent.target))
        function = self.tree.enclosing_function(parent) if parent is not None else None
        # `return loader`, also by name: `loader = DataLoader(...)` ... `return loader, sampler`
        if function is not None and (
                isinstance(parent, cst.Return) or keys & self._returned_names(function)):
            keys.add(f"{function.name.value}()")
            for call in self.tree.calls_of(function):
                call_parent = self.tree.parent(call)
                if isinstance(call_parent, cst.Assign):
                    for target in call_parent.targets:
                        keys.update(names_in(target.target))
        return keys

    def _wrapper_of(self, arg: cst.Arg) -> cst.Call | None:
        """The call ``arg`` belongs to, when that call hands on the argument's items
        unchanged (``cycle(DataLoader(...))``): the loader can be found under its result."""
        call = self.tree.parent(arg)
        if isinstance(call, cst.Call) and self._wrapped_arg(call) is arg.value:
            return call
        return None

    def _returned_names(self, function: cst.FunctionDef) -> frozenset[str]:
        """Plain names a function returns (``return loader`` / ``return train, val``)."""
        cached = self._returns.get(function)
        if cached is not None:
            return cached
        names: set[str] = set()
        for node in self.tree.walk(function.body):
            if isinstance(node, cst.Return) and node.value is not None:
                value = node.value
                elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
                for expr in (value, *(e.value for e in elements)):
                    if isinstance(expr, cst.Name):
                        names.add(expr.value)
        frozen = frozenset(names)
        self._returns[function] = frozen
        return frozen

    def loader_source(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The loader-like expression a loop iterable unwraps to, if it plainly is one.

        ``enumerate(tqdm(train_loader))`` -> ``train_loader``; ``zip(a_loader, b_loader)`` ->
        the first loader; ``dataloaders[phase]`` -> itself; ``DataLoader(ds)`` -> itself;
        ``cycle(train_loader)`` (a same-file generator re-iterating its argument) and
        ``(b for b in train_loader if b)`` -> ``train_loader``.
        """
        for source in self._sources(expr):
            if self._is_loader_like(source):
                return source
        return self._batch_indexed_source(expr) or self._trained_on_source(expr)

    def _batch_indexed_source(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``for batch_idx, (x, y) in enumerate(train_data):``: a loop whose header says it
        draws batches (an index named for them, each item unpacked) over what a parameter or
        an attribute hands in (``train_data``, ``self.local_training_data``) iterates a
        loader built elsewhere: FedML's ``train(self, train_data, device, args)``, also a name
        the function binds only to such attributes (``test_data = self.test_global``). A name
        it binds to anything else (a list of slices it cut) is left alone."""
        if not (isinstance(expr, cst.Call) and _call_name(expr) == "enumerate"
                and len(expr.args) == 1 and not expr.args[0].star):
            return None
        loop = self.tree.parent(expr)
        if not (isinstance(loop, cst.For) and loop.iter is expr
                and isinstance(loop.target, cst.Tuple) and len(loop.target.elements) == 2):
            return None
        index, item = (element.value for element in loop.target.elements)
        if not (isinstance(index, cst.Name) and BATCH_INDEX.match(index.value)
                and (isinstance(item, (cst.Tuple, cst.List))
                     or (isinstance(item, cst.Name) and BATCH_ITEM.match(item.value)))):
            return None
        source = expr.args[0].value
        if _self_attribute(source):
            return source
        func = self.tree.enclosing_function(loop)
        if not isinstance(source, cst.Name) or func is None:
            return None
        if source.value in _param_names(func):
            return source
        # `test_data = self.local_test_data if test else self.local_training_data`, also in
        # `if`/`else` branches: one of the object's own, handed in by whoever set it; or
        # the parameter itself or under a progress bar (`batches = data if quiet else
        # tqdm(data)`).
        values = self._bindings_before(loop, source.value, deep=True)
        if values and all(_handed_in(value, func) or (
                isinstance(value, cst.IfExp) and _handed_in(value.body, func)
                and _handed_in(value.orelse, func)) for value in values):
            return source
        return None

    def _trained_on_source(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``for x, labels in self.local_training_data:`` (or ``for batch in self.train_data:``,
        ``for step, (x, y) in enumerate(train_queue):``) with a backward pass in the body, or
        in a function named for evaluation (``def local_infer(self, valid_queue, ...)``,
        ``def test_model(model, test_data)``) or decorated to run without grad: a loop that
        unpacks each item into plain names (or binds it whole to a name for a batch) and
        trains or evaluates on them, over data (by its name: not an agent's rollouts) that a
        parameter or the object hands in (also under a progress bar), iterates a loader
        built elsewhere (FedML's clients). What the function built itself (a list of slices)
        is left alone."""
        loop = self.tree.parent(expr)
        if not (isinstance(loop, cst.For) and loop.iter is expr):
            return None
        target = loop.target
        if isinstance(expr, cst.Call) and _call_name(expr) == "enumerate":
            # `for i, item in enumerate(data)` unpacks an index, not a batch; `for step, (x,
            # y) in enumerate(data)` unpacks the item too
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
                    and isinstance(target.elements[0].value, cst.Name)
                    and _unpacks_into_names(target.elements[1].value)):
                return None
        elif not (_unpacks_into_names(target)
                  # `for batch in self.train_data:`: one item, named for a batch, or unpacked
                  # into names in the body (`for data_pair in client_data: (data, target) =
                  # data_pair`)
                  or (isinstance(target, cst.Name) and (
                      BATCH_ITEM.match(target.value)
                      or self._unpacked_in(loop, target.value)))):
            return None
        func = self.tree.enclosing_function(loop)
        if func is None or not _handed_in(expr, func) or not (
                self.loops.runs_backward(loop) or names_evaluation(func.name.value)
                or self._decorated_without_grad(func)):
            return None
        while isinstance(expr, cst.Call):  # `tqdm(self.data)`: the data itself
            expr = expr.args[0].value
        name = _last_part(expr)
        return expr if name is not None and names_training_data(name) else None

    def _decorated_without_grad(self, func: cst.FunctionDef) -> bool:
        """``@torch.no_grad()`` / ``@torch.inference_mode()``: inference code whatever its
        name (FL-bench's ``compute_mean_cov`` over a client's training data)."""
        imports = self.tree.imports
        for decorator in (d.decorator for d in func.decorators):
            call = decorator if isinstance(decorator, cst.Call) else None
            name = imports.qualified_name(call.func if call is not None else decorator)
            flag = (bool_literal(call.args[0].value)
                    if call is not None and call.args else None)
            if name is not None and grad_switch(
                    name, call is not None, bool(call is not None and call.args),
                    flag) == "off":
                return True
        return False

    def _unpacked_in(self, loop: cst.For, name: str) -> bool:
        """Does the loop's body unpack ``name`` into plain names (``x, y = item``), as a loop
        header that unpacks each item does?"""
        return any(
            isinstance(node, cst.Assign) and len(node.targets) == 1
            and isinstance(node.value, cst.Name) and node.value.value == name
            and isinstance(node.targets[0].target, (cst.Tuple, cst.List))
            and len(node.targets[0].target.elements) >= 2
            and all(isinstance(e.value, cst.Name) for e in node.targets[0].target.elements)
            for node in self.tree.walk(loop.body))

    def _sources(
        self, expr: cst.BaseExpression, *, follow_names: bool = True
    ) -> Iterator[cst.BaseExpression]:
        """What an iterable hands on, unwrapped (the expression itself when nothing is).

        ``follow_names``: a plain name bound, just before in its own blocks, to a generator
        expression hands on that generator's source too.
        """
        if isinstance(expr, cst.Call):
            if _call_name(expr) == "zip":
                for arg in expr.args:
                    if not arg.star:
                        yield from self._sources(arg.value, follow_names=follow_names)
                return
            inner = self._wrapped_arg(expr)
            if inner is not None:
                yield from self._sources(inner, follow_names=follow_names)
                return
        elif isinstance(expr, cst.GeneratorExp):
            inner = self._generator_source(expr)
            if inner is not None:
                yield from self._sources(inner, follow_names=follow_names)
                return
        elif isinstance(expr, cst.IfExp):
            # `tqdm(loader) if verbose else loader`: either arm hands on the loader's items.
            yield from self._sources(expr.body, follow_names=follow_names)
            yield from self._sources(expr.orelse, follow_names=follow_names)
            return
        elif isinstance(expr, cst.Name) and follow_names:
            yield expr
            for value in self._bindings_before(expr, expr.value, deep=False)[:1]:
                # `it = (b for b in loader)`, `it = tqdm(loader) if verbose else loader`
                if isinstance(value, (cst.GeneratorExp, cst.IfExp)):
                    yield from self._sources(value, follow_names=follow_names)
            return
        yield expr

    def _wrapped_arg(self, call: cst.Call) -> cst.BaseExpression | None:
        """The argument whose items ``call`` hands on unchanged, if it is such a wrapper.

        A same-file definition decides for its own name: a generator that re-yields the
        items of a parameter, a function that returns a parameter as it is (the stand-in a
        script defines when an optional import fails: ``except ImportError: def tqdm(x,
        **kwargs): return x``), or a class with ``__iter__``/``__next__`` that stores one,
        and none moves data to a device on the way (a prefetcher that does hands on batches
        already on the device). Otherwise the known pass-through calls (``tqdm``, ...).
        """
        name = _call_name(call)
        if name is None or not call.args:
            return None
        func = call.func
        local = isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value in ("self", "cls")
        )
        if local:
            attribute = isinstance(func, cst.Attribute)
            functions = [f for f in self.tree.functions_by_name.get(name, ())
                         if self._visible(f, call, attribute=attribute)]
            if functions:
                for function in functions:
                    param = self._yielding_param(function) or _identity_param(function)
                    if param is not None:
                        return _argument_for(call, function, param)
                return None
            classes = self.tree.classes_by_name.get(name) if isinstance(func, cst.Name) else None
            if classes:
                for cls in classes:
                    init = self._init_of(cls)
                    param = self._iterator_class_param(cls)
                    if init is not None and param is not None:
                        return _argument_for(call, init, param, constructor=True)
                return None
        written = dotted_name(func)
        if self.project is not None and written in self.project.wrappers:
            # A wrapper defined in another module of the project (`for b in cycle(loader)`).
            index, param = self.project.wrappers[written]
            return nth_argument(call, index, param)
        first = call.args[0]
        if name in PASS_THROUGH and first.keyword is None and not first.star:
            return first.value
        if PROGRESS_WRAPPER.search(name):
            for arg in call.args:  # the argument named like a loader
                written = None if arg.star else dotted_name(_unsubscripted(arg.value))
                if written is not None and LOADER_NAME.search(written.rsplit(".", 1)[-1]):
                    return arg.value
        return None

    def batch_origins(self, expr: cst.BaseExpression) -> list[BatchOrigin]:
        """Where ``expr`` gets DataLoader batch data that is still on the host (see
        :meth:`host_batch_origins`, which asks the same of a transfer's receiver)."""
        return list(dict.fromkeys(self._origins(expr, None, 0, set())))

    def _generator_source(self, expr: cst.GeneratorExp) -> cst.BaseExpression | None:
        """``(b for b in loader if ok(b))`` hands on ``loader``'s items; one that moves or
        transforms them (``(f(b) for b in loader)``, ``(b.cuda() for ...)``) does not."""
        for_in = expr.for_in
        if for_in.inner_for_in is not None:
            return None
        element = expr.elt
        if not self._derives(element, set(names_in(for_in.target))):
            return None
        if any(
            isinstance(n, cst.Call) and transfer_method(n) is not None
            for n in (element, *self.tree.walk(element))
        ):
            return None
        return for_in.iter

    def _yielding_param(self, function: cst.FunctionDef) -> str | None:
        """The parameter a same-file generator re-yields item by item, if it only does that.

        ``def cycle(dl): while True: for b in dl: yield b`` and ``yield from dl`` -> ``dl``.
        A generator that yields anything else, or moves data to a device, is no wrapper.
        """
        if function in self._yields:
            return self._yields[function]
        self._yields[function] = None
        params = set(_positional_params(function))
        found: str | None = None
        for node in self.tree.walk(function):
            if isinstance(node, cst.Call) and transfer_method(node) in ("to", "cuda"):
                return None
            if not isinstance(node, cst.Yield):
                continue
            param = self._yielded_param(node, function, params)
            if param is None:
                return None
            found = found or param
        self._yields[function] = found
        return found

    def _yielded_param(
        self, node: cst.Yield, function: cst.FunctionDef, params: Collection[str]
    ) -> str | None:
        value = node.value
        if isinstance(value, cst.From):
            iterables = [value.item]
        elif isinstance(value, cst.Name) or (
            isinstance(value, (cst.Tuple, cst.List))
            and all(isinstance(e.value, cst.Name) for e in value.elements)
        ):
            yielded = set(names_in(value))
            iterables = []
            for anc in self.tree.ancestors(node):
                if anc is function:
                    break
                if isinstance(anc, cst.For) and yielded <= set(names_in(anc.target)):
                    iterables = [anc.iter]
                    break
        else:
            return None
        for iterable in iterables:
            for source in self._sources(iterable, follow_names=False):
                if isinstance(source, cst.Name) and source.value in params:
                    return source.value
        return None

    def _init_of(self, cls: cst.ClassDef) -> cst.FunctionDef | None:
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                return statement
        return None

    def _iterator_class_param(self, cls: cst.ClassDef) -> str | None:
        """The ``__init__`` parameter a small iterator class wraps (``self.it = iter(loader)``).

        Only a class with ``__iter__`` or ``__next__`` that moves nothing to a device counts.
        """
        if cls in self._class_wraps:
            return self._class_wraps[cls]
        self._class_wraps[cls] = None
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        init = methods.get("__init__")
        if init is None or not {"__iter__", "__next__"} & methods.keys():
            return None
        if self._class_moves_to_device(cls):
            return None
        params = set(_data_params(init))
        found: str | None = None
        for node in self.tree.walk(init):
            if not isinstance(node, cst.Assign) or not any(
                (dotted_name(t.target) or "").startswith("self.") for t in node.targets
            ):
                continue
            for source in self._sources(node.value, follow_names=False):
                if isinstance(source, cst.Name) and source.value in params:
                    found = found or source.value
        self._class_wraps[cls] = found
        return found

    def _class_moves_to_device(self, cls: cst.ClassDef) -> bool:
        """Does any method of the class move something to an accelerator?"""
        cached = self._class_moves.get(cls)
        if cached is None:
            cached = any(
                isinstance(node, cst.Call)
                and transfer_method(node) in ("to", "cuda")
                and self._moves_to_accelerator(node)
                for statement in cls.body.body
                if isinstance(statement, cst.FunctionDef)
                for node in self.tree.walk(statement)
            )
            self._class_moves[cls] = cached
        return cached

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
                bool(LOADER_NAME.search(name)) or f"{name}()" in known
            )
        base = expr
        while isinstance(base, cst.Subscript):
            base = base.value
        name = dotted_name(base)
        if name is None:
            return False
        if name in known:
            return True
        last = name.rsplit(".", 1)[-1]
        if base is expr and _LOADERS_NAME.search(last):
            return False  # `for dl in loaders:` iterates loaders; `loaders[phase]` is one
        if LOADER_NAME.search(last):
            return True
        if base is expr and isinstance(expr, cst.Name) and name in self._fed_loader_params(expr):
            return True  # a loader a base class in another module hands this method
        if base is expr and isinstance(expr, cst.Name) and name in self._annotated_loader_params(
                expr):
            return True  # `def fit(self, net, train_iter: DataLoader):`
        # `def run(model, data): for x, y in data:` called as `run(model, train_loader)`.
        return isinstance(base, cst.Name) and (
            (follow_params and any(self._is_loader_like(arg, follow_params=False)
                                   for arg in self._arguments_for(base, name)))
            or self._item_of_loader_list(base, known))

    def _item_of_loader_list(self, name: cst.Name, bound: Collection[str]) -> bool:
        """Is ``name`` the target of an enclosing loop over a literal list or tuple of
        loaders (``for split in [head_loader, tail_loader]:``, also through a name bound to
        the list just before: ``loaders = [a_loader, b_loader]``)? Each item is a loader."""
        for loop in self.tree.enclosing_loops(name):
            if not (isinstance(loop, cst.For) and isinstance(loop.target, cst.Name)
                    and loop.target.value == name.value):
                continue
            items = loop.iter
            if isinstance(items, cst.Name):
                values = self._bindings_before(loop, items.value, deep=False)[:1]
                items = values[0] if values else items
            return (isinstance(items, (cst.List, cst.Tuple)) and bool(items.elements)
                    and all(not isinstance(e, cst.StarredElement)
                            and self._is_loader_like(e.value, follow_params=False, bound=bound)
                            for e in items.elements))
        return False

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
        source = self.loader_source(loop.iter)
        return source is not None and self._is_placed(source)

    def _is_placed(self, source: cst.BaseExpression) -> bool:
        """Was this loader prepared by Accelerate or Fabric (under any wrapper name), or is it
        a parameter some same-file caller passes a prepared loader for?"""
        if isinstance(source, cst.Call):
            return _call_name(source) in _PLACING_CALLS
        key = self._key_of(source)
        if key is None or not self._framework_placed:
            return False
        chain = self._key_chain(key)
        if any(k in self._framework_placed for k in chain):
            return True
        for k in chain:
            for arg in self._arguments_for(source, k):
                if isinstance(arg, cst.Call) and _call_name(arg) in _PLACING_CALLS:
                    return True
                arg_key = self._key_of(arg)
                if arg_key is not None and any(
                    a in self._framework_placed for a in self._key_chain(arg_key)
                ):
                    return True
        return False

    def _key_chain(self, key: str) -> list[str]:
        """``key`` and the names it wraps, innermost last (``pbar -> it -> train_loader``)."""
        wrapped = self._loader_facts[1]
        chain = [key]
        while chain[-1] in wrapped and wrapped[chain[-1]] not in chain:
            chain.append(wrapped[chain[-1]])
        return chain

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
            and _call_name(iterable) in PASS_THROUGH
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
        frozen = frozenset(self._propagate(loop.body, names))
        self._batch_names[loop] = frozen
        return frozen

    def _propagate(
        self, body: cst.CSTNode, names: set[str], *, next_ok: bool = False
    ) -> set[str]:
        """Add to ``names`` every name ``body`` binds from them (one pass, in source order)."""
        for node in self.tree.walk(body):
            if isinstance(node, cst.Assign) and self._derives(node.value, names, next_ok):
                for target in node.targets:
                    names.update(names_in(target.target))
            elif isinstance(node, cst.AnnAssign):
                if node.value is not None and self._derives(node.value, names, next_ok):
                    names.update(names_in(node.target))
            elif isinstance(node, cst.For) and self._derives(node.iter, names, next_ok):
                names.update(names_in(node.target))
        return names

    def _derives(
        self, expr: cst.BaseExpression, names: Iterable[str], next_ok: bool = False
    ) -> bool:
        """Does ``expr`` hand on batch data from ``names``? A model forward does not.

        ``next_ok``: ``next(it)`` over a loader is batch data too (inside a loop).
        """
        known = names if isinstance(names, (set, frozenset)) else set(names)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr)
            if name is not None and name in known:
                return True
            return isinstance(expr, cst.Attribute) and self._derives(expr.value, known, next_ok)
        if isinstance(expr, cst.Subscript):
            return self._derives(expr.value, known, next_ok)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self._derives(e.value, known, next_ok) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            # `{**batch, "labels": batch["input_ids"]}`: a dict of the batch's tensors; not
            # an entry copied as it is stored (`{"pixel_values": x.to(device)}`).
            return any(self._derives(e.value, known, next_ok) for e in expr.elements
                       if not (isinstance(e.value, cst.Call)
                               and transfer_method(e.value) in ("to", "cuda")))
        if isinstance(expr, cst.Call):
            if next_ok and expr in self._helper_draws():
                return True
            if (isinstance(expr.func, cst.Attribute) and isinstance(expr.func.value, cst.Name)
                    and expr.func.value.value == "self"
                    and self._host_method(expr, expr.func.attr.value)):
                # `self.convert_tensor_type(data["image"])`: a method that casts what it is
                # given on the host.
                return self._given_batch_alone(expr, known, next_ok)
            if isinstance(expr.func, cst.Attribute):
                return self._derives(expr.func.value, known, next_ok)
            if next_ok and _is_builtin_next(expr):
                return self.loader_source(expr.args[0].value) is not None
            if _call_name(expr) in _DATA_BUILDERS:
                return any(self._derives(a.value, known, next_ok) for a in expr.args)
            if isinstance(expr.func, cst.Name) and self._host_helper(expr.func.value):
                return self._given_batch_alone(expr, known, next_ok)
            return False
        if isinstance(expr, _COMPREHENSIONS):
            for_in: cst.CompFor | None = expr.for_in
            while for_in is not None:
                if self._derives(for_in.iter, known, next_ok):
                    return True
                for_in = for_in.inner_for_in
            return False
        if isinstance(expr, cst.BinaryOperation):
            return (self._derives(expr.left, known, next_ok)
                    or self._derives(expr.right, known, next_ok))
        if isinstance(expr, cst.Comparison):  # `(labels != pad_id)` is a host tensor too
            return self._derives(expr.left, known, next_ok)
        if isinstance(expr, cst.UnaryOperation):
            return self._derives(expr.expression, known, next_ok)
        if isinstance(expr, cst.IfExp):
            return (self._derives(expr.body, known, next_ok)
                    or self._derives(expr.orelse, known, next_ok))
        return False

    def _given_batch_alone(self, call: cst.Call, known: set[str] | frozenset[str],
                           next_ok: bool) -> bool:
        """Given the batch alone (constants aside): `get_transformations(igt)`, not
        `run(model, x)`, whose result may come from elsewhere."""
        derived = [self._derives(a.value, known, next_ok) for a in call.args]
        return any(derived) and all(
            d or isinstance(a.value, (cst.Integer, cst.Float, cst.SimpleString))
            or (isinstance(a.value, cst.Name) and a.value.value in ("True", "False", "None"))
            for a, d in zip(call.args, derived, strict=True))

    def _host_method(self, call: cst.Call, name: str) -> bool:
        """A method of the class around ``call``, defined in it once, that computes its
        results from its parameters on the host (as :meth:`_host_helper` for functions), or
        inherited from a project base in another module that hands them on cast on the host
        (``ModuleView.host_methods``)."""
        cls = self.tree.enclosing_class(call)
        if cls is None:
            return False
        methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)
                   and s.name.value == name]
        if not methods and self.project is not None:
            # Inherited from a project base in another module (the project model).
            return name in self.project.host_methods.get(self.tree.qualname(cls), ())
        return len(methods) == 1 and self._computes_on_host(methods[0], skip_first=True)

    def _host_helper(self, name: str) -> bool:
        """A module-level function of this file, the only one of its name, that computes its
        results from its parameters on the host: every ``return`` hands on data derived from
        them (views, arithmetic and tensor methods, as :meth:`_derives` reads them), and it
        moves nothing to a device (``def get_transformations(igt): R = igt[:, :3, :3]; ...
        return R.permute(0, 2, 1), ...``). What it returns from a batch is batch data still
        on the host."""
        functions = self.tree.functions_by_name.get(name, ())
        return (len(functions) == 1 and self.tree.parent(functions[0]) is self.tree.module
                and self._computes_on_host(functions[0], skip_first=False))

    def _computes_on_host(self, function: cst.FunctionDef, *, skip_first: bool) -> bool:
        """Every ``return`` of ``function`` hands on data derived from its parameters (the
        first, ``self``, left out of a method's), and it moves nothing to a device."""
        cached = self._host_helpers.get(function)
        if cached is not None:
            return cached
        self._host_helpers[function] = False  # a recursive helper is not followed
        params = [p.name.value for p in (*function.params.posonly_params,
                                         *function.params.params,
                                         *function.params.kwonly_params)]
        if skip_first:
            params = params[1:]
        returns = [node for node in self.tree.walk(function.body)
                   if isinstance(node, cst.Return)]
        moves = any(isinstance(node, cst.Call) and transfer_method(node) is not None
                    for node in self.tree.walk(function.body))
        found = False
        if params and returns and not moves and not function.decorators:
            names = self._propagate(function.body, set(params))
            found = all(ret.value is not None and self._derives(ret.value, names)
                        for ret in returns)
        self._host_helpers[function] = found
        return found

    def is_batch_data(self, expr: cst.BaseExpression, loop: cst.For) -> bool:
        """Does ``expr`` (inside ``loop``'s body) hold batch data from the loop's DataLoader?

        Comprehension variables count when the comprehension iterates batch data.
        """
        if not self.is_dataloader_loop(loop):
            return False
        names = set(self.batch_names(loop))
        comprehensions: list[_Comprehension] = []
        for anc in self.tree.ancestors(expr):
            if anc is loop:
                break
            if isinstance(anc, _COMPREHENSIONS):
                comprehensions.append(anc)
        self._add_comprehension_names(comprehensions, names)
        return self._derives(expr, names)

    def _add_comprehension_names(
        self, comprehensions: list[_Comprehension], names: set[str], next_ok: bool = False
    ) -> None:
        """Comprehension variables (innermost comprehension first in the list) that iterate
        batch data hold batch data."""
        for comprehension in reversed(comprehensions):
            for_in: cst.CompFor | None = comprehension.for_in
            while for_in is not None:
                if self._derives(for_in.iter, names, next_ok):
                    names.update(names_in(for_in.target))
                for_in = for_in.inner_for_in

    # -- host batches reaching a transfer -------------------------------------------------

    def is_steady(self, origin: BatchOrigin) -> bool:
        """Does the site draw batch after batch with nothing that makes the host wait anyway?

        Not steady: a loop that always ``break``s after its first batch, a loop over a few
        batches (``zip(range(3), loader)``, ``islice(loader, 2)``), and a loop that calls
        ``synchronize()`` every iteration (timing code): an asynchronous copy overlaps with
        nothing there.
        """
        site = origin.site
        if not isinstance(site, (cst.For, cst.While)):
            return True
        body = site.body.body if isinstance(site.body, cst.IndentedBlock) else ()
        last = body[-1] if body else None
        if isinstance(last, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Break) for small in last.body):
            return False
        if isinstance(site, cst.For) and _few_items(site.iter):
            return False
        return not any(
            isinstance(node, cst.Call) and _call_name(node) == "synchronize"
            for node in self.tree.walk(site.body)
        )

    def host_batch_origins(self, call: cst.Call) -> list[BatchOrigin]:
        """Where the receiver of ``call`` (a ``.to()`` / ``.cuda()``) gets DataLoader batch
        data from, when that data is still on the host; empty when it is none, or already on
        the device.

        Followed: ``for`` loops over a loader (through wrappers, generator expressions and
        iterator helpers), ``next(it)`` inside a ``for``/``while`` loop, generator
        expressions over a loader, and, up to a few calls deep, same-file helpers the batch
        is passed to (``to_device(batch, device)``), callbacks applied to it
        (``apply(batch, lambda t: t.cuda())``) and step functions an engine runs on a loader
        (``Engine(step)`` with ``engine.run(loader)``). Left out: loaders Accelerate/Fabric
        prepared, loaders over datasets built from device tensors, values moved earlier in
        the same iteration, and helper calls that pass a host device
        (``to_device(batch, "cpu")``).
        """
        if not isinstance(call.func, cst.Attribute):
            return []
        return list(dict.fromkeys(self._origins(call.func.value, call, 0, set())))

    def _origins(
        self,
        expr: cst.BaseExpression,
        transfer: cst.Call | None,
        hops: int,
        seen: set[tuple[cst.CSTNode, str]],
    ) -> list[BatchOrigin]:
        """Host batch origins of ``expr``: from the loops and generator expressions around it
        in its own function, else from the parameters it derives from, one call level out
        (``hops`` counts the levels; ``seen`` stops cycles through recursive helpers)."""
        if transfer is None and self.places_on_device(expr):
            return []
        at: cst.CSTNode = expr if transfer is None else transfer
        comprehensions: list[_Comprehension] = []
        scope: _Function | None = None
        child: cst.CSTNode = expr
        for anc in self.tree.ancestors(expr):
            if isinstance(anc, cst.ClassDef):
                break
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                scope = anc
                break
            if isinstance(anc, _COMPREHENSIONS):
                # Each item of a generator or a list, set or dict comprehension over a loader
                # (`[f(x.cuda()) for x, _ in loader]`) draws a batch.
                decided = self._comprehension_origin(anc, expr, comprehensions)
                if decided is not None:
                    return decided
                comprehensions.append(anc)
            elif isinstance(anc, (cst.For, cst.While)) and child is anc.body:
                decided = self._loop_origin(anc, expr, at, comprehensions)
                if decided is not None:
                    return decided
            child = anc
        if isinstance(scope, cst.FunctionDef) and scope in self._function_draws:
            decided = self._draw_origin(scope, expr, at, comprehensions)
            if decided is not None:
                return decided
        if hops >= _MAX_HOPS or scope is None:
            return []
        return self._param_origins(expr, scope, comprehensions, transfer, hops, seen)

    def _host_origin(self, site: cst.CSTNode, source: cst.BaseExpression) -> list[BatchOrigin]:
        if self._is_placed(source) or self._device_dataset(source):
            return []
        return [BatchOrigin(site, source)]

    def _comprehension_origin(
        self,
        comprehension: _Comprehension,
        expr: cst.BaseExpression,
        inner: list[_Comprehension],
    ) -> list[BatchOrigin] | None:
        """A generator or comprehension over a loader (``((x.cuda(), y) for x, y in
        loader)``) draws a batch per item: the origins of ``expr`` if it holds that batch,
        else None."""
        names: set[str] | None = None
        source: cst.BaseExpression | None = None
        for_in: cst.CompFor | None = comprehension.for_in
        while for_in is not None:
            if names is None:
                source = self.loader_source(for_in.iter)
                if source is not None:
                    names = set(names_in(for_in.target))
            elif self._derives(for_in.iter, names):
                names.update(names_in(for_in.target))
            for_in = for_in.inner_for_in
        if names is None or source is None:
            return None
        self._add_comprehension_names(inner, names)
        if not self._derives(expr, names):
            return None
        return self._host_origin(comprehension, source)

    def _loop_origin(
        self,
        loop: Loop,
        expr: cst.BaseExpression,
        at: cst.CSTNode,
        comprehensions: list[_Comprehension],
    ) -> list[BatchOrigin] | None:
        """The origins of ``expr`` if it holds this loop's batch, else None."""
        for source, group, next_ok in self._loop_groups(loop):
            names = set(group)
            self._add_comprehension_names(comprehensions, names, next_ok)
            if not self._derives(expr, names, next_ok):
                continue
            if self._moved_earlier(loop, at, expr) or any(
                self._moved_earlier(loop, at, iterated)
                for iterated in _comprehension_sources(expr, comprehensions)
            ):
                return []
            return self._host_origin(loop, source)
        return None

    def _loop_groups(self, loop: Loop) -> tuple[_Group, ...]:
        """The batch-holding names of a loop, per source: the loader it iterates, and the
        loader iterators it draws from with ``next()``."""
        cached = self._groups.get(loop)
        if cached is not None:
            return cached
        groups: list[_Group] = []
        if isinstance(loop, cst.For):
            source = self.loader_source(loop.iter)
            if source is not None:
                groups.append((source, self.batch_names(loop), False))
        draws = self._loader_draws.get(loop)
        if draws and self._streams_draws(loop):
            source = self._drawn_source(draws[0])
            if source is not None:
                names = self._propagate(loop.body, set(), next_ok=True)
                groups.append((source, frozenset(names), True))
        frozen = tuple(groups)
        self._groups[loop] = frozen
        return frozen

    def _streams_draws(self, loop: Loop) -> bool:
        """Does each pass of ``loop`` draw a new batch with the ``next()`` calls in it? Not an
        epoch loop that samples one batch beside its own loop over a loader (a preview, a
        fixed visualisation batch): batches stream through that inner loop instead."""
        return not any(
            isinstance(node, cst.For) and self.is_dataloader_loop(node)
            for node in self.tree.walk(loop.body)
        )

    def _drawn_source(self, call: cst.Call) -> cst.BaseExpression | None:
        """The loader a draw takes its batch from: ``next(it)`` over a loader, or a call of a
        same-file helper that returns what it draws (:meth:`_helper_draws`)."""
        if _is_builtin_next(call):
            return self.loader_source(call.args[0].value)
        return self._helper_draws().get(call)

    @cached_property
    def _loader_draws(self) -> dict[Loop, list[cst.Call]]:
        """Draws of a batch (``next(it)`` over a loader, a call of a helper that returns one),
        by each loop (in their function) around them."""
        draws: dict[Loop, list[cst.Call]] = {}
        calls = [*self.tree.calls_by_name.get("next", ()), *self._helper_draws()]
        for call in calls:
            if self._drawn_source(call) is None:
                continue
            for loop in self.tree.enclosing_loops(call):
                draws.setdefault(loop, []).append(call)
        return draws

    @cached_property
    def _stepped_draws(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """``next(it)`` over a loader outside any loop, by function, where the function is
        called once per pass of a loop elsewhere in the file: a step's batch fetch that
        restarts an exhausted iterator (``try: batch = next(self.train_iter)`` ``except
        StopIteration: self.train_iter = iter(self.train_loader)``), run by
        ``for step in range(n):``. A call from an epoch loop that streams its batches
        through an inner loop over a loader draws one batch per epoch and does not count."""
        found: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.tree.calls_by_name.get("next", ()):
            if (not _is_builtin_next(call) or self.tree.enclosing_loops(call)
                    or self.loader_source(call.args[0].value) is None):
                continue
            function = self.tree.enclosing_function(call)
            if function is not None:
                found.setdefault(function, []).append(call)
        return {
            function: draws for function, draws in found.items()
            if function.name.value not in ("__next__", "__iter__")
            and not any(isinstance(n, cst.Yield) for n in self.tree.walk(function))
            and any(
                any(self._streams_draws(loop) for loop in self.tree.enclosing_loops(caller))
                for caller in self.tree.calls_of(function)
            )
        }

    def _helper_draws(self) -> dict[cst.Call, cst.BaseExpression]:
        """Calls of same-file helpers that return the batch they draw (a function of
        :attr:`_stepped_draws` whose ``return`` hands on the drawn value), with the loader
        each draws from: ``x, y = self.get_batch()`` in a step loop holds a batch, as
        ``next(it)`` there would. A helper's own calls of other helpers are not followed."""
        if self._helper_draw_calls is not None:
            return self._helper_draw_calls
        self._helper_draw_calls = {}  # while the helpers' own bodies are read
        found: dict[cst.Call, cst.BaseExpression] = {}
        for function, draws in self._stepped_draws.items():
            source = self.loader_source(draws[0].args[0].value)
            if source is None:
                continue
            names = self._propagate(function.body, set(), next_ok=True)
            if not any(
                isinstance(node, cst.Return) and node.value is not None
                and self.tree.enclosing_function(node) is function
                and self._derives(node.value, names, True)
                for node in self.tree.walk(function.body)
            ):
                continue
            for call in self.tree.calls_of(function):
                found[call] = source
        self._helper_draw_calls = found
        return found

    @cached_property
    def _cycled_draws(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """``next(self.replay)`` outside any loop, by function, where ``self.replay`` holds an
        endless iterator over a loader (``self.replay = cycle(DataLoader(...))``): a method
        that draws from a cycle kept on the object runs once per training step."""
        cycled: set[str] = set()
        for call in self.tree.calls_by_name.get("cycle", ()):
            parent = self.tree.parent(call)
            inner = self._wrapped_arg(call)
            if not isinstance(parent, cst.Assign) or inner is None or not any(
                self._is_loader_like(source, follow_params=False)
                for source in self._sources(inner, follow_names=False)
            ):
                continue
            for target in parent.targets:
                if isinstance(target.target, cst.Attribute):
                    name = dotted_name(target.target)
                    if name is not None:
                        cycled.add(name)
        draws: dict[cst.FunctionDef, list[cst.Call]] = {}
        if not cycled:
            return draws
        for call in self.tree.calls_by_name.get("next", ()):
            if (
                not _is_builtin_next(call)
                or dotted_name(call.args[0].value) not in cycled
                or self.tree.enclosing_loops(call)
            ):
                continue
            function = self.tree.enclosing_function(call)
            if function is not None:
                draws.setdefault(function, []).append(call)
        return draws

    @cached_property
    def _function_draws(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """Functions that draw one batch each time they run, outside any loop of their own:
        from a cycle kept on the object, or as a step's fetch (:attr:`_stepped_draws`)."""
        return {**self._stepped_draws, **self._cycled_draws}

    def _draw_origin(
        self,
        function: cst.FunctionDef,
        expr: cst.BaseExpression,
        at: cst.CSTNode,
        comprehensions: list[_Comprehension],
    ) -> list[BatchOrigin] | None:
        """The origins of ``expr`` if it holds a batch the function draws once per run (see
        :attr:`_function_draws`), else None."""
        draws = self._function_draws.get(function)
        source = None if not draws else self.loader_source(draws[0].args[0].value)
        if source is None:
            return None
        names = self._propagate(function.body, set(), next_ok=True)
        self._add_comprehension_names(comprehensions, names, True)
        if not self._derives(expr, names, True):
            return None
        if self._moved_earlier(function, at, expr):
            return []
        return self._host_origin(function, source)

    def _moved_earlier(
        self, owner: Loop | cst.FunctionDef, at: cst.CSTNode, expr: cst.BaseExpression
    ) -> bool:
        """Was ``expr`` (or the value it is part of) moved to the device earlier in this loop
        iteration or function (``batch.x = batch.x.to(device)`` before ``batch.x.to(device)``)?
        """
        order, moves = self._block_moves(owner)
        if not moves:
            return False
        position = order.get(at)
        key = value_key(expr)
        if position is None or key is None:
            return False
        return any(
            moved_at < position
            and _covers(moved, key)
            and not self.tree.is_inside(at, node)
            and not self._exclusive_branches(node, at)
            for moved, moved_at, node in moves
        )

    def _exclusive_branches(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Do the two nodes sit in different branches of one ``if``/``elif``/``else``?"""
        below: dict[cst.CSTNode, cst.CSTNode] = {}
        child = first
        for anc in self.tree.ancestors(first):
            below[anc] = child
            child = anc
        child = second
        for anc in self.tree.ancestors(second):
            if anc in below:
                return isinstance(anc, cst.If) and below[anc] is not child
            child = anc
        return False

    def _block_moves(
        self, owner: Loop | cst.FunctionDef
    ) -> tuple[dict[cst.CSTNode, int], list[tuple[tuple[str, ...], int, cst.CSTNode]]]:
        """A loop's or function's nodes in source order, and the values its assignments move
        to the device (access path, position, assignment). One cached walk of the body."""
        cached = self._moves.get(owner)
        if cached is not None:
            return cached
        order: dict[cst.CSTNode, int] = {}
        moves: list[tuple[tuple[str, ...], int, cst.CSTNode]] = []
        for position, node in enumerate(self.tree.walk(owner.body)):
            order[node] = position
            if isinstance(node, cst.Assign):
                for target, value in self._assigned_pairs(node):
                    key = value_key(target)
                    if key is None:
                        continue
                    if self.places_on_device(value) or _fresh_host_copy(value):
                        moves.append((key, position, node))
                        continue
                    # `mix = sources[:, 0]` or `mix = sources.sum(1)` after `sources` was
                    # moved: a part of a device value is on the device too. Only a path known
                    # to be the same (`batch[key_a]` moved says nothing of `batch[key_b]`).
                    source = value_key(value)
                    if source is not None and any(_same_part(m, source) for m, _, _ in moves):
                        moves.append((key, position, node))
        self._moves[owner] = (order, moves)
        return order, moves

    def _assigned_pairs(
        self, node: cst.Assign
    ) -> Iterator[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(target, value) pairs, element by element for ``a, b = c, d``."""
        for target in node.targets:
            value = node.value
            if (
                isinstance(target.target, (cst.Tuple, cst.List))
                and isinstance(value, (cst.Tuple, cst.List))
                and len(target.target.elements) == len(value.elements)
            ):
                for t, v in zip(target.target.elements, value.elements, strict=True):
                    yield t.value, v.value
            else:
                yield target.target, value

    # -- helpers, callbacks and step functions --------------------------------------------

    def _param_origins(
        self,
        expr: cst.BaseExpression,
        scope: _Function,
        comprehensions: list[_Comprehension],
        transfer: cst.Call | None,
        hops: int,
        seen: set[tuple[cst.CSTNode, str]],
    ) -> list[BatchOrigin]:
        """Origins of ``expr`` through the parameters of its function or lambda: the
        arguments same-file callers pass, and the batches a callback is applied to."""
        if isinstance(scope, cst.Lambda):
            uses = self._lambda_use(scope)
            callers: list[cst.Call] = []
        else:
            callers, uses = self._callers_of(scope)
        hooked = self._hooked_params(scope)
        if not callers and not uses and not hooked:
            return []
        params = _data_params(scope)
        # The parameters themselves (`batch.to(device)`) need no walk; else one walk for all
        # of them together rules most functions out.
        anywhere = set(params)
        self._add_comprehension_names(comprehensions, anywhere)
        if not self._derives(expr, anywhere):
            anywhere = set(self._param_flow(scope, params))
            self._add_comprehension_names(comprehensions, anywhere)
            if not self._derives(expr, anywhere):
                return []
        origins: list[BatchOrigin] = []
        for param in params:
            if (scope, param) in seen:
                continue
            # The parameter itself first (`batch.to(device)`): no walk of the function.
            names = {param}
            self._add_comprehension_names(comprehensions, names)
            if not self._derives(expr, names):
                names = set(self._param_flow(scope, [param]))
                self._add_comprehension_names(comprehensions, names)
                if not self._derives(expr, names):
                    continue
            seen.add((scope, param))
            if param in hooked:
                # A base class in another module hands this method each batch of its loop.
                assert isinstance(scope, cst.FunctionDef)
                if not self._base_feeds_plain_batches(scope):
                    origins.extend(self._host_origin(scope, _param_name(scope, param)))
            assert not callers or isinstance(scope, cst.FunctionDef)
            for call in callers:
                assert isinstance(scope, cst.FunctionDef)
                arg = _argument_for(call, scope, param)
                if arg is None:
                    continue
                if hops == 0 and transfer is not None and self._passes_host_device(
                    transfer, scope, call
                ):
                    continue
                origins.extend(self._origins(arg, None, hops + 1, seen))
            for use in uses:
                origins.extend(self._callback_origins(scope, param, use, hops, seen))
        if (
            origins
            and transfer is not None
            and isinstance(scope, cst.FunctionDef)
            and self._moved_earlier(scope, transfer, expr)
        ):
            return []
        return origins

    def _annotated_loader_params(self, node: cst.CSTNode) -> tuple[str, ...]:
        """The parameters of the function around ``node`` annotated as one DataLoader
        (``train_iter: DataLoader``, ``Optional[DataLoader]``, ``DataLoader | None``), not as
        a collection of them (``list[DataLoader]``)."""
        function = self.tree.enclosing_function(node)
        if function is None:
            return ()
        cached = self._loader_annotations.get(function)
        if cached is None:
            params = function.params
            cached = tuple(
                param.name.value
                for param in (*params.posonly_params, *params.params, *params.kwonly_params)
                if param.annotation is not None
                and _annotates_loader(param.annotation.annotation))
            self._loader_annotations[function] = cached
        return cached

    def _fed_loader_params(self, node: cst.CSTNode) -> tuple[str, ...]:
        """The parameters of the method around ``node`` that a project base class in another
        module gives a loader (``self._predict(loader)``, from the project model)."""
        if self.project is None or not self.project.loader_params:
            return ()
        function = self.tree.enclosing_function(node)
        if function is None:
            return ()
        return self.project.loader_params.get(self.tree.qualname(function), ())

    def _hooked_params(self, scope: _Function) -> tuple[str, ...]:
        """The parameters of a method that a project base class in another module calls with
        each batch of its loader loop (from the project model), or that a framework outside
        the project hands each batch (BasicSR's ``feed_data(self, data)``: the first)."""
        if not isinstance(scope, cst.FunctionDef):
            return ()
        hooked: tuple[str, ...] = ()
        if self.project is not None and self.project.batch_params:
            hooked = self.project.batch_params.get(self.tree.qualname(scope), ())
        body = self.tree.parent(scope)
        if framework_batch_feed(scope.name.value, isinstance(self.tree.parent(body), cst.ClassDef)
                                if body is not None else False):
            # The batch is the first argument the caller passes: after the receiver, unless
            # the method is static.
            params = _positional_params(scope)
            static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                         for d in scope.decorators)
            batch = params[0 if static else 1:][:1]
            hooked = (*hooked, *(p for p in batch if p not in hooked))
        return hooked

    def _param_flow(self, scope: _Function, params: list[str]) -> frozenset[str]:
        """Names a function binds from the given parameters (the parameters included)."""
        if isinstance(scope, cst.Lambda):
            return frozenset(params)
        key = (scope, tuple(params))
        cached = self._param_names.get(key)
        if cached is None:
            cached = frozenset(self._propagate(scope.body, set(params)))
            self._param_names[key] = cached
        return cached

    def _passes_host_device(
        self, transfer: cst.Call, function: cst.FunctionDef, call: cst.Call
    ) -> bool:
        """``to_device(batch, "cpu")``: the helper's device parameter gets the host here."""
        device = device_argument(transfer)
        if not isinstance(device, cst.Name):
            return False
        arg = _argument_for(call, function, device.value)
        if arg is None:
            arg = _param_default(function, device.value)
        return arg is not None and self._device_kind(arg) in (
            DeviceTarget.HOST, DeviceTarget.OTHER_DEVICE
        )

    def _callers_of(self, scope: cst.FunctionDef) -> tuple[list[cst.Call], list[cst.Call]]:
        """Same-file calls of ``scope`` from outside it, and calls that pass it on as a
        callback. Kept per function: a file that calls ``forward`` in a thousand places
        would otherwise scan them all again for every parameter asked about."""
        known = self._callers.get(scope)
        if known is None:
            name = scope.name.value
            callers = [c for c in self.tree.calls_of(scope)
                       if not self.tree.is_inside(c, scope)
                       and self._visible(scope, c, attribute=isinstance(c.func, cst.Attribute))]
            uses = [c for c, attribute in self._callback_refs.get(name, ())
                    if not self.tree.is_inside(c, scope)
                    and self._visible(scope, c, attribute=attribute)]
            known = self._callers[scope] = (callers, uses)
        return known

    def _visible(self, function: cst.FunctionDef, at: cst.CSTNode, *, attribute: bool) -> bool:
        """Can a reference at ``at`` mean this definition? A module-level function can be
        named anywhere, a nested one only inside the function that defines it, and a method
        only as an attribute (``self.step``, ``trainer.step``). Tests that each define their
        own ``def step(engine, batch)`` stay apart."""
        for owner in self.tree.ancestors(function):
            if isinstance(owner, cst.ClassDef):
                return attribute
            if isinstance(owner, (cst.FunctionDef, cst.Lambda)):
                return not attribute and self.tree.is_inside(at, owner)
        return not attribute

    @cached_property
    def _callback_refs(self) -> dict[str, list[tuple[cst.Call, bool]]]:
        """Calls that take a same-file function as an argument (``map(to_gpu, batch)``,
        ``Engine(self.train_step)``), by the function's name, with whether the reference is
        an attribute. One pass over the call index."""
        functions = self.tree.functions_by_name
        refs: dict[str, list[tuple[cst.Call, bool]]] = {}
        for calls in self.tree.calls_by_name.values():
            for call in calls:
                for arg in call.args:
                    value = arg.value
                    name: str | None = None
                    if isinstance(value, cst.Name):
                        name = value.value
                    elif (
                        isinstance(value, cst.Attribute)
                        and isinstance(value.value, cst.Name)
                        and value.value.value in ("self", "cls")
                    ):
                        name = value.attr.value
                    if name is not None and name in functions:
                        refs.setdefault(name, []).append(
                            (call, isinstance(value, cst.Attribute))
                        )
        return refs

    def _lambda_use(self, function: cst.Lambda) -> list[cst.Call]:
        """The call a lambda is handed to as an argument, if it is one."""
        arg = self.tree.parent(function)
        call = None if arg is None else self.tree.parent(arg)
        return [call] if isinstance(arg, cst.Arg) and isinstance(call, cst.Call) else []

    def _callback_origins(
        self,
        function: _Function,
        param: str,
        use: cst.Call,
        hops: int,
        seen: set[tuple[cst.CSTNode, str]],
    ) -> list[BatchOrigin]:
        """Batches a call applies a callback to.

        Applied: ``apply_to(batch, fn)`` / ``map(fn, batch)`` / ``batch.apply(fn)`` hand the
        items of their other arguments (or receiver) to the callback's first parameter.
        Engine: ``trainer = Engine(step)`` and ``trainer.run(loader)`` hand each batch to the
        step function's batch parameter (named like ``batch``, else the second of two).
        """
        params = [p for p in _positional_params(function) if p not in ("self", "cls")]
        origins: list[BatchOrigin] = []
        if params and param == params[0]:
            own = function.name.value if isinstance(function, cst.FunctionDef) else None
            # Every other argument, the callback itself left out.
            others = [a.value for a in use.args
                      if a.value is not function
                      and (own is None or _last_part(a.value) != own)]
            if isinstance(use.func, cst.Attribute):
                others.append(use.func.value)
            for other in others:
                origins.extend(self._origins(other, None, hops + 1, seen))
        if param == self._step_batch_param(params):
            for run in self._engine_runs(use):
                source = self.loader_source(run.args[0].value)
                if source is not None:
                    origins.extend(self._host_origin(run, source))
        return origins

    @staticmethod
    def _step_batch_param(params: list[str]) -> str | None:
        for param in params:
            if _BATCH_PARAM.search(param):
                return param
        return params[1] if len(params) == 2 else None

    def _engine_runs(self, engine_call: cst.Call) -> list[cst.Call]:
        """``trainer.run(loader, ...)`` calls on the names ``engine_call`` is bound to."""
        parent = self.tree.parent(engine_call)
        if not isinstance(parent, cst.Assign):
            return []
        names = {name for target in parent.targets for name in names_in(target.target)}
        scope = self.tree.enclosing_function(engine_call)
        runs = []
        for run in self.tree.calls_by_name.get("run", ()):
            if not isinstance(run.func, cst.Attribute) or not run.args or run.args[0].keyword:
                continue
            name = dotted_name(run.func.value)
            # `trainer` is the same variable in its function (and the handlers nested in it);
            # `self.trainer` is file-wide.
            if name in names and (
                "." in name or scope is None or self.tree.is_inside(run, scope)
            ):
                runs.append(run)
        return runs

    # -- batches that already live on the device ------------------------------------------

    def _device_dataset(self, source: cst.BaseExpression) -> bool:
        """Is a DataLoader feeding ``source`` built over tensors already on the device?"""
        return any(self._dataset_on_device(call) for call in self._dataloader_calls_for(source))

    def _dataset_on_device(self, loader: cst.Call) -> bool:
        """``DataLoader(TensorDataset(X.to(device), y))``, or a dataset name bound to one
        earlier in the same function: its batches are sliced from device tensors."""
        cached = self._device_datasets.get(loader)
        if cached is None:
            dataset = None
            for arg in loader.args:
                if arg.keyword is not None and arg.keyword.value == "dataset":
                    dataset = arg.value
            if dataset is None and loader.args and loader.args[0].keyword is None:
                dataset = loader.args[0].value
            cached = dataset is not None and self._holds_device_data(dataset, 0)
            self._device_datasets[loader] = cached
        return cached

    def _holds_device_data(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Does ``expr`` hold tensors already on an accelerator? Names are looked up in the
        statements before them in their own function; datasets are built from their
        arguments; a same-file dataset class that moves data to the device holds it."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Name):
            return any(
                self._holds_device_data(value, depth + 1)
                for value in self._bindings_before(expr, expr.value, deep=True)
            )
        if isinstance(expr, cst.Subscript):
            return self._holds_device_data(expr.value, depth)
        if not isinstance(expr, cst.Call):
            return False
        method = transfer_method(expr)
        if method is not None:
            return method != "cpu" and self._moves_to_accelerator(expr)
        if any(
            arg.keyword is not None and arg.keyword.value == "device"
            and self._device_kind(arg.value).to_accelerator
            for arg in expr.args
        ):
            return True
        if isinstance(expr.func, cst.Attribute):
            # x.float(), x.view(...): the receiver's device.
            return self._holds_device_data(expr.func.value, depth)
        name = _call_name(expr)
        if name is not None and any(
            self._class_moves_to_device(cls) for cls in self.tree.classes_by_name.get(name, ())
        ):
            return True
        # TensorDataset(X, y), Subset(ds, idx), random_split(ds, ...): built from their args.
        return any(
            not arg.star and self._holds_device_data(arg.value, depth + 1) for arg in expr.args
        )

    def _bindings_before(
        self, node: cst.CSTNode, name: str, *, deep: bool
    ) -> list[cst.BaseExpression]:
        """Values assigned to ``name`` before ``node``'s statement, in the blocks around it up
        to its function, nearest first (latest first within a block).

        ``deep``: also assignments nested in earlier compound statements (``if`` branches).
        """
        values: list[cst.BaseExpression] = []
        child: cst.CSTNode = node
        for anc in self.tree.ancestors(node):
            if isinstance(anc, (cst.IndentedBlock, cst.Module)):
                positions, assigned = self._block_bindings(anc, deep)
                index = positions.get(child, len(anc.body))
                values.extend(value for at, value in reversed(assigned.get(name, ()))
                              if at < index)
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            child = anc
        return values

    def _block_bindings(
        self, block: cst.IndentedBlock | cst.Module, deep: bool
    ) -> tuple[dict[cst.CSTNode, int], dict[str, list[tuple[int, cst.BaseExpression]]]]:
        """For one block: each statement's index, and per plain name the values assigned to
        it with the index of the statement that holds the assignment, in source order. Built
        once per block, so that looking names up in a long module stays linear."""
        key = (block, deep)
        known = self._blocks.get(key)
        if known is not None:
            return known
        positions: dict[cst.CSTNode, int] = {}
        assigned: dict[str, list[tuple[int, cst.BaseExpression]]] = {}
        for index, statement in enumerate(block.body):
            positions.setdefault(statement, index)
            if isinstance(statement, cst.SimpleStatementLine):
                small: Iterable[cst.CSTNode] = statement.body
            elif deep:
                small = self.tree.walk(statement)
            else:
                continue
            for assign in small:
                if isinstance(assign, cst.Assign):
                    for target, value in self._assigned_pairs(assign):
                        if isinstance(target, cst.Name):
                            assigned.setdefault(target.value, []).append((index, value))
        self._blocks[key] = (positions, assigned)
        return positions, assigned

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

    def loaders_feeding_origins(self, origins: Iterable[BatchOrigin]) -> list[cst.Call]:
        """The ``DataLoader(...)`` calls behind the sources of batch origins, loaders over
        device-resident datasets left out (pinning device tensors fails).

        A ``for`` loop's own loader matches by name file-wide, as :meth:`loaders_feeding`
        does; the other origins (``next()`` draws, helpers, engines) only match a plain
        name bound in the same function (or at module level).
        """
        found: dict[cst.Call, None] = {}
        for origin in origins:
            site = origin.site
            file_wide = isinstance(site, cst.For) and self.loader_source(site.iter) is (
                origin.source
            )
            calls = self._dataloader_calls_for(origin.source, file_wide=file_wide)
            if isinstance(site, cst.FunctionDef):  # a method a base elsewhere feeds batches
                calls = [*calls, *self._loaders_handed_to_bases(site)]
            for call in calls:
                if not self._dataset_on_device(call):
                    found[call] = None
        return list(found)

    def _base_fed_makers(self, method: cst.FunctionDef) -> list[cst.FunctionDef]:
        """The methods of the class around ``method`` (one a project base class in another
        module calls with each batch of its loop) whose results that loop draws from (from
        the project model: ``training_prepare``); empty when one of them is not defined
        here, so what feeds the loop is not known."""
        if self.project is None or not self.project.batch_makers:
            return []
        names = self.project.batch_makers.get(self.tree.qualname(method), ())
        owner = self.tree.enclosing_class(method)
        if not names or owner is None:
            return []
        defined = {m.name.value: m for m in class_methods(owner)}
        if any(name not in defined for name in names):
            return []
        return [defined[name] for name in names]

    def _loaders_handed_to_bases(self, method: cst.FunctionDef) -> list[cst.Call]:
        """The ``DataLoader(...)`` calls those methods return (``def training_prepare(self,
        X): loader = DataLoader(X); return loader, net``): the loaders whose batches the
        base hands on."""
        makers = self._base_fed_makers(method)
        found: list[cst.Call] = []
        for call in self.dataloader_calls if makers else ():
            function = self.tree.enclosing_function(call)
            if function in makers and f"{function.name.value}()" in self.bindings(call):
                found.append(call)
        return found

    def _base_feeds_plain_batches(self, method: cst.FunctionDef) -> bool:
        """Do those methods return only loaders that batch the data themselves, which no
        worker pins: a list of batches (``test_loader = []`` then ``append``), or a class
        of this file named like a loader that is no DataLoader (``REPENLoader(X)``)?"""
        makers = self._base_fed_makers(method)
        if not makers or self._loaders_handed_to_bases(method):
            return False
        for maker in makers:
            loaders = [n for n in self._returned_names(maker) if LOADER_NAME.search(n)]
            if not loaders:
                return False
            anchor = maker.body
            for name in loaders:
                values = [a.value for a in self.tree.assignments_to(name, anchor)]
                if not values or not all(self._plain_batches_value(v) for v in values):
                    return False
        return True

    def _plain_batches_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, (cst.List, cst.ListComp)):
            return True
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
            return False
        name = value.func.value
        if self.project is not None and self.project.is_plain_loader(name):
            return True
        classes = self.tree.classes_by_name.get(name, ())
        return bool(classes) and LOADER_NAME.search(name) is not None and all(
            not any((dotted_name(b.value) or "").endswith("DataLoader") for b in c.bases)
            for c in classes)

    def loaders_passed(self, arg: cst.BaseExpression) -> list[cst.Call]:
        """The ``DataLoader(...)`` calls a call argument stands for (``DataLoader(ds)``
        itself, or a name bound to one in the same function or at module level), loaders
        over device-resident datasets left out."""
        if not self.dataloader_calls or not self._is_loader_like(arg, follow_params=False):
            return []
        return [call for call in self._dataloader_calls_for(arg)
                if not self._dataset_on_device(call)]

    def _dataloader_calls_for(
        self, source: cst.BaseExpression, *, file_wide: bool = False
    ) -> list[cst.Call]:
        """DataLoader calls bound to ``source``'s name (through wrapper names), or passed by
        a same-file caller for it when it is a parameter."""
        if isinstance(source, cst.Call) and self.is_dataloader_call(source):
            return [source]
        if not self.dataloader_calls:
            return []
        reaching = self._reaching_wrapped(source)
        if reaching is not None:
            # `loop = tqdm(enumerate(train_loader))`, later `loop = tqdm(enumerate(valid_loader))`:
            # the binding that reaches this use says which loader it wraps
            return self._dataloader_calls_for(reaching, file_wide=file_wide)
        key = self._key_of(source)
        if key is None:
            return []
        # (name, where it is used): a plain name only matches bindings in its own function.
        keys = [(k, source) for k in self._key_chain(key)]
        direct_args: set[cst.CSTNode] = set()
        # A parameter: what same-file callers pass for it, and, when that is a parameter of
        # the caller in turn, what its callers pass (`eval_metric(model, loader)` handing
        # its `loader` to `eval_acc`), a few levels up.
        todo = list(keys)
        for _ in range(_MAX_HOPS):
            found: list[tuple[str, cst.BaseExpression]] = []
            for k, at in todo:
                for arg in self._arguments_for(at, k):
                    if arg in direct_args:
                        continue
                    direct_args.add(arg)
                    name = dotted_name(arg)
                    if name is not None:
                        found.extend((a, arg) for a in self._key_chain(name))
            keys.extend(found)
            todo = found
            if not todo:
                break
        # Only a loader bound under one of the keys can match: ask the index, not every loader.
        index = self._loaders_by_key(file_wide)
        candidates = set(direct_args)
        for k, at in keys:
            if file_wide or "." in k or k.endswith("()"):
                candidates.update(index.get(k, ()))
            else:  # a plain name: bound in ``at``'s function or at module level (``_binds``)
                scoped = self._loaders_by_scope
                function = self.tree.enclosing_function(at)
                candidates.update(scoped.get((k, None), ()))
                if function is not None:
                    candidates.update(scoped.get((k, id(function)), ()))
        positions, loaders = self._loader_positions, self.dataloader_calls
        return [
            call
            for call in (loaders[i] for i in sorted(
                {positions[id(c)] for c in candidates if id(c) in positions}))
            if call in direct_args
            or any(self._binds(call, k, at, file_wide=file_wide) for k, at in keys)
        ]

    def _reaching_wrapped(self, source: cst.BaseExpression) -> cst.BaseExpression | None:
        """The loader expression a plain name's latest binding before this use wraps (``loop``
        of ``loop = tqdm(enumerate(valid_loader))`` -> ``valid_loader``), when the name wraps
        loaders at all; the file-wide table of wrapper names keeps only one per name."""
        if not isinstance(source, cst.Name) or source.value not in self._loader_facts[1]:
            return None
        values = self._bindings_before(source, source.value, deep=False)[:1]
        if not values or not isinstance(values[0], cst.Call):
            return None
        inner = self._wrapped_loader(values[0], self._loader_facts[0])
        return inner if inner is not None and inner is not source else None

    @cached_property
    def _loader_positions(self) -> dict[int, int]:
        """id of each of ``dataloader_calls`` -> its place in it (answers keep that order)."""
        return {id(call): i for i, call in enumerate(self.dataloader_calls)}

    def _loaders_by_key(self, file_wide: bool) -> dict[str, list[cst.Call]]:
        """The file's DataLoader calls by every key :meth:`_binds` can match them under."""
        known = self._loader_index.get(file_wide)
        if known is None:
            known = {}
            for call in self.dataloader_calls:
                keys = (self.bindings(call) if file_wide
                        else {bound for bound, _ in self._scoped_bindings(call)})
                for key in keys:
                    known.setdefault(key, []).append(call)
            self._loader_index[file_wide] = known
        return known

    @cached_property
    def _loaders_by_scope(self) -> dict[tuple[str, int | None], list[cst.Call]]:
        """The file's DataLoader calls by each plain name they are bound to and the id of
        the function that binds it (None: module level): a query for ``loader`` in one
        function need not try the loaders of the file's other functions."""
        known: dict[tuple[str, int | None], list[cst.Call]] = {}
        for call in self.dataloader_calls:
            for bound, scope in self._scoped_bindings(call):
                known.setdefault((bound, None if scope is None else id(scope)), []).append(call)
        return known

    def _binds(
        self, loader: cst.Call, key: str, at: cst.CSTNode, *, file_wide: bool = False
    ) -> bool:
        """Is ``loader`` bound to ``key`` as seen from ``at``? Attributes (``self.loader``)
        and factory results (``make_loader()``) are file-wide; a plain name is the same
        variable in the same function, or a module-level loader that ``at``'s function does
        not shadow with a parameter."""
        if file_wide:
            return key in self.bindings(loader)
        function = self.tree.enclosing_function(at)
        for bound, scope in self._scoped_bindings(loader):
            if bound != key:
                continue
            if "." in key:
                return True
            if key.endswith("()"):
                if isinstance(scope, cst.FunctionDef) and self._visible(
                    scope, at, attribute=False
                ):
                    return True
                continue
            if scope is function or (
                scope is None and (function is None or key not in _data_params(function))
            ):
                return True
        return False

    def _scoped_bindings(
        self, loader: cst.Call
    ) -> list[tuple[str, cst.FunctionDef | None]]:
        """:meth:`bindings` with the function each name is bound in (None: module level);
        for ``fn()`` the function that returns the loader, also by name (``loader =
        DataLoader(...)`` ... ``return loader``). Kept per loader: every loop asks."""
        known = self._loader_scopes.get(loader)
        if known is None:
            known = self._loader_scopes[loader] = self._scoped_bindings_uncached(loader)
        return known

    def _scoped_bindings_uncached(
        self, loader: cst.Call
    ) -> list[tuple[str, cst.FunctionDef | None]]:
        node: cst.CSTNode = loader
        parent = self.tree.parent(node)
        while isinstance(parent, (cst.DictElement, cst.Element, cst.Dict, cst.List, cst.Tuple,
                                  cst.Arg)):
            if isinstance(parent, cst.Arg):
                wrapper = self._wrapper_of(parent)
                if wrapper is None:
                    break
                parent = wrapper
            node = parent
            parent = self.tree.parent(node)
        function = self.tree.enclosing_function(loader)
        out: list[tuple[str, cst.FunctionDef | None]] = []
        targets: list[cst.BaseExpression] = []
        if isinstance(parent, cst.Assign):
            targets = [t.target for t in parent.targets]
        elif isinstance(parent, cst.AnnAssign):
            targets = [parent.target]
        for target in targets:
            out.extend((name, function) for name in names_in(target))
        returned = isinstance(parent, cst.Return) or (
            function is not None
            and bool({name for name, _ in out} & self._returned_names(function))
        )
        if returned and function is not None:
            out.append((f"{function.name.value}()", function))
            for call in self.tree.calls_of(function):
                call_parent = self.tree.parent(call)
                if isinstance(call_parent, cst.Assign) and self._visible(
                    function, call, attribute=isinstance(call.func, cst.Attribute)
                ):
                    caller = self.tree.enclosing_function(call)
                    for assigned in call_parent.targets:
                        out.extend((name, caller) for name in names_in(assigned.target))
        return out

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
        for call in self.tree.calls_of(function):
            position = index - 1 if is_method and isinstance(call.func, cst.Attribute) else index
            positional = [a for a in call.args if a.keyword is None and not a.star]
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == key:
                    yield arg.value
            if 0 <= position < len(positional):
                yield positional[position].value

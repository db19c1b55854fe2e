"""MEM010 factory-then-move: ``torch.zeros(...).cuda()`` builds on the host, then copies."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import libcst as cst

from memlint.analysis.dataflow import (
    DeviceTarget,
    device_argument,
    names_dtype,
    names_other_tensor,
)
from memlint.analysis.imports import ImportTable, dotted_name
from memlint.diagnostics import FixSafety
from memlint.edits import append_arg, has_star_args, keyword_arg
from memlint.rules.base import Fix, Invalid, Rule, Valid
from memlint.vocabulary import (
    DERIVING_FUNCTION_NAMES,
    DETERMINISTIC_FACTORIES,
    ELEMENTWISE_FUNCTION_NAMES,
    JOINING_FUNCTION_NAMES,
    LEGACY_TENSOR_TYPES,
    MASK_FUNCTION_NAMES,
    RANDOM_FACTORIES,
    STAGING_KEYWORDS,
)

# Every factory above takes its options keyword-only, so `*shape` only ever holds sizes or
# data: the call is still reported, and `device=` goes after the starred argument.
# `.to()` keywords that only matter for a copy and can be dropped with it.
_COPY_ONLY_KEYWORDS = frozenset({"non_blocking"})
# No-argument dtype casts between the factory and the move: `torch.tensor(x).float().cuda()`,
# and `detach()`, a no-op on a tensor just built. They are kept, and run on the device after
# the fix.
_CASTS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "short", "bool",
                    "byte", "char", "contiguous", "detach"})
# Shape-only views and copies between the factory and the move (`torch.arange(t).view(1, t)
# .expand(b, -1).to(x.device)`): the same values on either device, so they stay in place
# and run on the device after the fix. `expand` returns a broadcast view where the move
# returned a fresh tensor (an in-place write would now fail): no safe fix with it.
_SHAPE_OPS = frozenset({"view", "reshape", "unsqueeze", "squeeze", "flatten", "repeat",
                        "permute", "transpose", "t", "expand", "triu", "tril", "resize",
                        # given a tensor, they read only its shape: `torch.eye(4)
                        # .expand_as(igt).to(igt.device)`
                        "expand_as", "view_as", "reshape_as"})
# Mask builders given the factory's result (`torch.triu(torch.ones(n, n), diagonal=1)`): the
# same values on either device, so the fix moves the factory inside them.
_MASK_FUNCTIONS = frozenset(f"torch.{name}" for name in MASK_FUNCTION_NAMES)
_ALIASING_SHAPE_OPS = frozenset({"expand", "expand_as"})
# Wrappers that hand on the host tensor they are given: `nn.Parameter(torch.zeros(n)).cuda()`
# still builds on the host and copies. No fix: a moved Parameter is a plain tensor, so the
# author's intent is not clear from the line.
_HOST_WRAPPERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                            "torch.autograd.Variable", "torch.autograd.variable.Variable"})
# `.type(torch.FloatTensor)`: a legacy host tensor type; the cast must not run after the
# move (it would copy back to the host), so no fix is offered with it.
_HOST_TENSOR_TYPE = re.compile(r"^torch\.(Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte"
                               r"|Bool)Tensor$")
_CUDA_LITERAL = re.compile(r"""^[rRbB]?(['"])(cuda|mps|xpu)(:\d+)?\1$""")


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _method(call: cst.BaseExpression) -> str | None:
    """The method a call calls (``x.view(...)`` -> ``"view"``); None for anything else."""
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def _is_size(expr: cst.BaseExpression) -> bool:
    """An expression that can only be one size: an int literal (``1``), ``x.size(0)``,
    ``x.numel()``, ``len(x)`` or ``x.shape[0]``. A whole shape is not: a tuple (a gym space's
    or an array's ``.shape``) is data to a legacy constructor (``torch.Tensor((3,))`` holds
    the number 3)."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute):
            return (func.attr.value == "size" and len(expr.args) == 1) or (
                func.attr.value == "numel" and not expr.args)
        return isinstance(func, cst.Name) and func.value == "len"
    return False


# Factories whose positional arguments (or one shape tuple, or `size=`) are the sizes.
_SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "rand", "randn", "full"})


def _zero_sized(call: cst.Call, short: str) -> bool:
    """A factory given a literal ``0`` as a size after the first (``torch.zeros(bs, 0)``,
    ``torch.empty((*x.shape[:-1], 0))``, ``torch.empty(n, 0, c)``): a zero-width
    placeholder (graph-diffusion code's empty extra features), so the move copies nothing.
    An empty first dimension (``torch.zeros(0)``, ``torch.empty((0, d))``: an accumulator
    that rows are concatenated onto) is still reported, as earlier labels count it."""
    if short not in _SIZED_FACTORIES:
        return False
    positional = _positional(call)
    size = _keyword(call, "size")
    if size is not None:
        args: list[cst.BaseExpression | None] = [size.value]
    elif short == "full":  # `torch.full(size, fill_value)`
        args = [positional[0].value] if positional else []
    else:
        args = [None if a.star else a.value for a in positional]
    sizes: list[cst.BaseExpression | None] = []  # None: a starred part, any number of sizes
    for expr in args:
        if isinstance(expr, (cst.Tuple, cst.List)):
            sizes.extend(e.value if isinstance(e, cst.Element) else None
                         for e in expr.elements)
        else:
            sizes.append(expr)
    return any(isinstance(e, cst.Integer) and e.evaluated_value == 0 for e in sizes[1:])


def _is_torch_size(expr: cst.BaseExpression) -> bool:
    """A ``torch.Size``: ``x.size()`` (no dimension: numpy's and pandas' ``size`` is no
    method), also extended by a tuple (``x.size() + (n,)``, ``(b,) + x.size()``). A legacy
    constructor takes it for a shape, whatever its length."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _is_torch_size(expr.left) or _is_torch_size(expr.right)
    return (isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "size")


def _sized_legacy_constructor(call: cst.Call) -> bool:
    """``torch.Tensor(b, n)`` / ``torch.FloatTensor(*shape)`` / ``torch.FloatTensor(1)`` /
    ``torch.FloatTensor(x.size())``: sizes, no keyword. One plain argument counts only when
    it can only be a size or a ``torch.Size``: it may be data (``torch.FloatTensor(values)``)."""
    positional = _positional(call)
    if len(positional) != len(call.args) or any(a.star == "**" for a in call.args):
        return False
    if len(positional) != 1:
        return len(positional) >= 2
    return positional[0].star == "*" or (not positional[0].star and (
        _is_size(positional[0].value) or _is_torch_size(positional[0].value)))


# What `_factory_chain` names a tensor constructor given a Python range (its message differs).
_RANGE = "range"


def _range_data(call: cst.Call) -> bool:
    """``torch.LongTensor(list(range(n)))``, ``torch.tensor(range(a, b), dtype=torch.long)``:
    a constructor whose only data is a Python range, what ``torch.arange`` builds without
    a list of Python ints in between."""
    positional = _positional(call)
    if len(positional) != 1 or positional[0].star or any(
            a.keyword is not None and a.keyword.value != "dtype" for a in call.args):
        return False
    value = positional[0].value
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
            and value.func.value == "list" and len(value.args) == 1):
        value = value.args[0].value
    return (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
            and value.func.value == "range" and 1 <= len(value.args) <= 3
            and not any(a.star or a.keyword is not None for a in value.args))


def _adds_dimensions(expr: cst.BaseExpression) -> bool:
    """``x[None, :]``, ``x[:, None]``, ``x[..., None]``: an index made only of ``None``, full
    slices and ``...``, a view that adds dimensions (like ``unsqueeze``)."""
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    adds = False
    for element in expr.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            if index.lower is not None or index.upper is not None or index.step is not None:
                return False
        elif not isinstance(index, cst.Index):
            return False
        elif isinstance(index.value, cst.Name) and index.value.value == "None":
            adds = True
        elif not isinstance(index.value, cst.Ellipsis):
            return False
    return adds


def _slices(expr: cst.Subscript) -> bool:
    """``x[:k]``, ``x[a:b, ::2]``: an index made only of slices (some bounded), a part of a
    tensor the factory drew or filled whole on the host."""
    return bool(expr.slice) and all(isinstance(e.slice, cst.Slice) for e in expr.slice)


def _is_cast_or_reshape(call: cst.Call, imports: ImportTable) -> bool:
    """A no-argument dtype cast, ``.type()`` to a dtype or host tensor type, or a shape op
    (also given its sizes starred: ``.expand(*x.size()[:-1])``, shape only still)."""
    method = _method(call)
    if method in _CASTS:
        return not call.args
    if method == "type":
        return _type_cast_target(call, imports) is not None
    if method == "to":  # `.to(torch.bool)`, `.to(dtype=torch.bool)`: a cast, not a move
        return (len(call.args) == 1 and not call.args[0].star
                and (call.args[0].keyword is None or call.args[0].keyword.value == "dtype")
                and names_dtype(call.args[0].value, imports))
    if method == "requires_grad_":  # `torch.ones(n).requires_grad_(True).to(device)`
        return len(call.args) <= 1 and not any(a.star for a in call.args)
    return method in _SHAPE_OPS and not any(a.star == "**" for a in call.args)


# Elementwise methods and torch functions whose result, given only constants besides the
# tensor, is fixed by the factory: `torch.zeros(b, 1).eq(1)`, `torch.zeros(n).normal_(0,
# 0.01)`, `torch.log2(torch.arange(2, k + 2).float())`. Computed on the host and then
# copied, they could as well run on the device; no fix is offered (the line changes shape).
_CONSTANT_METHODS = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "pow", "neg", "abs",
    "log", "log2", "exp", "sqrt", "clamp", "fill_", "zero_", "normal_", "uniform_",
    "bernoulli_", "random_", "exponential_", "add_", "sub_", "mul_", "div_", "clamp_",
    "round", "floor", "ceil", "round_", "floor_", "ceil_",
})
# In-place initializers: they fill the tensor they are called on from scalars (a fill value,
# a distribution's parameters) and return it, so the result is the factory's host tensor.
_INITIALIZERS = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_", "exponential_"})
# A factory's arguments (parentheses nested up to two deep), for the trigger pattern: not
# where one of its own arguments places the result (`device=`, `out=`, `pin_memory=`,
# `generator=`, or `**options` that may hold one), which the rule leaves alone.
_FACTORY_ARGS = (
    rb"\((?:(?!(?:(?<=\()|(?<=,))\s*(?:(?:device|out|pin_memory|generator)\s*=(?!=)|\*\*))"
    rb"[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
)
# The methods a chain from a factory to its move may call, for the trigger pattern.
_CHAIN_METHODS = (
    rb"(?:float|double|half|bfloat16|long|int|short|bool|byte|char|contiguous|detach"
    rb"|view|reshape|unsqueeze|squeeze|flatten|repeat|permute|transpose|t|expand|type|resize"
    rb"|expand_as|view_as|reshape_as"
    rb"|triu|tril|requires_grad_|eq|ne|lt|le|gt|ge|add|sub|mul|div|pow|neg|abs|log|log2"
    rb"|exp|sqrt|clamp|fill_|zero_|normal_|uniform_|bernoulli_|random_|exponential_|add_"
    rb"|sub_|mul_|div_|clamp_|round|floor|ceil|round_|floor_|ceil_)"
)
_CONSTANT_FUNCTIONS = frozenset(f"torch.{name}" for name in (
    ELEMENTWISE_FUNCTION_NAMES | DERIVING_FUNCTION_NAMES))
_JOINING_FUNCTIONS = frozenset(f"torch.{name}" for name in JOINING_FUNCTION_NAMES)
_CONSTANT_NAMES = frozenset({"True", "False", "None"})
_CONSTANT_ATTRIBUTES = frozenset({"inf", "nan", "pi", "e"})


def _constant(expr: cst.BaseExpression) -> bool:
    """A number, a boolean, ``-1``, ``float("-inf")``, ``np.inf``, ``math.pi``."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _constant(expr.expression)
    if isinstance(expr, cst.Name):
        return expr.value in _CONSTANT_NAMES
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _CONSTANT_ATTRIBUTES and isinstance(expr.value, cst.Name)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        return (expr.func.value == "float" and len(expr.args) == 1
                and isinstance(expr.args[0].value, cst.SimpleString))
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        # `math.log(max_period)`: the math module computes Python numbers only
        return isinstance(expr.func.value, cst.Name) and expr.func.value.value == "math"
    return False


def _host_number(expr: cst.BaseExpression) -> bool:
    """A number on the host: a constant, or a size read off a tensor (``x.size(-1)``,
    ``x.shape[2]``, ``len(x)``), which is a Python int whatever the tensor's device."""
    if isinstance(expr, cst.UnaryOperation):
        return _host_number(expr.expression)
    return _constant(expr) or _is_size(expr)


_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide)


def _variable(expr: cst.BaseExpression) -> bool:
    """A plain name or a dotted attribute of one (``rate``, ``self.dropout_rate``)."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value not in _CONSTANT_NAMES


def _number_call(expr: cst.BaseExpression) -> bool:
    """``int(x)``, ``float(x)``, ``round(x)``: a Python number, whatever ``x`` is."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)
            and expr.func.value in ("int", "float", "round") and len(expr.args) == 1)


def _scalar_arithmetic(expr: cst.BaseExpression) -> bool:
    """Arithmetic of a number with a variable or a number (``1 - self.dropout_rate``): a
    scalar such as a keep probability, never a tensor the factory could not meet."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITHMETIC)):
        return False
    return ((_constant(expr.left) and (_constant(expr.right) or _variable(expr.right)))
            or (_constant(expr.right) and _variable(expr.left)))


def _constant_transform_input(
        expr: cst.BaseExpression, imports: ImportTable,
        scalar: Callable[[cst.BaseExpression], bool] | None = None,
) -> cst.BaseExpression | None:
    """The tensor an elementwise operation with only constants besides it is applied to
    (``t == 1``, ``t.eq(1)``, ``t.normal_(0, 0.01)``, ``torch.log2(t)``)."""
    if isinstance(expr, cst.Comparison):
        if len(expr.comparisons) != 1:
            return None
        comparator = expr.comparisons[0].comparator
        if _constant(comparator):
            return expr.left
        if _uniform_draw(expr.left, imports) and isinstance(comparator, (cst.Name, cst.Attribute)):
            # `torch.rand(shape) < keep_prob`: a Bernoulli mask. A sized host draw can only
            # meet a number or another host tensor (a device tensor would not run), so the
            # mask is the host draw's, whatever the threshold is named.
            return expr.left
        return None
    if isinstance(expr, cst.BinaryOperation):
        if _host_number(expr.right):
            return expr.left
        if _host_number(expr.left):
            return expr.right
        # arithmetic with a number the function computed (`keep_prob = 1 - rate`, then
        # `torch.rand(shape) + keep_prob`): a scalar, so the values are the factory's
        if scalar is not None and isinstance(expr.operator, _ARITHMETIC):
            if scalar(expr.right):
                return expr.left
            if scalar(expr.left):
                return expr.right
        return None
    if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
        return None
    if imports.qualified_name(expr.func) in _CONSTANT_FUNCTIONS:
        if not expr.args:
            return None
        first, *rest = expr.args
        if first.keyword is None and all(_constant(a.value) for a in rest):
            return first.value
        return None
    if _method(expr) in _INITIALIZERS:
        # `torch.zeros(n, d).fill_(self.pad_idx)`: an in-place initializer hands back its
        # own receiver, still on the host, whatever scalar it is given.
        assert isinstance(expr.func, cst.Attribute)
        return expr.func.value
    if _method(expr) in _CONSTANT_METHODS:
        assert isinstance(expr.func, cst.Attribute)
        return expr.func.value if all(
            _constant(a.value) or (scalar is not None and scalar(a.value)) for a in expr.args
        ) else None
    return None


def _uniform_draw(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    """``torch.rand(shape)`` / ``torch.randn(shape)`` given sizes: a host draw."""
    return (isinstance(expr, cst.Call) and bool(expr.args)
            and imports.qualified_name(expr.func) in ("torch.rand", "torch.randn"))


def _mask_input(call: cst.Call, imports: ImportTable) -> cst.Call | None:
    """The factory call a mask builder (``torch.triu(torch.ones(n, n), 1)``) is given."""
    if imports.qualified_name(call.func) not in _MASK_FUNCTIONS:
        return None
    first = call.args[0] if call.args else None
    if first is None or first.keyword is not None or first.star:
        return None
    return first.value if isinstance(first.value, cst.Call) else None


def _type_cast_target(call: cst.Call, imports: ImportTable) -> str | None:
    """``"dtype"`` for ``.type(torch.long)`` / ``.type(x.dtype)``, ``"tensor type"`` for
    ``.type(torch.ByteTensor)``; None for anything else (``torch.cuda.FloatTensor`` and
    strings move the tensor themselves or may)."""
    if len(call.args) != 1 or call.args[0].star or (
            call.args[0].keyword is not None and call.args[0].keyword.value != "dtype"):
        return None
    value = call.args[0].value
    if names_dtype(value, imports):
        return "dtype"
    qualified = imports.qualified_name(value)
    if qualified is not None and _HOST_TENSOR_TYPE.match(qualified):
        return "tensor type"
    return None


def _host_wrapped(call: cst.Call, imports: ImportTable) -> cst.Call | None:
    """The call a host wrapper (``nn.Parameter(...)``, ``Variable(...)``) is given."""
    if imports.qualified_name(call.func) not in _HOST_WRAPPERS:
        return None
    first = call.args[0] if call.args else None
    if first is None or first.keyword is not None or first.star:
        return None
    return first.value if isinstance(first.value, cst.Call) else None


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None]


def _normal_sized(call: cst.Call) -> bool:
    """``torch.normal(mean, std, size)`` (or ``size=``): the form that takes numbers and
    allocates on the host. Given tensors (``torch.normal(mu, sigma)``), it draws on their
    device."""
    return len(_positional(call)) >= 3 or _keyword(call, "size") is not None


def _single_assignment(
    statement: cst.BaseStatement,
) -> tuple[str, cst.BaseExpression] | None:
    """``(name, value)`` for a statement that only binds one plain or dotted name."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    key = dotted_name(small.targets[0].target)
    return None if key is None else (key, small.value)


def _with_numbers(value: cst.BaseExpression) -> cst.Call | None:
    """The call a binding's value is, also under arithmetic with number literals alone
    (``1 - torch.eye(n)``, ``torch.rand(n) * 2 - 1``), which keeps a host tensor on the
    host."""
    while True:
        if isinstance(value, cst.Call):
            return value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.left, _NUMBER):
            value = value.right
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.right, _NUMBER):
            value = value.left
        else:
            return None


_NUMBER = (cst.Integer, cst.Float)


def _self_move(statement: cst.BaseStatement) -> tuple[str, cst.Call] | None:
    """``(key, move)`` for ``key = key.cuda(...)`` / ``key = key.to(...)``."""
    assigned = _single_assignment(statement)
    if assigned is None:
        return None
    key, move = assigned
    if not (isinstance(move, cst.Call) and isinstance(move.func, cst.Attribute)
            and move.func.attr.value in ("cuda", "to")
            and dotted_name(move.func.value) == key):
        return None
    return key, move


def _returned_move(statement: cst.BaseStatement, key: str) -> cst.Call | None:
    """The move of ``key`` in ``return h.cuda(), c.cuda()`` (a dtype cast may follow it:
    ``h.cuda().half()``), when every element of what is returned is such a move."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Return)
            and statement.body[0].value is not None):
        return None
    value = statement.body[0].value
    elements = ([e.value for e in value.elements] if isinstance(value, cst.Tuple)
                else [value])
    found: cst.Call | None = None
    for element in elements:
        while (isinstance(element, cst.Call) and isinstance(element.func, cst.Attribute)
               and element.func.attr.value in _RETURN_CASTS and not element.args):
            element = element.func.value  # `.half()`, `.float()` after the move
        if not (isinstance(element, cst.Call) and isinstance(element.func, cst.Attribute)
                and element.func.attr.value in ("cuda", "to")):
            return None
        if dotted_name(element.func.value) == key:
            found = element
    return found


def _rebinding_move(statement: cst.BaseStatement, key: str) -> cst.Call | None:
    """The move in ``key = key.cuda(...)`` / ``key = key.to(...)``, written as the statement
    itself or in the leading run of such moves of an ``if`` without ``else`` (``if use_cuda:
    a = a.cuda(); b = b.cuda()``); or, under such an ``if``, a ``return`` of moves only
    (``if self.use_cuda: return h.cuda(), c.cuda()``), also one per branch of an ``if``
    nested there (``.cuda()`` in one, ``.cuda().half()`` in the other)."""
    body: Sequence[cst.BaseStatement] = (statement,)
    if isinstance(statement, cst.If) and statement.orelse is None and isinstance(
            statement.body, cst.IndentedBlock):
        body = statement.body.body
        if body and (returned := _returned_move(body[0], key)) is not None:
            return returned
        if len(body) == 1 and (nested := _branch_returns(body[0], key)) is not None:
            return nested
    for inner in body:
        moved = _self_move(inner)
        if moved is None:
            return None
        if moved[0] == key:
            return moved[1]
    return None


def _branch_returns(statement: cst.BaseStatement, key: str) -> cst.Call | None:
    """``if training: return h.cuda(), c.cuda()`` / ``else: return h.cuda().half(), ...``:
    the move of ``key`` when both branches return moves of it."""
    if not (isinstance(statement, cst.If) and isinstance(statement.orelse, cst.Else)
            and isinstance(statement.body, cst.IndentedBlock)
            and isinstance(statement.orelse.body, cst.IndentedBlock)
            and statement.body.body and statement.orelse.body.body):
        return None
    first = _returned_move(statement.body.body[0], key)
    second = _returned_move(statement.orelse.body.body[0], key)
    return first if first is not None and second is not None else None


# Casts that may follow a move in a returned value: `h.cuda().half()`.
_RETURN_CASTS = frozenset({"half", "float", "double", "bfloat16", "long", "int", "bool"})
# The moves off the host: `.cuda()`, `.to(device)`, `.type_as(tensor)`.
_MOVES = ("cuda", "to", "type_as", "type")
_CUDA_TENSOR_TYPE = re.compile(r"^torch\.cuda\.\w*Tensor$")


def _string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


class FactoryThenMove(Rule):
    """
    ## What it does
    Flags a tensor factory whose result is immediately moved to an accelerator:
    ``torch.zeros(n).cuda()``, ``torch.arange(n).to(device)``, ``torch.randn(b, d).to("cuda")``,
    ``torch.arange(n).type(torch.cuda.FloatTensor)`` (a cast to a CUDA tensor type; no fix),
    also with dtype casts or shape ops in between: ``torch.arange(n).float().to(device)``,
    ``torch.arange(t).view(1, t).expand(b, -1).to(x.device)``, also shaped after another tensor
    (``torch.eye(4).expand_as(T).to(T.device)``, ``view_as``, ``reshape_as``: only its shape is
    read), ``.type()`` to a dtype or a host tensor type (``torch.zeros(k,
    b).type(torch.ByteTensor).to(device)``), and with starred sizes:
    ``torch.zeros(*shape).to(device)``, ``torch.randn(*x.shape).cuda()``, and causal masks built
    from a factory (``torch.triu(torch.ones(n, n), 1).to(device)``, also with a dtype
    ``.to(torch.bool)`` on the way and a chain split over several lines), shape functions given one
    (``torch.repeat_interleave(torch.arange(n).unsqueeze(0), k, dim=0).to(device)``,
    ``torch.unsqueeze``, ``torch.reshape``, ``torch.tile`` ...), and Bernoulli masks drawn on the
    host (``(torch.rand(shape) < keep_prob).to(x)``, whatever the threshold is named; reported
    without a fix). Window functions are factories too
    (``torch.hann_window(n_fft).to(audio.device)``); ``torch.normal(mean, std)`` given tensors draws
    on their device and is left alone, unless the function built the mean with a factory on the host
    (``mean = torch.zeros(b, d)``; reported without a fix). A factory wrapped in
    ``nn.Parameter(...)`` or ``Variable(...)`` and then moved is reported too
    (``nn.Parameter(torch.ones(1)).to(device)``), without a fix. A device kept in a mapping under a
    device key counts as a device (``.to(state["device"])``), and so does a mapping given by ``**``
    whose every binding holds one (``.to(**self.tpdv)`` after ``self.tpdv =
    dict(dtype=torch.float32, device=device)``, or a parameter named ``tpdv``, the MAPPO
    family's name for it; reported without a fix). A ``.detach()`` on the way
    changes nothing (``torch.arange(n).detach().to(device)``), nor does an index that only adds
    dimensions, made of ``None``, ``:`` and ``...`` (``torch.arange(n)[None, :].to(device)``, a view
    like ``unsqueeze``). A slice on the way is reported without a fix
    (``torch.randperm(n)[:k].to(device)``: the whole permutation is drawn on the host). A
    ``.requires_grad_()`` on the way is reported too
    (``torch.ones(n).requires_grad_(True).to(device)``: the moved tensor is not even the leaf that
    was meant to collect gradients). So are elementwise steps given only constants on the way,
    without a fix: a comparison or arithmetic with a number (``(torch.ones(b, n) == 1).to(device)``,
    ``(1 - torch.eye(n)).cuda()``) or with a name the function binds to arithmetic of a number
    (``keep_prob = 1 - self.rate`` then ``(torch.rand(shape) + keep_prob).to(x.device)``) or
    with a parameter that defaults to a number (``(offset + torch.arange(n)).to(x.device)`` in
    ``def forward(self, x, offset=0)``), such a
    method (``torch.zeros(b, 1).eq(1)``, an in-place fill ``torch.zeros(d, k).normal_(0, 0.01)``,
    rounding and clamping after arithmetic: ``(torch.rand(s) * 4).round() .clamp_(0, 3).cuda()``) or
    a torch function of the tensor (``torch.log2(torch.arange(2, k + 2).float()).to(device)``,
    a mask drawn from it: ``torch.bernoulli(torch.full(shape, 0.8)).to(device)``, a diagonal:
    ``torch.diagflat(torch.ones(d)).to(device)``), shape ops given their sizes starred
    (``torch.arange(n).expand(*x.size()[:-1]).cuda()``), or host factories' tensors joined
    (``torch.cat([torch.ones(b, 1), torch.zeros(b, t)], dim=1).to(device)``, also
    ``hstack``/``vstack``; no fix). Host
    numbers count as numbers: a ``math`` function's value, a size read off a tensor and a name bound
    to one (the sinusoidal timestep embedding ``torch.exp(-math.log(max_period) * torch.arange(half)
    / half).to(t.device)`` with ``half = dim // 2``, lengths ``(torch.ones(b) *
    x.size(-1)).to(x.device)``): the values are the factory's alone, so they can be computed where
    they are used. A step that reads other data (``torch.arange(k) < lengths``) is left alone.

    Also flagged, without a fix: a factory bound to a name that the very next statement
    moves by rebinding the name, also under an ``if`` (``h = torch.zeros(b, d)`` then
    ``if use_cuda: h = h.cuda()``; also a factory under arithmetic with numbers:
    ``m = 1 - torch.eye(n)``, and a move after shape ops: ``m.repeat(b, 1, 1).to(d)``),
    and a run of such bindings moved together by the
    statements after them (``a = torch.rand(n, 1)``, ``b = torch.rand(1, m)``, then ``if
    use_cuda: a = a.cuda(); b = b.cuda()``), also when that ``if`` returns them moved
    (``if self.use_cuda: return h.cuda(), c.cuda()``, also from both branches of an ``if``
    nested there, a cast such as ``.half()`` after the move). A statement in between that
    is not another factory binding (a fill such as ``h[0] = 1``), a move bound to another
    name, or an ``else`` branch leaves it alone. So is a factory bound to a name that the very next
    statement of a function moves where it uses it, when that is the tensor's only use there
    (``support = torch.linspace(a, b, n).view(1, -1)`` then ``q = (support.type_as(dist) *
    dist).sum(-1)``, also through a shape function: ``positions =
    torch.tile(torch.arange(n), (b, 1))`` then ``emb(positions.to(x.device))``); a name
    read anywhere else in the function is left alone. A
    ``.type_as(tensor)`` moves to that tensor's device like ``.to(tensor)`` (reported
    without a fix). A legacy typed constructor given sizes
    (``torch.Tensor(b, n).to(device)``, ``torch.FloatTensor(*shape).cuda()``) allocates on
    the host like ``torch.empty`` and is reported too, without a fix (it takes no
    ``device=``); given one argument it may be data and is left alone, unless that argument
    can only be a size (``torch.FloatTensor(1).cuda()``, ``torch.Tensor(x.size(0))``,
    ``len(x)``, ``x.shape[0]``) or a ``torch.Size`` (``torch.FloatTensor(x.size())``, also
    extended by a tuple: ``x.size() + (n,)``).

    ## Why is this bad?
    The tensor is allocated and filled in host memory, then copied to the device and the host
    copy thrown away: an extra allocation, a host-to-device transfer and, for ``.cuda()``, a
    synchronisation point, every time the line runs. Creating it where it is used costs one
    device allocation and a fill kernel.

    Data-copying constructors (``torch.tensor``, ``torch.as_tensor``, ``torch.from_numpy``)
    are not reported: their data is a Python list, a NumPy array or a host tensor, so even
    ``torch.tensor(data, device="cuda")`` builds the tensor on the host and copies it over.
    Passing ``device=`` there saves no transfer. A constructor whose only data is a Python
    range (``torch.LongTensor(list(range(n)))``, ``torch.tensor(range(a, b))``) is the
    exception: ``torch.arange(..., device=...)`` builds it on the device with no copy.

    ## Example
    ```python
    mask = torch.zeros(n, n).cuda()
    positions = torch.arange(seq_len).to(device)
    ```

    ## How to fix
    Pass the device to the factory:
    ```python
    mask = torch.zeros(n, n, device="cuda")
    positions = torch.arange(seq_len, device=device)
    ```
    A move to another tensor (``torch.zeros(n).to(lprobs)``: its device and dtype) is
    reported too, with no fix offered (``lprobs.new_zeros(n)`` or ``device=lprobs.device,
    dtype=lprobs.dtype`` keep both). ``.to(dtype)`` and ``.to(*args)`` are not reported, nor
    are factories
    given ``out=``, ``device=``, ``pin_memory=`` or a ``generator=``, nor factories given
    ``**kwargs`` (which may hold any of those). ``*_like`` factories are not reported either:
    they inherit the device of their argument, which is often already the target. Nor is a
    factory given a literal ``0`` as a size after the first (``torch.zeros(bs,
    0).type_as(X)``, ``torch.empty((*shape, 0)).to(device)``): a zero-width placeholder,
    the move copies nothing (an empty first dimension, ``torch.zeros(0).to(device)``, an
    accumulator grown by concatenation, is still reported).

    ## Fix safety
    Safe for deterministic factories (``zeros``, ``ones``, ``full``, ``empty``, ``arange``,
    ``eye``, ``linspace``, ``logspace``) moved with ``.cuda()`` or
    ``.to(<device>)``. Unsafe for random factories (``rand``, ``randn``, ``randint``,
    ``randperm``, ``normal``): on the device they draw from the device's generator and produce
    different numbers. Unsafe when the factory has ``requires_grad=True`` or a
    ``.requires_grad_()`` follows it: the moved tensor was a non-leaf, the directly created
    one is a leaf. Casts and shape ops (``view``,
    ``reshape``, ``unsqueeze``, ``repeat``, ``triu`` ...) between the factory and the move stay
    where they are and run on the device; they give the same values on either device. Unsafe with
    ``expand`` in between: the move returned a fresh tensor, the fixed line a broadcast view
    that in-place writes reject. A
    starred size argument is kept as it is and ``device=`` is added after it
    (``torch.zeros(*shape, device=device)``): the factories take every option keyword-only, so
    ``*shape`` cannot already carry a device. No fix is offered when the move also changes the
    dtype or passes arguments the factory cannot take.
    """

    code = "MEM010"
    name = "factory-then-move"
    message = (
        "tensor is created on the CPU and then copied to the device; pass `device=` to "
        "`torch.{factory}` instead"
    )
    legacy_message = (
        "tensor is created on the CPU by the legacy `torch.{factory}` constructor and then "
        "copied to the device; use `torch.empty(..., dtype=..., device=...)` instead"
    )
    range_message = (
        "a Python range is copied into a CPU tensor and then to the device; use "
        "`torch.arange(..., device=...)` instead"
    )
    # `).to(`, a chain continued on the next line (`)\n        .to(device)`), or a name moved
    # by the statement after the one that built it (`h = h.cuda()`).
    triggers = (".cuda(", ".to(", ".type_as(", "torch.cuda.")
    # A factory call (parentheses nested up to two deep), maybe dtype casts, maybe closed by
    # a wrapper's other arguments (`nn.Parameter(torch.zeros(n), requires_grad=False)`), then
    # a move.
    function_local = True
    trigger_pattern = (
        rb"(?:zeros|ones|full|empty|arange|eye|linspace|logspace|rand\w*|normal"
        rb"|hann_window|hamming_window|blackman_window|bartlett_window|kaiser_window"
        rb"|FloatTensor|DoubleTensor|HalfTensor|BFloat16Tensor|LongTensor|IntTensor"
        rb"|ShortTensor|CharTensor|ByteTensor|BoolTensor|Tensor)"
        + _FACTORY_ARGS +
        rb"(?:[\s\\]*\." + _CHAIN_METHODS + rb"\((?:[^()]|\([^()]*\))*\)|\[[^\[\]\n]*\])*"
        # Closed by a wrapper's other arguments, or by a comparison or arithmetic with a
        # constant inside parentheses (`(torch.ones(n) == 1).to(device)`), maybe with more
        # elementwise steps after it (`(torch.rand(s) * 4).round().clamp_(0, 3).cuda()`).
        rb"(?:\s*(?:[,=!<>*/+-](?:[^()]|\([^()]*\))*)?\)"
        rb"(?:[\s\\]*\." + _CHAIN_METHODS + rb"\((?:[^()]|\([^()]*\))*\))*)?"
        rb"[\s\\]*\.(?:cuda\(|to\(|type_as\(|type\(\s*torch\.cuda\.)"
        # Or the statement that built it ends there and the next one (maybe under an `if`)
        # rebinds a name to its own move: `h = torch.zeros(b, d)` / `h = h.cuda()`.
        rb"|(?:zeros|ones|full|empty|arange|eye|linspace|logspace|rand\w*|normal"
        rb"|hann_window|hamming_window|blackman_window|bartlett_window|kaiser_window"
        rb"|FloatTensor|DoubleTensor|HalfTensor|BFloat16Tensor|LongTensor|IntTensor"
        rb"|ShortTensor|CharTensor|ByteTensor|BoolTensor|Tensor)"
        + _FACTORY_ARGS +
        rb"(?:\s*\.\w+\((?:[^()]|\([^()]*\))*\))*\)?[ \t]*(?:#[^\n]*)?\r?\n"
        rb"(?:[ \t]*if\b[^\n]*:[ \t]*\r?\n)?[ \t]*([\w.]+)[ \t]*=[ \t]*\1\.(?:cuda|to)\("
        # Or returned moved under one or two `if`s: `if self.use_cuda:` / `return h.cuda(),
        # c.cuda()`.
        rb"|(?:zeros|ones|full|empty|arange|eye|linspace|logspace|rand\w*|normal"
        rb"|hann_window|hamming_window|blackman_window|bartlett_window|kaiser_window"
        rb"|FloatTensor|DoubleTensor|HalfTensor|BFloat16Tensor|LongTensor|IntTensor"
        rb"|ShortTensor|CharTensor|ByteTensor|BoolTensor|Tensor)"
        + _FACTORY_ARGS +
        rb"(?:\s*\.\w+\((?:[^()]|\([^()]*\))*\))*\)?[ \t]*(?:#[^\n]*)?\r?\n"
        rb"(?:[ \t]*if\b[^\n]*:[ \t]*\r?\n){1,2}[ \t]*return\b[^\n]*\w\.(?:cuda|to)\("
        # Or a name bound to a factory that the next statement (after blank or comment lines)
        # moves where it uses it: `support = torch.linspace(a, b, n)` / `q =
        # (support.type_as(dist) * dist).sum()`.
        rb"|(?:zeros|ones|full|empty|arange|eye|linspace|logspace|rand\w*|normal"
        rb"|hann_window|hamming_window|blackman_window|bartlett_window|kaiser_window)"
        + _FACTORY_ARGS +
        # (maybe closed by a shape function's other arguments: `positions =
        # torch.tile(torch.arange(n), (b, 1))`, the closing parenthesis on its own line)
        rb"(?:\s*,(?:[^()]|\([^()]*\))*\))?"
        rb"(?:\s*\.\w+\((?:[^()]|\([^()]*\))*\))*[ \t]*(?:#[^\n]*)?\r?\n"
        # (moved as it is, or after shape ops: `mask = m.repeat(b, 1, 1).to(x.device)`)
        rb"(?:[ \t]*(?:#[^\n]*)?\r?\n)*[^\n]*[\w)]\.(?:cuda|to|type_as)\("
    )
    # The same chain in the code (a docstring's example does not count).
    code_gate = ("fact:factory-move",)
    fix_safety = FixSafety.SAFE

    valid = (
        # In-place arithmetic with data (`add_(batch)`) is no initializer: the values come
        # from the host batch, which has to be copied anyway.
        Valid("""
            import torch
            def accumulate(batch, device):
                return torch.zeros(batch.size(0)).add_(batch).to(device)
        """),
        # An empty placeholder (a literal zero size) holds no data: the move copies nothing.
        Valid("""
            import torch
            def extra_features(X, E):
                y = torch.zeros(X.size(0), 0).type_as(X)
                edge_attr = torch.zeros((*E.shape[:-1], 0)).type_as(E)
                out = torch.empty(len(X), 0, E.size(-1)).to(X.device)
                return y, edge_attr, out
            """),
        # Data joined with a factory's tensor, a mask drawn on the device, tensors stacked
        # from data: nothing a factory alone fixes.
        Valid(
            """
            import torch
            def pad(data, labels, x, b, device):
                padded = torch.cat([data, torch.zeros(b)]).to(device)
                drop = torch.bernoulli(torch.full(labels.shape, 0.8, device=device))
                pair = torch.stack([x, x]).to(device)
                return padded, drop, pair
            """),
        # `torch.normal(mean, std)` given tensors draws on their device: no host tensor.
        Valid(
            """
            import torch
            def perturb(mu, var, device):
                return torch.normal(mu.repeat(4, 1), torch.sqrt(var)).unsqueeze(1).to(device)
            """
        ),
        # The host tensor is read again after the statement that moves it: it is kept.
        Valid(
            """
            import torch
            def gather(q, n, device):
                idx = torch.arange(n)
                out = q[idx.to(device)]
                return out, idx
            def cast(n):
                return torch.arange(n).type_as(torch.FloatTensor())
            """
        ),
        # A mapping without a device key only casts.
        Valid("""
            import torch
            class Policy:
                def __init__(self):
                    self.tpdv = dict(dtype=torch.float32)
                def init_hidden(self, n):
                    return torch.zeros(n, 64).to(**self.tpdv)
        """),
        # An index tensor selects by data the function holds: not a part of the factory's
        # result that could be drawn on the device instead.
        Valid("""
            import torch
            picked = torch.randperm(n)[index].cuda()
        """),
        Valid("""
            import torch
            mask = torch.zeros(n, n, device="cuda")
            half = torch.ones(n).to(torch.float16)
            cast = torch.ones(n).to(self.dtype)
            typed = torch.ones(n).to(compute_type)
            staged = torch.empty(n, pin_memory=True).cuda(non_blocking=True)
            torch.zeros(n, out=buf).cuda()
            host = torch.ones(n).to("cpu")
            like = torch.zeros_like(x).cuda()
            moved = torch.zeros(n).float().cpu().cuda()
            ids = torch.tensor([1, 2, 3]).cuda()
            labels = torch.tensor(targets).long().to(device)
            arr = torch.as_tensor(batch["mask"]).to(device, non_blocking=True)
            img = torch.from_numpy(frame).float().cuda()
            named = torch.zeros(n).type("torch.cuda.LongTensor").cuda()
            weight = torch.nn.Parameter(torch.zeros(n, device=device)).to(device)
            opts = torch.zeros(*shape, **factory_kwargs).cuda()
            pinned = torch.empty(*shape, pin_memory=True).to(device, non_blocking=True)
            cast = torch.zeros(*shape).to(*dtype_args)
            causal = torch.triu(torch.ones(n, n, device=device), diagonal=1).to(torch.bool)
            masked = torch.triu(scores, diagonal=1).to(device)
            flags = torch.ones(n).to(dtype=torch.bool)
        """),
        # Split over statements: filled on the host first, moved under another name, cast,
        # placed by the factory, or moved only in one branch of an `if`/`else`.
        Valid("""
            import torch
            table = torch.zeros(n)
            table[0] = 1
            table = table.cuda()
            base = torch.ones(n)
            moved = base.cuda()
            half = torch.ones(n)
            half = half.to(torch.float16)
            placed = torch.zeros(n, device=device)
            placed = placed.to(device)
            either = torch.zeros(n)
            if use_cuda:
                either = either.cuda()
            else:
                either = either.double()
        """),
        # A run broken by a read of the host tensor, a move of the tensor under an `if`
        # after a statement that is no move, and legacy constructors given one argument
        # (maybe data) or `**` options.
        Valid("""
            import torch
            noise = torch.rand(n, 1)
            scaled = torch.ones(1, m) * noise.sum()
            noise = noise.cuda()
            scaled = scaled.cuda()
            first = torch.zeros(n)
            if use_cuda:
                print("moving")
                first = first.cuda()
            ids = torch.LongTensor(keep).to(weight.device)
            sized = torch.FloatTensor(n).cuda()
            shaped = torch.Tensor(b, n, **factory_kwargs).cuda()
        """),
        # An elementwise step that reads other data (a host tensor, a variable) between the
        # factory and the move: the values are not the factory's alone.
        Valid("""
            import torch
            lengths_mask = (torch.arange(k) < lengths).to(device)
            shifted = torch.zeros(k).add(offsets).to(device)
            scaled = (torch.ones(n) * scale).cuda()
        """),
        Valid(
            # The host tensor is returned beside a value computed from it: it is kept.
            """
            import torch


            def init_hidden(self, bsz):
                h = torch.zeros(1, bsz, self.hidden)
                if self.use_cuda:
                    return h.cuda(), h.sum()
                return h
            """
        ),
    )
    invalid = (
        # Shaped after another tensor: expand_as reads only igt's shape (no safe fix: expand
        # returns a broadcast view); view_as gives a fresh tensor's view, fixable.
        Invalid(
            """
            import torch
            def transform_error(igt, est):
                eye = torch.eye(4).expand_as(igt).to(igt.device)
                ones = torch.ones(16).view_as(est).cuda()
                return eye, ones
            """,
            lines=(4, 5),
            fixed="""
            import torch
            def transform_error(igt, est):
                eye = torch.eye(4, device=igt.device).expand_as(igt)
                ones = torch.ones(16, device="cuda").view_as(est)
                return eye, ones
            """,
        ),
        # A zero that is no size (`full`'s fill value, `arange`'s start) still allocates
        # data on the host; an empty first dimension (an accumulator) stays reported.
        Invalid(
            """
            import torch
            def placeholders(x, n):
                pad = torch.full((n, 1), 0).type_as(x)
                idx = torch.arange(0, n).to(x.device)
                acc = torch.empty((0, 4096)).to(x.device)
                return pad, idx, acc
            """,
            lines=(4, 5, 6),
            fixed="""
            import torch
            def placeholders(x, n):
                pad = torch.full((n, 1), 0).type_as(x)
                idx = torch.arange(0, n, device=x.device)
                acc = torch.empty((0, 4096), device=x.device)
                return pad, idx, acc
            """,
        ),
        # Constant arithmetic, then rounding and clamping: all the factory's own values.
        Invalid(
            """
            import torch
            dummy_gt = (torch.rand((2, 1, 64, 64)) * 4).round().clamp_(0, 3).cuda().long()
            """,
            lines=(3,),
        ),
        # A project class named like a DataLoader that is none may hand out device tensors
        # (cellbender's batches come back `.to(device=self.device)`): its batch's device is
        # no proof of the host.
        Invalid(
            """
            import torch
            class DataLoader:
                def __init__(self, data, device):
                    self.data, self.device = data, device
                def __iter__(self):
                    for chunk in self.data:
                        yield chunk.to(device=self.device)
            def posterior(model, data, device):
                for batch in DataLoader(data, device):
                    counts = torch.arange(10).to(batch.device)
                    model(batch, counts)
            """,
            lines=(11,),
            fixed="""
            import torch
            class DataLoader:
                def __init__(self, data, device):
                    self.data, self.device = data, device
                def __iter__(self):
                    for chunk in self.data:
                        yield chunk.to(device=self.device)
            def posterior(model, data, device):
                for batch in DataLoader(data, device):
                    counts = torch.arange(10, device=batch.device)
                    model(batch, counts)
            """,
        ),
        # A shape function given the factory's result: the same values on either device, so
        # the fix moves the device into the factory.
        Invalid(
            """
            import torch
            def cos_embed(tau, n_cos):
                integers = torch.repeat_interleave(
                    torch.arange(0, n_cos).unsqueeze(dim=0),
                    repeats=tau.shape[-1],
                    dim=0,
                ).to(tau.device)
                return torch.cos(tau.unsqueeze(-1) * integers)
            """,
            lines=(4,),
            fixed="""
            import torch
            def cos_embed(tau, n_cos):
                integers = torch.repeat_interleave(
                    torch.arange(0, n_cos, device=tau.device).unsqueeze(dim=0),
                    repeats=tau.shape[-1],
                    dim=0,
                )
                return torch.cos(tau.unsqueeze(-1) * integers)
            """,
        ),
        # One test of a module pins `device` to the CPU; the others get theirs from pytest
        # (a parameter no code in the file passes), so their `device` is still a device.
        Invalid(
            """
            import torch
            def test_norm(name, device):
                if name == "cs":
                    device = torch.device("cpu")
                return device
            def test_adjoint(device):
                x = torch.ones(1, 5, 5).to(device)
                return x
            """,
            lines=(8,),
            fixed="""
            import torch
            def test_norm(name, device):
                if name == "cs":
                    device = torch.device("cpu")
                return device
            def test_adjoint(device):
                x = torch.ones(1, 5, 5, device=device)
                return x
            """,
        ),
        # A window function is a factory too (it takes `device=`): an STFT window built on
        # the host and copied on every call.
        Invalid(
            """
            import torch
            def spectrogram(audio, n_fft):
                window = torch.hann_window(n_fft).to(audio.device)
                return torch.stft(audio, n_fft, window=window, return_complex=True)
            """,
            lines=(4,),
            fixed="""
            import torch
            def spectrogram(audio, n_fft):
                window = torch.hann_window(n_fft, device=audio.device)
                return torch.stft(audio, n_fft, window=window, return_complex=True)
            """,
        ),
        # `torch.normal(mean, std)` drawn around a mean the function built on the host: a host
        # tensor too. No fix: given tensors, `normal` takes no `device=`.
        Invalid(
            """
            import torch
            def sample(b, d, device):
                mean = torch.zeros(b, d)
                std = mean + 1
                return torch.normal(mean=mean, std=std).to(device)
            """,
            lines=(6,),
        ),
        # Elementwise steps given only constants (a comparison, arithmetic, an in-place
        # random fill, a torch function of the tensor) between the factory and the move:
        # the result is the factory's alone and could be computed on the device. No fix.
        Invalid(
            """
            import torch
            x = torch.zeros(size=(b, 1)).eq(1).to(device)
            mask = (torch.ones(b, *shape) == 1).to(device)
            tp = 1.0 / torch.log2(torch.arange(2, k + 2).type(torch.FloatTensor)).to(device)
            w = torch.zeros(3, 4).normal_(0, 0.01).to(device).requires_grad_()
            inverse = (1 - torch.eye(n)).cuda()
            """,
            lines=(3, 4, 5, 6, 7),
        ),
        # A cast to a CUDA tensor type copies to the GPU as `.cuda()` does; a shape op given
        # its sizes starred is still only a view. No fix for the cast.
        Invalid(
            """
            import torch
            def integral_op(hm_1d, emb):
                hm = hm_1d * torch.arange(hm_1d.shape[-1]).type(torch.cuda.FloatTensor)
                mask = torch.arange(emb.size(-2)).expand(*emb.size()[:-1]).cuda()
                host = torch.arange(hm_1d.shape[-1]).type(torch.FloatTensor)
                return hm, mask, host
            """,
            lines=(4, 5),
            fixed="""
            import torch
            def integral_op(hm_1d, emb):
                hm = hm_1d * torch.arange(hm_1d.shape[-1]).type(torch.cuda.FloatTensor)
                mask = torch.arange(emb.size(-2), device="cuda").expand(*emb.size()[:-1])
                host = torch.arange(hm_1d.shape[-1]).type(torch.FloatTensor)
                return hm, mask, host
            """,
        ),
        # The deprecated `resize` is a shape op too (CORAL's ones vector).
        Invalid(
            """
            import torch
            def coral(data, n, device):
                return torch.ones(n).resize(1, n).to(device=device) @ data
            """,
            lines=(4,),
            fixed="""
            import torch
            def coral(data, n, device):
                return torch.ones(n, device=device).resize(1, n) @ data
            """,
        ),
        # The cast alone in a file, written over two lines.
        Invalid(
            """
            import torch
            def integral_op(hm_1d):
                return hm_1d * torch.cuda.comm.broadcast(torch.arange(hm_1d.shape[-1]).type(
                    torch.cuda.FloatTensor), devices=[hm_1d.device.index])[0]
            """,
            lines=(4,),
        ),
        # A mask drawn from a factory's probabilities, a diagonal built from one, and host
        # factories' tensors joined along a dimension: host tensors copied. No fix.
        Invalid(
            """
            import torch
            def masks(labels, rep, b, t, x):
                drop = torch.bernoulli(torch.full(labels.shape, 0.8)).bool().to(x.device)
                offset = torch.diagflat(torch.ones(rep.size(1))).unsqueeze(0).to(x.device)
                alpha = torch.cat([torch.ones([b, 1]), torch.zeros([b, t])[:, :-1] + 1e-7],
                                  dim=1).to(x.device)
                mask = torch.hstack([torch.ones(b), torch.zeros(t)]).bool().to(x.device)
                return drop, offset, alpha, mask
            """,
            lines=(4, 5, 6, 8),
        ),
        # Arithmetic with a number the function computed from a number (a keep
        # probability) is the factory's alone too: a dropout mask. No fix.
        Invalid(
            """
            import torch
            def sparse_dropout(self, x, noise_shape):
                keep_prob = 1 - self.dropout_rate
                random_tensor = (torch.rand(noise_shape) + keep_prob).to(x.device)
                return torch.floor(random_tensor).bool()
            """,
            lines=(5,),
        ),
        # So is a parameter that defaults to a number: a caller's value meets a host tensor,
        # so it is on the host too (a learned positional embedding's offset). No fix.
        Invalid(
            """
            import torch
            def positions(x, offset=0):
                return (offset + torch.arange(x.size(0))).to(x.device)
            """,
            lines=(4,),
        ),
        # Host numbers are numbers too: a `math` function's value, a size read off a tensor
        # and a name bound to one (the sinusoidal timestep embedding of diffusion models,
        # lengths filled with a tensor's size, a power the function fixed). No fix.
        Invalid(
            """
            import math
            import torch
            def timestep_embedding(timesteps, dim, max_period=10000):
                half = dim // 2
                freqs = torch.exp(
                    -math.log(max_period) * torch.arange(start=0, end=half) / half
                ).to(device=timesteps.device)
                return timesteps[:, None].float() * freqs[None]

            def lengths(c):
                return (torch.ones(c.size(0)) * c.size(-1)).to(c.device)

            def quadratic_steps(t_T, t_0, N, device):
                t_order = 2
                steps = torch.linspace(t_T ** 0.5, t_0 ** 0.5, N + 1).pow(t_order).to(device)
                return steps
            """,
            lines=(6, 12, 16),
        ),
        # A Bernoulli mask: a sized uniform draw on the host compared with a threshold,
        # whatever it is named (a device tensor could not meet it), then moved. No fix.
        Invalid(
            """
            import torch
            def forward(self, x):
                gamma = self._compute_gamma(x)
                mask = (torch.rand(x.shape[0], *x.shape[2:]) < gamma).to(x)
                return x * mask[:, None]
            """,
            lines=(5,),
        ),
        # `.type_as(tensor)` moves, on the chain or where the next statement uses the factory
        # bound just before (its only use).
        Invalid(
            """
            import torch as t
            def act(q_dist, v_min, v_max, atom_num):
                support = t.linspace(v_min, v_max, atom_num).view(1, -1)

                # the expected value of each action
                q_value = t.sum(support.type_as(q_dist) * q_dist, dim=-1)
                offsets = t.arange(atom_num).type_as(q_value)
                return q_value + offsets
            """,
            lines=(4, 8),
        ),
        # A Python range copied into a tensor (pykg2vec's evaluator, once per test triple) is a
        # host `arange` with a list of ints in between.
        Invalid(
            """
            import torch
            def rank_tails(config, h, r):
                entities = torch.LongTensor(list(range(config.tot_entity))).to(config.device)
                offsets = torch.tensor(range(1, 9), dtype=torch.long).cuda()
                return entities, offsets
            """,
            lines=(4, 5),
        ),
        # The tensor given to `.type_as()` may be a view of one (pywick's Dice loss), and
        # the chain may go on over backslash-continued lines (neuralhydrology's sampling).
        Invalid(
            """
            import torch
            def dice(output, weights=None):
                if weights is None:
                    weights = torch.ones(output.size(1)).type_as(output.detach())
                return weights
            def sample(p_sub, pis):
                mask = torch.zeros(p_sub.shape, dtype=torch.bool) \\
                    .to(device=p_sub.device) \\
                    .scatter_(2, pis.unsqueeze(2), True)
                return mask
            """,
            lines=(5, 8),
            fixed="""
            import torch
            def dice(output, weights=None):
                if weights is None:
                    weights = torch.ones(output.size(1)).type_as(output.detach())
                return weights
            def sample(p_sub, pis):
                mask = torch.zeros(p_sub.shape, dtype=torch.bool, device=p_sub.device) \\
                    .scatter_(2, pis.unsqueeze(2), True)
                return mask
            """,
        ),
        # The same with the factory inside a shape function, its closing parenthesis on a
        # line of its own (rectools' inverse positions).
        Invalid(
            """
            import torch
            def add_positions(self, sessions, batch_size, n):
                positions = torch.tile(
                    torch.arange(n - 1, -1, -1), (batch_size, 1)
                )  # [batch_size, n]
                sessions += self.pos_emb(positions.to(sessions.device))
                return sessions
            """,
            lines=(5,),
        ),
        # `requires_grad_()` before the move: the moved tensor is a non-leaf copy (unsafe fix:
        # the fixed tensor is the leaf).
        Invalid(
            """
            import torch
            scale = torch.ones(width).requires_grad_(True).to(device)
            """,
            lines=(3,),
            fixed="""
            import torch
            scale = torch.ones(width, device=device).requires_grad_(True)
            """,
        ),
        # An index of only `None`, `:` and `...` adds dimensions, a view like `unsqueeze`.
        Invalid(
            """
            import torch
            grid = torch.arange(num + 1)[None, :].to(x.device)
            knots = torch.linspace(-1, 1, num)[:, None].float().cuda()
            """,
            lines=(3, 4),
            fixed="""
            import torch
            grid = torch.arange(num + 1, device=x.device)[None, :]
            knots = torch.linspace(-1, 1, num, device="cuda")[:, None].float()
            """,
        ),
        # Causal masks: a mask builder or a dtype `.to()` between the factory and the move,
        # and a chain written over several lines inside parentheses.
        Invalid(
            """
            import torch
            causal = torch.triu(torch.ones(n, n), diagonal=1).to(device)
            future = torch.tril(torch.ones(n, n)).to(dtype=torch.bool).to(device)
            upper = torch.ones(n, n).triu(1).cuda()
            index = (
                torch.arange(length)
                .unsqueeze(0)
                .repeat(batch, 1)
                .to(values.device)
            )
            """,
            lines=(3, 4, 5, 7),
            fixed="""
            import torch
            causal = torch.triu(torch.ones(n, n, device=device), diagonal=1)
            future = torch.tril(torch.ones(n, n, device=device)).to(dtype=torch.bool)
            upper = torch.ones(n, n, device="cuda").triu(1)
            index = (
                torch.arange(length, device=values.device)
                .unsqueeze(0)
                .repeat(batch, 1)
            )
            """,
        ),
        Invalid(
            """
            import torch
            mask = torch.zeros(n, n).cuda()
            pos = torch.arange(seq_len).to(device)
            ids = torch.arange(3).cuda(1)
            noise = torch.randn(b, d).to(device=self.device, non_blocking=True)
            grid = torch.linspace(0, 1, n).float().to(device)
            """,
            lines=(3, 4, 5, 6, 7),
            fixed="""
            import torch
            mask = torch.zeros(n, n, device="cuda")
            pos = torch.arange(seq_len, device=device)
            ids = torch.arange(3, device="cuda:1")
            noise = torch.randn(b, d, device=self.device)
            grid = torch.linspace(0, 1, n, device=device).float()
            """,
        ),
        Invalid(
            """
            from torch import ones
            scale = ones(4, dtype=torch.int64).to(x.device, torch.float32)
            """,
            lines=(3,),
        ),
        Invalid(
            """
            import torch
            buf = torch.zeros(*shape).to(device)
            noise = torch.randn(*x.shape).cuda()
            grid = torch.ones(batch, *spatial, dtype=torch.bool).to(x.device, non_blocking=True)
            ids = torch.full(*size_and_value).long().cuda(0)
            """,
            lines=(3, 4, 5, 6),
            fixed="""
            import torch
            buf = torch.zeros(*shape, device=device)
            noise = torch.randn(*x.shape, device="cuda")
            grid = torch.ones(batch, *spatial, dtype=torch.bool, device=x.device)
            ids = torch.full(*size_and_value, device="cuda:0").long()
            """,
        ),
        Invalid(
            """
            import torch
            buf = torch.zeros(bsz, beam).to(lprobs)
            steps = torch.arange(n).float().to(x.grad)
            """,
            lines=(3, 4),
        ),
        Invalid(
            """
            import torch
            pos = torch.arange(t).view(1, t).to(x.device)
            mask = torch.arange(t).unsqueeze(0).expand(b, -1).long().to(x.device)
            onehot = torch.zeros(1, n).to(state["device"])
            """,
            lines=(3, 4, 5),
            fixed="""
            import torch
            pos = torch.arange(t, device=x.device).view(1, t)
            mask = torch.arange(t, device=x.device).unsqueeze(0).expand(b, -1).long()
            onehot = torch.zeros(1, n, device=state["device"])
            """,
        ),
        # `.type()` to a dtype is a cast like `.long()`; to a legacy host tensor type it must
        # not run after the move (no fix). A Parameter or Variable built around the host
        # tensor still copies it (no fix: a moved Parameter is a plain tensor).
        Invalid(
            """
            import torch
            from torch import nn
            from torch.autograd import Variable
            ids = torch.zeros(n).type(torch.long).cuda()
            noise = torch.rand(b, t).type(encoder.input_dtype).to(device)
            hits = torch.zeros(k, b).type(torch.ByteTensor).to(out.device)
            scale = nn.Parameter(torch.ones(1), requires_grad=False).to(self.device)
            ones = Variable(torch.ones(b, 1).type(x.dtype), requires_grad=False).to(x.device)
            """,
            lines=(5, 6, 7, 8, 9),
            fixed="""
            import torch
            from torch import nn
            from torch.autograd import Variable
            ids = torch.zeros(n, device="cuda").type(torch.long)
            noise = torch.rand(b, t, device=device).type(encoder.input_dtype)
            hits = torch.zeros(k, b).type(torch.ByteTensor).to(out.device)
            scale = nn.Parameter(torch.ones(1), requires_grad=False).to(self.device)
            ones = Variable(torch.ones(b, 1).type(x.dtype), requires_grad=False).to(x.device)
            """,
        ),
        # A wrapped factory alone in a file (no plain factory-then-move chain beside it).
        Invalid(
            """
            import torch
            bias = torch.nn.Parameter(torch.zeros(n)).cuda()
            """,
            lines=(3,),
        ),
        # `.detach()` on the way is a no-op on a fresh tensor and stays after the fix.
        Invalid(
            """
            import torch
            steps = torch.arange(0, n).detach().to(device) + 1
            """,
            lines=(3,),
            fixed="""
            import torch
            steps = torch.arange(0, n, device=device).detach() + 1
            """,
        ),
        # Built by one statement, moved by the next, which rebinds the name (also under an
        # `if`, also on `self`); reported at the factory, with no fix. Alone in its file: no
        # chained move beside it opens the gate.
        Invalid(
            """
            import torch
            from torch import autograd


            def init_hidden(self, batch, width, use_cuda):
                hidden = autograd.Variable(torch.zeros(batch, width))
                if use_cuda:
                    hidden = hidden.cuda()
                self.noise = torch.rand(batch, width)
                self.noise = self.noise.to(self.device)
                mask = 1 - torch.eye(width)
                mask = mask.to(self.device)
                eye = 1 - torch.eye(width)
                eyes = eye.repeat(batch, 1, 1).to(self.device)
                return hidden, mask, eyes
            """,
            lines=(7, 10, 12, 14),
        ),
        # A run of factory bindings moved together by the statements after them (noisy
        # layers' fresh noise), and a legacy constructor given sizes: no fix either.
        Invalid(
            """
            import torch


            def sample_noise(self, rows, cols):
                eps_out = torch.rand(rows, 1)
                eps_in = torch.rand(1, cols)
                if self.use_cuda:
                    eps_out = eps_out.cuda()
                    eps_in = eps_in.cuda()
                onehot = torch.Tensor(rows, cols).to(self.device, non_blocking=True)
                onehot.fill_(-1)
                return eps_out, eps_in, onehot
            """,
            lines=(6, 7, 11),
        ),
        # Filled with a Python number the function computed, then moved; no fix.
        Invalid(
            """
            import torch
            def get_chunk(source, source_lengths):
                trunc = int(source_lengths[0].item() - 1)
                return torch.zeros(source.shape[0]).fill_(trunc).to(source.device)
            """,
            lines=(5,),
        ),
        # The mask bound on one line and moved, repeated per batch, on the next (its only
        # use): built on the host only to be copied.
        Invalid(
            """
            import torch
            def mahalanobis_mask(dist):
                identity = 1 - torch.eye(dist.shape[-1])
                mask = identity.repeat(dist.shape[0], 1, 1).to(dist.device)
                return dist * mask
            """,
            lines=(4,),
        ),
        # Filled in place with whatever value, the tensor is still the factory's, on the
        # host (a convolutional decoder's padding, made per layer); no fix.
        Invalid(
            """
            import torch
            def pad(self, batch_size, hid_dim):
                return torch.zeros(batch_size, hid_dim, self.kernel_size - 1).fill_(
                    self.pad_idx).to(self.device)
            """,
            lines=(4,),
        ),
        # A move given a mapping that holds the device (the MAPPO `tpdv` idiom); no fix.
        Invalid(
            """
            import torch
            class Policy:
                def __init__(self, device):
                    self.tpdv = dict(dtype=torch.float32, device=device)
                def init_hidden(self, n):
                    return torch.zeros(n, 64).to(**self.tpdv)

            def shifted(batch_size, n_agent, action_dim, tpdv):
                return torch.zeros((batch_size, n_agent, action_dim + 1)).to(**tpdv)
            """,
            lines=(7, 10),
        ),
        # A slice of a tensor a factory drew whole on the host, then moved: a permutation's
        # first k indices (no fix: the slice is the last link before the move).
        Invalid(
            """
            import torch
            def sample(n, k, device):
                keep = torch.randperm(n)[:k].to(device)
                window = torch.arange(2 * n)[n:].cuda()
                return keep, window
            """,
            lines=(4, 5),
        ),
        # A legacy constructor given one argument that can only be a size: an uninitialised
        # host buffer (later resized and filled on the device).
        Invalid(
            """
            import torch
            from torch.autograd import Variable
            im_data = Variable(torch.FloatTensor(1).cuda())
            counts = torch.LongTensor(len(batch)).to(device)
            """,
            lines=(4, 5),
        ),
        # Or a `torch.Size` (`x.size()`, also extended by a tuple): a shape, whatever its
        # length. A one-hot buffer built on the host, moved by the next statement; noise
        # drawn on the host. A tuple such as an array's `.shape` may be data: left alone.
        Invalid(
            """
            import torch
            def to_one_hot(tensor, n):
                one_hot = torch.FloatTensor(tensor.size() + (n,)).zero_()
                if tensor.is_cuda:
                    one_hot = one_hot.cuda()
                return one_hot
            noise = torch.FloatTensor(x.size()).normal_().cuda()
            data = torch.FloatTensor(obs.shape).cuda()
            """,
            lines=(4, 8),
        ),
        # An RNN's initial state built on the host and returned moved (both branches of the
        # nested `if` move it); no fix either.
        Invalid(
            """
            import torch


            def zero_state(self, inputs):
                h0 = torch.zeros(2, inputs.size(0), self.hidden, requires_grad=False)
                c0 = torch.zeros(2, inputs.size(0), self.hidden, requires_grad=False)
                if self.use_cuda:
                    if self.training_mode:
                        return h0.cuda(), c0.cuda()
                    else:
                        return h0.cuda().half(), c0.cuda().half()
                return h0, c0
            """,
            lines=(6, 7),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _MOVES:
            return
        imports = self.context.analysis.imports
        chain = self._factory_chain(func.value)
        if chain is None:
            return
        factory, short, casts, wrapped = chain
        target = self._move_target(node)
        if target is None:
            return
        device, fixable = target
        if wrapped or any(isinstance(c, cst.Call) and _method(c) == "type"
                          and _type_cast_target(c, imports) == "tensor type" for c in casts):
            fixable = False
        fix = None
        if fixable and device is not None:
            unsafe = (short in RANDOM_FACTORIES or _keyword(factory, "requires_grad") is not None
                      or any(_method(c) in _ALIASING_SHAPE_OPS or _method(c) == "requires_grad_"
                             for c in casts))
            safety = FixSafety.UNSAFE if unsafe else FixSafety.SAFE
            built: cst.BaseExpression = append_arg(factory, keyword_arg("device", device))
            for cast in reversed(casts):
                if isinstance(cast, cst.Subscript):
                    built = cast.with_changes(value=built)
                elif _mask_input(cast, imports) is not None:  # the factory is its first argument
                    first, *rest = cast.args
                    built = cast.with_changes(args=[first.with_changes(value=built), *rest])
                else:
                    built = cast.with_changes(func=cast.func.with_changes(value=built))
            # Parentheses around a chain written over several lines stay with it.
            fix = Fix(safety, {node: built.with_changes(lpar=node.lpar, rpar=node.rpar)})
        self.report(node, self._message(short), fix=fix)

    def _factory_chain(
        self, expr: cst.BaseExpression
    ) -> tuple[cst.Call, str, list[cst.Call | cst.Subscript], bool] | None:
        """The host factory call ``expr`` builds its tensor with, if it is one placed by no
        keyword: (the factory call, its name under ``torch.``, the casts, shape ops and mask
        builders around it, outermost first, and whether no fix can be offered: a host
        wrapper holds it, or it is a legacy constructor given sizes, which takes no
        ``device=``)."""
        imports = self.context.analysis.imports
        factory = expr
        casts: list[cst.Call | cst.Subscript] = []  # outermost first
        wrapped = False
        while isinstance(factory, (cst.Call, cst.Subscript, cst.Comparison,
                                   cst.BinaryOperation)):
            transformed = _constant_transform_input(factory, imports, self._scalar)
            if transformed is not None and not (
                    isinstance(factory, cst.Call) and _is_cast_or_reshape(factory, imports)):
                wrapped = True  # no fix: the factory is not the last link before the move
                factory = transformed
                continue
            if isinstance(factory, (cst.Comparison, cst.BinaryOperation)):
                break
            if isinstance(factory, cst.Subscript):
                if _adds_dimensions(factory):
                    casts.append(factory)  # `torch.arange(n)[None, :]`: a view, like unsqueeze
                elif _slices(factory):
                    wrapped = True  # `torch.randperm(n)[:k]`: drawn whole on the host; no fix
                else:
                    break
                factory = factory.value
                continue
            masked = _mask_input(factory, imports)
            if masked is not None:
                casts.append(factory)
                factory = masked
                continue
            joined = self._joined_factories(factory)
            if joined is not None:
                # `torch.cat([torch.ones(b, 1), torch.zeros(b, t)], dim=1)`: every part built
                # on the host; no fix (each factory would need the device).
                return joined[0], joined[1], casts, True
            if _is_cast_or_reshape(factory, imports):
                casts.append(factory)
                assert isinstance(factory.func, cst.Attribute)
                factory = factory.func.value
                continue
            inner = None if wrapped else _host_wrapped(factory, imports)
            if inner is None:
                break
            wrapped = True
            factory = inner
        if not isinstance(factory, cst.Call):
            return None
        qualified = imports.qualified_name(factory.func)
        if qualified is None or not qualified.startswith("torch."):
            return None
        short = qualified[len("torch."):]
        if short in LEGACY_TENSOR_TYPES and _sized_legacy_constructor(factory):
            return factory, short, casts, True  # no `device=` to add: reported without a fix
        if (short in LEGACY_TENSOR_TYPES or short == "tensor") and _range_data(factory):
            # `torch.LongTensor(list(range(n)))`: a host `arange`, copied element by element;
            # no fix (the call itself changes)
            return factory, _RANGE, casts, True
        if short not in DETERMINISTIC_FACTORIES and short not in RANDOM_FACTORIES:
            return None
        if short == "normal" and not (_normal_sized(factory) or self._host_mean(factory)):
            # `torch.normal(mu, std)`: drawn on the device of the mean and std tensors; only
            # `torch.normal(0.0, 1.0, size)`, or a mean built by a factory on the host
            # (`torch.normal(torch.zeros(n, d), 1.0)`, `mean = torch.zeros(b, d)` just
            # before), builds a host tensor.
            return None
        if any(a.keyword is not None and a.keyword.value in STAGING_KEYWORDS
               for a in factory.args):
            return None
        if any(a.star == "**" for a in factory.args):
            return None  # `**kwargs` may hold `device=`, `out=` or `pin_memory=`
        if _zero_sized(factory, short):
            return None  # an empty placeholder (`torch.zeros(bs, 0).type_as(x)`): no copy
        if short == "normal" and not _normal_sized(factory):
            # Tensor arguments take no `device=`: the mean itself must be built there.
            return factory, short, casts, True
        return factory, short, casts, wrapped

    def _joined_factories(self, call: cst.Call,
                          ) -> tuple[cst.Call, str, list[cst.Call | cst.Subscript], bool] | None:
        """The first factory chain of ``torch.cat([...])`` / ``torch.stack((...))`` whose
        parts are all host factory chains (their dimension given by a number)."""
        imports = self.context.analysis.imports
        if imports.qualified_name(call.func) not in _JOINING_FUNCTIONS or not call.args:
            return None
        first, *rest = call.args
        if (first.keyword is not None or first.star
                or not isinstance(first.value, (cst.List, cst.Tuple))
                or not all(_constant(a.value) for a in rest)):
            return None
        chains = []
        for element in first.value.elements:
            if isinstance(element, cst.StarredElement):
                return None
            chain = self._factory_chain(element.value)
            if chain is None:
                return None
            chains.append(chain)
        return chains[0] if chains else None

    def _scalar(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a name the function binds only to arithmetic of a number
        (``keep_prob = 1 - self.dropout_rate``) or to a Python number made from anything
        (``n = int(lengths[0].item() - 1)``), or a parameter that defaults to a number and
        is not rebound (``def forward(self, x, offset=0)``: whatever a caller passes meets
        a host tensor, so it is a number or a host tensor itself)?"""
        if not isinstance(expr, cst.Name):
            return False
        graph = self.context.analysis.graph
        bindings = graph.facts(graph.scope_of(expr)).bindings.get(expr.value, ())
        return bool(bindings) and all(
            (b.value is not None and (_scalar_arithmetic(b.value) or _host_number(b.value)
                                      or _number_call(b.value)))
            or (b.kind == "param" and isinstance(b.node, cst.Param)
                and b.node.default is not None and _constant(b.node.default))
            for b in bindings)

    def _host_mean(self, call: cst.Call) -> bool:
        """Is the mean given to ``torch.normal`` a host factory's tensor: a factory call, or a
        name that the same function binds only to one?"""
        mean = _keyword(call, "mean")
        positional = _positional(call)
        value = mean.value if mean is not None else (
            positional[0].value if positional else None)
        imports = self.context.analysis.imports

        def factory(expr: cst.BaseExpression) -> bool:
            if not isinstance(expr, cst.Call):
                return False
            qualified = imports.qualified_name(expr.func)
            return qualified is not None and qualified.startswith("torch.") and (
                qualified[len("torch."):] in DETERMINISTIC_FACTORIES | RANDOM_FACTORIES)

        if value is None:
            return False
        if factory(value):
            return True
        if not isinstance(value, cst.Name):
            return False
        graph = self.context.analysis.graph
        bindings = graph.facts(graph.scope_of(call)).bindings.get(value.value, ())
        return bool(bindings) and all(b.value is not None and factory(b.value) for b in bindings)

    def _message(self, short: str) -> str:
        if short == _RANGE:
            return self.range_message
        if short in LEGACY_TENSOR_TYPES:
            return self.legacy_message.format(factory=short)
        return self.message.format(factory=short)

    def _move_target(self, move: cst.Call) -> tuple[cst.BaseExpression | None, bool] | None:
        assert isinstance(move.func, cst.Attribute)
        method = move.func.attr.value
        if method == "type":
            # `torch.arange(n).type(torch.cuda.FloatTensor)`: a cast to a CUDA tensor type
            # copies to the GPU; no fix to offer (the dtype and the device both change).
            positional = _positional(move)
            imports = self.context.analysis.imports
            if (len(move.args) == 1 and len(positional) == 1 and not positional[0].star
                    and _CUDA_TENSOR_TYPE.match(imports.qualified_name(positional[0].value)
                                                or "")):
                return None, False
            return None
        if method == "type_as":
            # `torch.linspace(a, b, n).type_as(q)`: copied to `q`'s device (and dtype), as
            # `.to(q)` is; no fix to offer.
            positional = _positional(move)
            if (len(move.args) == 1 and len(positional) == 1 and not positional[0].star
                    and names_other_tensor(positional[0].value, self.context.analysis.imports)):
                return None, False
            return None
        return self._cuda_target(move) if method == "cuda" else self._to_target(move)

    # A factory bound to a name and moved by the very next statement, which rebinds the name
    # (`h = torch.zeros(b, d)` then `h = h.cuda()`, also under `if use_cuda:`): the host
    # tensor is built only to be copied. Anything in between (a fill, a read) may need the
    # host tensor, so only other factory bindings may stand between (a run of draws, then
    # their moves). No fix: two statements would change.
    def visit_Module(self, node: cst.Module) -> None:
        self._split_moves(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._split_moves(node.body)

    def _split_moves(self, body: Sequence[cst.BaseStatement]) -> None:
        bound: list[tuple[str, cst.Call]] = []  # the factory bindings just above
        for statement in body:
            moved = self._moves_of(statement, bound)
            if moved:
                # `a = a.cuda()` after `b = torch.zeros(n)`: each rebinding move of a name
                # bound above ends its wait; the others still wait for theirs.
                for key, factory in bound:
                    if key in moved:
                        chain = self._factory_chain(factory)
                        if chain is not None and self._move_target(moved[key]) is not None:
                            self.report(chain[0], self._message(chain[1]))
                bound = [(k, f) for k, f in bound if k not in moved]
                if isinstance(statement, cst.If):
                    bound = []
                continue
            for key, factory in bound:
                move = self._moved_at_only_use(statement, key, factory)
                if move is not None:
                    chain = self._factory_chain(factory)
                    if chain is not None:
                        self.report(chain[0], self._message(chain[1]))
            assigned = _single_assignment(statement)
            value = None if assigned is None else _with_numbers(assigned[1])
            if (assigned is None or value is None
                    or self._factory_chain(value) is None
                    or self._reads_any(assigned[1], [k for k, _ in bound])):
                bound = []  # anything else in between may need the host tensors
            if assigned is not None and value is not None and (
                    self._factory_chain(value) is not None):
                bound = [(k, f) for k, f in bound if k != assigned[0]]
                bound.append((assigned[0], value))

    def _moved_at_only_use(self, statement: cst.BaseStatement, key: str,
                           factory: cst.Call) -> cst.Call | None:
        """The move in the statement right after ``key = <factory>`` when that is the only
        use of the tensor: every read of ``key`` there is moved (``support.type_as(q)``,
        ``mask.to(device)``) and the function reads ``key`` nowhere else. The host tensor
        was built only to be copied, like a factory moved on its own line."""
        tree = self.context.analysis.tree
        scope = tree.enclosing_function(statement)
        if "." in key or scope is None:
            return None  # an attribute, or a module's name: other code may read it
        reads = [n for n in tree.walk(statement) if isinstance(n, cst.Name) and n.value == key]
        if not reads:
            return None
        move: cst.Call | None = None
        imports = self.context.analysis.imports
        for name in reads:
            # Through casts and shape ops first: `mask.repeat(b, 1, 1).to(x.device)`.
            value: cst.BaseExpression = name
            while True:
                attribute = tree.parent(value)
                call = tree.parent(attribute) if isinstance(attribute, cst.Attribute) else None
                if not (isinstance(attribute, cst.Attribute) and attribute.value is value
                        and isinstance(call, cst.Call) and call.func is attribute):
                    return None
                if attribute.attr.value in _MOVES and self._move_target(call) is not None:
                    break
                if not _is_cast_or_reshape(call, imports):
                    return None
                value = call
            move = call
        binding = tree.parent(factory)
        # (An attribute's own name is no use of the variable: `torch.eye` is not `eye`.)
        uses = [n for n in tree.walk(scope) if isinstance(n, cst.Name) and n.value == key
                and not (isinstance(parent := tree.parent(n), cst.Attribute)
                         and parent.attr is n)]
        inside = set(reads) | {n for n in tree.walk(binding) if isinstance(n, cst.Name)} if (
            binding is not None) else set(reads)
        if any(n not in inside and not self._binds(n) for n in uses):
            return None
        return move

    def _binds(self, name: cst.Name) -> bool:
        """Is ``name`` the target of the factory's own assignment?"""
        parent = self.context.analysis.tree.parent(name)
        return isinstance(parent, cst.AssignTarget)

    def _reads_any(self, value: cst.BaseExpression, keys: Sequence[str]) -> bool:
        wanted = set(keys)
        return any(isinstance(n, (cst.Name, cst.Attribute)) and dotted_name(n) in wanted
                   for n in self.context.analysis.tree.walk(value))

    def _moves_of(self, statement: cst.BaseStatement,
                  bound: Sequence[tuple[str, cst.Call]]) -> dict[str, cst.Call]:
        """The names bound above that this statement moves by rebinding them (itself, or
        the leading run of moves under an ``if`` without ``else``)."""
        if not bound:
            return {}
        moved: dict[str, cst.Call] = {}
        for key, _ in bound:
            move = _rebinding_move(statement, key)
            if move is not None:
                moved[key] = move
        return moved

    def _cuda_target(self, move: cst.Call) -> tuple[cst.BaseExpression | None, bool] | None:
        """``.cuda()`` -> ``"cuda"``; ``.cuda(1)`` -> ``"cuda:1"``; a variable index: no fix."""
        fixable = all(
            a.keyword is None or a.keyword.value in ({"device"} | _COPY_ONLY_KEYWORDS)
            for a in move.args
        )
        index_arg = _keyword(move, "device")
        positional = _positional(move)
        if index_arg is None and positional:
            index_arg = positional[0]
        if index_arg is None:
            return _string("cuda"), fixable
        value = index_arg.value
        if isinstance(value, cst.Integer):
            return _string(f"cuda:{value.value}"), fixable
        if isinstance(value, cst.SimpleString) and _CUDA_LITERAL.match(value.value):
            return value, fixable
        return None, False

    def _to_target(self, move: cst.Call) -> tuple[cst.BaseExpression | None, bool] | None:
        """The device a ``.to(...)`` moves to, or None when it is no move off the host."""
        kind = self.context.analysis.dataflow.device_target(move)
        if not (kind.to_accelerator or kind is DeviceTarget.OTHER_DEVICE):
            positional = _positional(move)
            if (len(move.args) == 1 and len(positional) == 1 and not positional[0].star
                    and names_other_tensor(positional[0].value,
                                           self.context.analysis.imports)):
                # `torch.zeros(n).to(lprobs)`: built on the host, then copied to wherever
                # `lprobs` lives (and cast to its dtype): reported, with no fix to offer.
                return None, False
            return None
        device = device_argument(move)
        device_kw = _keyword(move, "device")
        extra_positional = _positional(move)[0 if device_kw is not None else 1:]
        fixable = not extra_positional and not has_star_args(move) and all(
            a.keyword is None or a.keyword.value in ({"device"} | _COPY_ONLY_KEYWORDS)
            for a in move.args
        )
        return device, fixable

"""PyTorch names the analyses recognise, shared by the per-file analyses (libcst) and the
project index (stdlib ``ast``, which must not import libcst), so both read code alike."""

from __future__ import annotations

from typing import Literal

GradMode = Literal["off", "on", "unknown"]

NO_GRAD_NAMES = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})
ENABLE_GRAD_NAMES = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
SET_GRAD_NAMES = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})

# Methods whose result has no autograd history (host values, integer/boolean tensors, detached).
DETACHING_METHODS = frozenset({
    "item", "detach", "detach_", "tolist", "numpy", "asnumpy", "size", "dim", "numel", "argmax",
    "argmin",
    "long", "int", "bool", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
    "all", "any", "nonzero", "data_ptr", "element_size", "get_device", "__float__",
    "state_dict", "keys", "append", "extend", "insert", "zero_grad",
})
# Attributes that never carry the value's graph.
DETACHED_ATTRIBUTES = frozenset({
    "data", "grad", "shape", "device", "dtype", "requires_grad", "is_cuda", "ndim", "grad_fn",
})
# Builtins whose result is a host value.
HOST_BUILTINS = frozenset({
    "float", "int", "bool", "str", "len", "round", "repr", "format", "print", "isinstance",
    "hasattr", "range", "enumerate", "id", "type",
})


def grad_switch(name: str, called: bool, has_args: bool, flag: bool | None) -> GradMode | None:
    """The grad mode a ``with`` item or decorator named ``name`` (import-resolved) sets.

    ``called``: written as a call; ``has_args``: the call has a first argument; ``flag``:
    that argument when it is a literal ``True``/``False``. None: it does not touch grad.
    """
    if name in NO_GRAD_NAMES:
        if name == "torch.inference_mode" and called and has_args:
            return "unknown" if flag is None else ("off" if flag else None)
        return "off"
    if name in ENABLE_GRAD_NAMES:
        return "on"
    if name in SET_GRAD_NAMES:
        if not called or not has_args:
            return None
        if flag is None:
            return "unknown"
        return "on" if flag else "off"
    return None

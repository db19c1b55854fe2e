"""Who keeps a leaking test's tensors alive: a wider-scoped fixture, a module global, or
neither (then the test's own objects reached something longer-lived: a cache, a class
attribute, another module's global).

A report that only blames the test is noise when a module-scoped ``net`` fixture is what
holds the tensors; walking the object graph from each candidate root names it. The walk is
bounded and runs only for a test that fails its leak check.
"""

from __future__ import annotations

import gc
import inspect
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_gpumem.backends.base import LeakResult
from pytest_gpumem.units import format_bytes

MAX_OBJECTS = 200_000  # per root; a model fixture is a few thousand objects
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, str, bytes)

Root = tuple[str, object]
NOT_HELD = ("none of the test's wider-scoped fixtures or its module's globals: the test's own "
            "objects reached something longer-lived (a cache, a class attribute, another "
            "module's global)")


def fixture_roots(item: Any) -> list[Root]:
    """The values of the test's wider-scoped fixtures, the attributes of its class, then
    its module's globals."""
    roots: list[Root] = []
    funcargs = getattr(item, "funcargs", None) or {}
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for name, defs in info.name2fixturedefs.items():
            if defs and defs[-1].scope != "function" and name in funcargs:
                roots.append((f"{defs[-1].scope}-scoped fixture {name!r}", funcargs[name]))
    cls = getattr(item, "cls", None)
    for klass in (cls.__mro__[:-1] if isinstance(cls, type) else ()):  # not object's
        roots.extend(_class_attributes(klass))
    module = getattr(item, "module", None)
    if not isinstance(module, types.ModuleType):
        return roots
    roots.extend(_module_roots(module, skip=cls))
    # The project's own modules it imports from (``from train import train``): their
    # globals are as much the test's as its own module's; a library's stay out.
    project = getattr(getattr(item, "config", None), "rootpath", None)
    if isinstance(project, Path):
        for other in _imported_project_modules(module, project):
            roots.extend(_module_roots(other, skip=None))
    return roots


def _module_roots(module: types.ModuleType, skip: object) -> list[Root]:
    """A module's globals, then the attributes of the classes it defines: classes are opaque
    to the walk (it would wander into every library), but a module's own (``Registry.seen =
    []``) are its state."""
    namespace = vars(module)
    where = Path(module.__file__).name if module.__file__ else module.__name__
    roots: list[Root] = [
        (f"global {name!r} of {where}", value) for name, value in namespace.items()
        if not name.startswith("__") and not isinstance(value, _OPAQUE)
    ]
    for value in namespace.values():
        if isinstance(value, type) and value is not skip and value.__module__ == module.__name__:
            roots.extend(_class_attributes(value))
    return roots


def _imported_project_modules(module: types.ModuleType, project: Path) -> list[types.ModuleType]:
    """The modules under the project's root folder (not an installed library in a virtual
    environment there) that ``module`` imports, or imports a function or class from."""
    found: dict[str, types.ModuleType] = {}
    project = project.resolve()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            other: types.ModuleType | None = value
        elif isinstance(value, type | types.FunctionType):
            other = sys.modules.get(value.__module__)
        else:
            continue
        path = getattr(other, "__file__", None)
        if other is None or other is module or other.__name__ in found or not path:
            continue
        where = Path(path).resolve()
        library = {"site-packages", "dist-packages"} & set(where.parts)
        if where.is_relative_to(project) and not library:
            found[other.__name__] = other
    return list(found.values())


def _class_attributes(klass: type) -> list[Root]:
    return [
        (f"class attribute {klass.__name__}.{name}", value)
        for name, value in vars(klass).items()
        if not name.startswith("__") and not isinstance(value, (*_OPAQUE, property))
    ]


_SAVED_NAMES: dict[type, tuple[str, ...]] = {}


def _saved_names(node_type: type) -> tuple[str, ...]:
    """The attributes of an autograd node type that give its saved tensors."""
    names = _SAVED_NAMES.get(node_type)
    if names is None:
        names = _SAVED_NAMES[node_type] = tuple(
            name for name in dir(node_type)
            if (name.startswith("_saved_") and not name.endswith(("_sym_sizes", "_sym_strides")))
            or name in ("saved_tensors", "variable")
        )
    return names


def _graph_referents(node: Any) -> list[object]:
    """What an autograd node keeps alive that the garbage collector cannot see: the tensors
    it saved for backward, the next nodes, and an AccumulateGrad's leaf tensor."""
    out: list[object] = []
    for name in _saved_names(type(node)):
        try:
            out.append(getattr(node, name))
        except RuntimeError:  # freed by a backward pass: nothing kept
            continue
    for next_node, _ in getattr(node, "next_functions", ()):
        if next_node is not None:
            out.append(next_node)
    return out


def reachable_storages(
    roots: Iterable[object],
    key_of: Callable[[Any], int],
    keys: set[int],
    graphs: list[bool] | None = None,
) -> set[int]:
    """Which of ``keys`` the tensors reachable from ``roots`` sit on (a bounded walk),
    through the autograd graph of a tensor's ``grad_fn`` too (a kept output keeps the
    activations its graph saved). ``graphs`` gets True appended when one of those tensors
    holds a ``grad_fn``."""
    import torch
    from torch.autograd.graph import Node

    found: set[int] = set()
    seen: set[int] = set()
    kept: list[object] = []
    stack = list(roots)
    while stack and len(seen) < MAX_OBJECTS:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE) or inspect.isframe(obj):
            continue
        seen.add(id(obj))
        # Kept till the walk ends, so that an id in ``seen`` stays its object's: a tensor's
        # grad_fn and a node's saved tensors are new Python objects on each access (torch
        # 2.11 reused a dropped one's id for the next, and a saved activation went unseen).
        kept.append(obj)
        if isinstance(obj, torch.Tensor):
            try:
                key = key_of(obj.untyped_storage())
            except (RuntimeError, NotImplementedError):
                key = None
            if key in keys:
                found.add(key)
                if graphs is not None and obj.grad_fn is not None:
                    graphs.append(True)
            if obj.is_leaf and obj.grad is not None:  # .grad is not a gc referent
                stack.append(obj.grad)
            if obj.grad_fn is not None:
                stack.append(obj.grad_fn)
        elif isinstance(obj, Node):
            made = _graph_referents(obj)  # new Python objects for saved tensors: kept alive
            kept.extend(made)  # while they wait on the stack, as every visited object is
            stack.extend(made)
        stack.extend(gc.get_referents(obj))
    return found


def holders_of(leak: LeakResult | None, roots: Iterable[Root], key_of: Callable[[Any], int]
               ) -> list[str]:
    """One line per root that reaches surviving storages, with how much; or one line saying
    none of them does."""
    if leak is None or not leak.survivors:
        return []
    sizes = dict(leak.survivors)
    left = set(sizes)
    lines: list[str] = []
    for label, value in roots:
        if not left:
            break
        graphs: list[bool] = []
        held = reachable_storages([value], key_of, left, graphs)
        if held:
            left -= held
            plural = "s" if len(held) != 1 else ""
            graph = ", and the autograd graphs of their grad_fn" if graphs else ""
            lines.append(f"{label} ({len(held)} storage{plural}, "
                         f"{format_bytes(sum(sizes[k] for k in held))}{graph})")
    return lines or [NOT_HELD]

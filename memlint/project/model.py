"""The project model: module summaries joined into answers that cross files.

Built in the parent process from every summarised module (:mod:`memlint.project.summary`),
it resolves names through imports, relative ones included, and re-exports in ``__init__``
modules; it then answers, per module, the questions the per-file analyses ask
(:class:`~memlint.project.view.ModuleView`): what a project decorator or decorator factory
does to grad mode, the grad mode a function's callers run it under, what a project function
returns, which project classes are ``nn.Module`` subclasses.

Unknown stays unknown: a name that leads outside the summarised modules (a third-party
decorator, a dynamic call) gets no answer, and the analyses then keep their file-local
behaviour. Recursion and call cycles are cut at a small depth with "unknown".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path

from memlint.project.layout import ModuleName
from memlint.project.summary import Class, Function, ModuleSummary, Site, Switch
from memlint.project.view import ModuleView, ReturnFact
from memlint.vocabulary import (
    LOADER_NAME,
    MODEL_MACHINERY,
    PREDICT_API,
    GradMode,
    framework_eval_hook,
    grad_switch,
    is_test_code,
)

_MAX_DEPTH = 6
# Bases that make a class model code, named as nn.Module subclasses usually are.
_MODULE_BASE = re.compile(r"(?:^|\.)(?:Module|\w*Model|Sequential|ModuleList|ModuleDict|\w*Net)$")
_TRAINING_CALLS = frozenset({"backward", "manual_backward"})

Definition = tuple[str, Function | Class]  # the module that defines it, and the definition


def _in_tests(module: str) -> bool:
    """Is the module test code (``tests.test_solver``, ``pkg.tests.conftest``), judged by
    the path its name stands for?"""
    return is_test_code(module.replace(".", "/") + ".py")


def _combine(modes: Iterable[GradMode | None]) -> GradMode | None:
    """One mode for several call sites: off if all are off, on if any is on."""
    seen = list(modes)
    if not seen:
        return None
    if any(m == "on" for m in seen):
        return "on"
    if all(m == "off" for m in seen):
        return "off"
    return "unknown"


class _Inside(dict[str, bool]):
    """Does a name as written in one module lead into the project? Decided by its first
    part (an import, a definition, ``self``, or a top-level module of the project), once
    per first part: ``inside[head]`` is a plain dict lookup after that."""

    def __init__(self, imports: Mapping[str, str], tops: set[str]) -> None:
        super().__init__(self=True)
        self._imports = imports
        self._tops = tops

    def __missing__(self, head: str) -> bool:
        full = self._imports.get(head)
        known = (full if full is not None else head).partition(".")[0] in self._tops
        self[head] = known
        return known


class ProjectModel:
    """Every summarised module of a project, and the facts derived from them (memoised)."""

    def __init__(self, modules: Mapping[ModuleName, ModuleSummary],
                 alone: _SummaryFacts | None = None) -> None:
        self._alone = alone if alone is not None else _SummaryFacts()
        self.summaries: dict[str, ModuleSummary] = {m.name: s for m, s in modules.items()}
        self._is_package = {m.name: m.is_package for m in modules}
        self._tops = {m.name.partition(".")[0] for m in modules}
        self._imports: dict[str, dict[str, str]] = {}
        self._functions = {
            name: {f.qualname: f for f in s.functions} for name, s in self.summaries.items()
        }
        self._classes = {
            name: {c.qualname: c for c in s.classes} for name, s in self.summaries.items()
        }
        self._modes: dict[str, GradMode | None] = {}
        self._called_modes: dict[str, GradMode | None] = {}
        self._in_progress: set[str] = set()
        self._calls: tuple[dict[str, list[tuple[str, Function | None, Site]]],
                           list[tuple[str, Function | None, Site]]] | None = None
        self._module_class: dict[str, bool] = {}
        # Memos of the two questions every view asks of thousands of names.
        self._definitions: dict[str, Definition | None] = {}
        self._clears: dict[tuple[str, int], bool] = {}
        self._resolved: dict[tuple[str, str], str] = {}
        self._methods_without_grad: dict[str, frozenset[str]] = {}
        # (module, id of a summary's Class) -> its project bases elsewhere, transitively
        self._elsewhere: dict[tuple[str, int], tuple[tuple[str, Class], ...]] = {}
        self._method_modes: dict[str, list[GradMode | None]] = {}

    # ------------------------------------------------------------------ names

    def imports(self, module: str) -> dict[str, str]:
        """Local name -> absolute dotted name: the module's imports and its definitions."""
        found = self._imports.get(module)
        if found is not None:
            return found
        summary = self.summaries[module]
        self._imports[module] = {}  # a cycle of star imports ends here
        table = {name: f"{module}.{name}" for name in summary.defined}
        starred: dict[str, str] = {}
        for imp in summary.imports:
            target = imp.target
            if imp.level:
                parts = module.split(".")
                keep = len(parts) - imp.level + (1 if self._is_package.get(module) else 0)
                if keep < 0:
                    continue
                base = ".".join(parts[:keep])
                target = f"{base}.{target}" if base and target else (base or target)
            else:
                target = self._sibling(module, target)
            if imp.local == "*":
                starred.update(self._star_names(target))
                continue
            table[imp.local] = target
        # `from .utils import *` binds the public names of `utils` (its own definitions and
        # imports win over them only when written later, which they nearly always are).
        for local, target in starred.items():
            table.setdefault(local, target)
        self._imports[module] = table
        return table

    def _star_names(self, target: str) -> dict[str, str]:
        """The names ``from target import *`` binds: the public names of a summarised module,
        or, for one not summarised yet, a marker (``*pkg.utils`` -> ``pkg.utils.*``) that
        asks for it to be summarised (no Python name starts with ``*``)."""
        if target not in self.summaries:
            return {f"*{target}": f"{target}.*"}
        return {local: absolute for local, absolute in self.imports(target).items()
                if not local.startswith(("_", "*"))}

    def _sibling(self, module: str, target: str) -> str:
        """``from engine import train_one_epoch`` in a folder of scripts run directly: Python
        finds ``engine`` beside the script, so when no top-level module of the project has
        that name, a sibling module does."""
        head = target.partition(".")[0]
        if head in self._tops:
            return target
        package = self._package(module)
        if package and f"{package}.{head}" in self.summaries:
            return f"{package}.{target}"
        return target

    def _package(self, module: str) -> str:
        """The package a module's relative and sibling imports start from."""
        return module if self._is_package.get(module) else module.rpartition(".")[0]

    def resolve(self, module: str, dotted: str, scope: str = "") -> str:
        """The absolute name ``dotted`` (as written in ``module``, inside the function or
        method ``scope``) stands for; ``self.m`` in a method is the class's ``m``."""
        if dotted.startswith("self.") and "." in scope:
            owner = scope.rsplit(".", 1)[0]
            if owner in self._classes.get(module, {}):
                return f"{module}.{owner}.{dotted[5:]}"
        key = (module, dotted)  # the rest does not depend on the scope: memoised
        found = self._resolved.get(key)
        if found is None:
            head, _, rest = dotted.partition(".")
            full = self.imports(module).get(head)
            found = dotted if full is None else f"{full}.{rest}" if rest else full
            self._resolved[key] = found
        return found

    def definition(self, absolute: str, depth: int = 0) -> Definition | None:
        """The project function or class an absolute name refers to, through re-exports."""
        if depth == 0:
            if absolute in self._definitions:
                return self._definitions[absolute]
            found = self._definition(absolute, 0)
            self._definitions[absolute] = found
            return found
        return self._definition(absolute, depth)

    def _definition(self, absolute: str, depth: int) -> Definition | None:
        while depth <= _MAX_DEPTH:
            step = self._lookup(absolute)
            if not isinstance(step, str):
                return step
            absolute, depth = step, depth + 1
        return None

    def _unresolved(self, absolute: str) -> str | None:
        """The name a failed lookup of ``absolute`` ends at, after the re-exports it follows
        (``pkg.util.move`` -> ``pkg.util.tensors.move``); None when something defines it."""
        for _ in range(_MAX_DEPTH + 1):
            step = self._lookup(absolute)
            if not isinstance(step, str):
                return absolute if step is None else None
            absolute = step
        return absolute

    def _lookup(self, absolute: str) -> Definition | str | None:
        """One step of looking a name up: the definition, or the name a summarised module
        imports it as (to look up next), or None."""
        parts = absolute.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module not in self.summaries:
                continue
            qualname = ".".join(parts[cut:])
            function = self._functions[module].get(qualname)
            if function is not None:
                return module, function
            klass = self._classes[module].get(qualname)
            if klass is not None:
                return module, klass
            # `from .helpers import no_grad_ctx` in a package's __init__: follow the import.
            head, _, rest = qualname.partition(".")
            target = self.imports(module).get(head)
            if target is not None and target != f"{module}.{head}":
                return f"{target}.{rest}" if rest else target
            return None
        return None

    # ------------------------------------------------------------------ grad switches

    def switch_mode(self, module: str, switch: Switch, depth: int = 0) -> GradMode | None:
        """The grad mode ``switch`` (written in ``module``) sets as a ``with`` item or a
        decorator; None when it does not touch grad or cannot be resolved."""
        name = self.resolve(module, switch.name)
        mode = grad_switch(name, switch.called, switch.has_args, switch.flag)
        if mode is not None or depth > _MAX_DEPTH:
            return mode
        found = self.definition(name)
        if found is None:
            return None
        where, item = found
        if isinstance(item, Class):
            # `class no_grad_if_eval(torch.no_grad)`: a context manager subclassing a switch.
            decided = [m for b in item.bases
                       if (m := grad_switch(self.resolve(where, b), False, False, None))]
            return decided[0] if decided and switch.called else None
        if switch.called:
            # A factory: `with autocast_no_grad():` sets what the factory returns, and
            # `@smart_inference_mode()` what the decorator it returns does (all must agree).
            return self._factory_mode(where, item, depth)
        return self._decorator_mode(where, item, depth)

    def _factory_mode(self, module: str, factory: Function, depth: int) -> GradMode | None:
        if factory.entered:
            # A `@contextmanager`: the mode around its yields, when they all agree.
            entered = [self._innermost(module, switches, depth) for switches in factory.entered]
            return entered[0] if all(m == entered[0] for m in entered) else None
        modes: list[GradMode | None] = []
        for returned in factory.returns:
            if returned.kind == "switch":
                modes.append(self._switches_mode(module, returned.switches, depth))
            elif returned.kind == "inner":
                inner = self._functions[module].get(f"{factory.qualname}.{returned.name}")
                modes.append(None if inner is None else self._decorator_mode(
                    module, inner, depth + 1))
            else:
                return None
        # inference_mode() on new torch, no_grad() on old: both switch grad off.
        return modes[0] if modes and all(m == modes[0] for m in modes) else None

    def _decorator_mode(self, module: str, decorator: Function, depth: int) -> GradMode | None:
        """A bare decorator applies a switch to the function it receives
        (``return torch.no_grad()(fn)``), or returns a wrapper that calls it under one."""
        modes: list[GradMode | None] = []
        for returned in decorator.returns:
            if returned.kind == "apply":
                modes.append(self._switches_mode(module, returned.switches, depth))
            elif returned.kind == "inner":
                inner = self._functions[module].get(f"{decorator.qualname}.{returned.name}")
                calls = [] if inner is None else [
                    switches for param, switches in inner.param_calls
                    if param in decorator.params
                ]
                modes.extend(self._innermost(module, s, depth) for s in calls)
            elif returned.kind != "param":
                return None
        # `return fn` beside `return torch.no_grad()(fn)` hands the function back unchanged
        # when the switch is already on (`if torch.is_inference_mode_enabled(): return fn`).
        return modes[0] if modes and all(m == modes[0] for m in modes) else None

    def _switches_mode(self, module: str, switches: Iterable[Switch],
                       depth: int) -> GradMode | None:
        """The mode of alternatives (``a if new else b``): set only when they agree."""
        modes = [self.switch_mode(module, s, depth + 1) for s in switches]
        return modes[0] if modes and all(m == modes[0] for m in modes) else None

    def _innermost(self, module: str, switches: Iterable[Switch], depth: int) -> GradMode | None:
        """The mode set by the nearest of nested ``with`` items (outermost first)."""
        mode: GradMode | None = None
        for switch in switches:
            found = self.switch_mode(module, switch, depth + 1)
            if found is not None:
                mode = found
        return mode

    # ------------------------------------------------------------------ call sites

    def _callers_of(self, key: str) -> list[tuple[str, Function | None, Site]]:
        """The project's call sites of the project function ``key``: (module, calling
        function or None, site). ``<name>#passed`` finds the sites that pass the function as
        an argument, so that a runner that calls its parameter under no-grad can be found."""
        return self._call_index()[0].get(key, [])

    def _call_index(self) -> tuple[dict[str, list[tuple[str, Function | None, Site]]],
                                   list[tuple[str, Function | None, Site]]]:
        """The call sites by the absolute name they call, and the sites after ``.eval()`` or
        in a training loop.

        Only names inside the project are asked about, so a site whose name leads outside
        it (``torch.cat``, a method of a local variable: most sites) is not resolved or
        indexed; which way a name leads shows from its first part.
        """
        if self._calls is not None:
            return self._calls
        index: dict[str, list[tuple[str, Function | None, Site]]] = defaultdict(list)
        flagged: list[tuple[str, Function | None, Site]] = []
        for module, summary in self.summaries.items():
            owners: list[tuple[Function | None, Iterable[Site]]] = [(None, summary.sites)]
            owners += [(f, f.sites) for f in summary.functions]
            leads_in = _Inside(self.imports(module), self._tops)
            for function, sites in owners:
                scope = function.qualname if function is not None else ""
                for site in sites:
                    if site.after_eval or site.in_backward_loop:
                        flagged.append((module, function, site))
                    if leads_in[site.callee.partition(".")[0]]:
                        index[self.resolve(module, site.callee, scope)].append(
                            (module, function, site))
                    for _, passed in site.passed:
                        if leads_in[passed.partition(".")[0]]:
                            index[self.resolve(module, passed, scope) + "#passed"].append(
                                (module, function, site))
        self._calls = (dict(index), flagged)
        return self._calls

    def function_mode(self, module: str, function: Function) -> GradMode | None:
        """The grad mode the body of a project function starts in: its decorators, else the
        modes of every project call site (off only if all are off). None: nobody in the
        project calls it and no decorator decides."""
        key = f"{module}.{function.qualname}"
        if key in self._modes:
            return self._modes[key]
        mode = self.decorated_mode(module, function)
        if mode is None:
            mode = self._callers_mode(module, function)
        if mode is None:
            owner, _, name = function.qualname.rpartition(".")
            if framework_eval_hook(name, owner in self._classes.get(module, {})):
                mode = "off"  # no project caller: the framework runs it without grad
        self._modes[key] = mode
        return mode

    def decorated_mode(self, module: str, function: Function) -> GradMode | None:
        """The grad mode a function's own decorators set (the outermost that sets one)."""
        for decorator in reversed(function.decorators):
            mode = self.switch_mode(module, decorator)
            if mode is not None:
                return mode
        return None

    def methods_without_grad(self, absolute: str, depth: int = 0) -> frozenset[str]:
        """The methods of project class ``absolute`` (its project bases' included) that a
        decorator runs with gradients off (``@torch.no_grad() def encode(...)``)."""
        found = self.definition(absolute)
        if found is None or depth > _MAX_DEPTH:
            return frozenset()
        where, klass = found
        if not isinstance(klass, Class):
            return frozenset()
        if absolute in self._methods_without_grad:
            return self._methods_without_grad[absolute]
        off = {name for name in klass.methods
               if (method := self._functions[where].get(f"{klass.qualname}.{name}")) is not None
               and (self.decorated_mode(where, method) == "off"
                    or self._body_without_grad(where, method))}
        for base_module, base in self._project_bases(where, klass):
            inherited = self.methods_without_grad(f"{base_module}.{base.qualname}", depth + 1)
            off |= inherited - set(klass.methods)
        self._methods_without_grad[absolute] = frozenset(off)
        return self._methods_without_grad[absolute]

    def _body_without_grad(self, module: str, method: Function) -> bool:
        """A method that switches grad off around all its own work: every call it makes on
        the object (``self._internal_predict(x)``, ``self(x)``) sits in a ``with
        torch.no_grad():`` block of its own (nnU-Net's ``predict_3D``), mode switches
        (``self.eval()``) aside. Its callers build no graph through it."""
        own = [site for site in method.sites
               if (site.callee == "self" or site.callee.startswith("self."))
               and site.callee.rsplit(".", 1)[-1] not in ("eval", "train")]
        return bool(own) and all(self._innermost(module, site.switches, 0) == "off"
                                 for site in own)

    def _callers_mode(self, module: str, function: Function) -> GradMode | None:
        """The mode every project call site of ``function`` runs it in, its decorators left
        out (an override does not inherit them)."""
        key = f"{module}.{function.qualname}"
        if key in self._called_modes:
            return self._called_modes[key]
        if key in self._in_progress or len(self._in_progress) > _MAX_DEPTH:
            return "unknown"
        self._in_progress.add(key)
        try:
            mode = _combine([*self._site_modes(key, function),
                             *self._overridden_modes(module, function)])
        finally:
            self._in_progress.discard(key)
        self._called_modes[key] = mode
        return mode

    def _overridden_modes(self, module: str, function: Function) -> list[GradMode]:
        """A method that overrides a project base class's method is called where the base's
        callers call it (``self.inference(im)`` in the base's decorated predict loop): the
        mode of those call sites, when the project decides one. The base method's own
        decorators stay with it: ``@torch.no_grad()`` on an abstract ``predict`` does not
        switch grad off in the subclass's ``predict``."""
        owner, _, name = function.qualname.rpartition(".")
        klass = self._classes.get(module, {}).get(owner)
        inherited = self._inherited(module, klass, name, 0) if klass is not None else None
        if inherited is None:
            return []
        mode = self._callers_mode(*inherited)
        return [] if mode is None else [mode]

    def _delegates_to(self, module: str, caller: Function, key: str) -> bool:
        """Is ``caller`` a method that overrides the base-class method ``key`` (and so
        calls it as its own base implementation)?"""
        owner, _, name = caller.qualname.rpartition(".")
        if not owner or not key.endswith(f".{name}"):
            return False
        klass = self._classes.get(module, {}).get(owner)
        inherited = None if klass is None else self._inherited(module, klass, name, 0)
        return inherited is not None and f"{inherited[0]}.{inherited[1].qualname}" == key

    def _project_bases(self, module: str, klass: Class) -> Iterator[tuple[str, Class]]:
        """The direct bases of ``klass`` that the project defines, with their modules."""
        for base in klass.bases:
            found = self.definition(self.resolve(module, base))
            if found is not None and isinstance(found[1], Class):
                yield found[0], found[1]

    def _inherited(self, module: str, klass: Class, name: str,
                   depth: int) -> tuple[str, Function] | None:
        """The nearest project base class's own definition of method ``name``."""
        if depth > _MAX_DEPTH:
            return None
        for where, base_class in self._project_bases(module, klass):
            method = self._functions[where].get(f"{base_class.qualname}.{name}")
            if method is not None:
                return where, method
            deeper = self._inherited(where, base_class, name, depth + 1)
            if deeper is not None:
                return deeper
        return None

    def _site_modes(self, key: str, function: Function) -> list[GradMode | None]:
        modes: list[GradMode | None] = []
        for module, caller, site in self._callers_of(key):
            if caller is not None and f"{module}.{caller.qualname}" == key:
                continue  # recursion says nothing about how the outside world calls it
            if _in_tests(module):
                # A test calling a library helper directly checks it on toy data; the
                # library's own call sites say how it runs.
                continue
            if caller is not None and self._delegates_to(module, caller, key):
                # An override handing on to this base method (`Base.fit(self, data)`,
                # `super().fit(data)`) runs in the mode of the override's callers, which are
                # the base's callers again: a cycle that says nothing.
                continue
            modes.append(self._mode_at(module, caller, site.switches))
        # Handed to a runner that calls its parameter: the mode at that call in the runner.
        for module, caller, site in self._callers_of(key + "#passed"):
            runner = self.definition(self.resolve(
                module, site.callee, caller.qualname if caller is not None else ""))
            if runner is None:
                continue
            where, callee = runner
            if not isinstance(callee, Function):
                continue
            slots = {slot for slot, passed in site.passed
                     if self.resolve(module, passed) == key}
            params = [p for i, p in enumerate(callee.params) if str(i) in slots or p in slots]
            if callee.params[:1] in (("self",), ("cls",)):
                params += [callee.params[int(s) + 1] for s in slots
                           if s.isdigit() and int(s) + 1 < len(callee.params)]
            for param, switches in callee.param_calls:
                if param in params:
                    modes.append(self._mode_at(where, callee, switches))
        return modes

    def _mode_at(self, module: str, caller: Function | None,
                 switches: tuple[Switch, ...]) -> GradMode | None:
        mode = self._innermost(module, switches, 0)
        if mode is not None:
            return mode
        if caller is None:
            return "on"  # module-level code runs with grad on
        found = self.function_mode(module, caller)
        return "on" if found is None else found

    def method_call_modes(self, name: str) -> list[GradMode | None]:
        """The grad modes of every project call site of a method ``name`` on any receiver
        (``model.predict(x)``, ``self.predict(x)``): no receiver's class is known here."""
        known = self._method_modes.get(name)
        if known is None:
            suffix = f".{name}"
            known = self._method_modes[name] = [
                self._mode_at(module, function, site.switches)
                for module, summary in self.summaries.items()
                for function, sites in [(None, summary.sites),
                                        *((f, f.sites) for f in summary.functions)]
                for site in sites if site.callee.endswith(suffix)]
        return known

    def eval_called(self, module: str, function: Function) -> bool:
        """Some caller switched a model to ``.eval()`` before calling it (``model.eval();
        beam_search(model, src)``): the function runs inference."""
        key = f"{module}.{function.qualname}"
        sites = self._callers_of(key)
        # A caller that switches to eval and then backpropagates (frozen batch norm while
        # training) makes no inference code of what it calls, and a helper that training
        # code calls too (a generic forward dispatcher) runs in whatever mode its caller has.
        # Nor does an eval caller that calls it with grad off (``with torch.no_grad():
        # out = forward_helper(model, batch)``): there it runs as it should, and a caller
        # that neither trains nor switches grad off (a runner that backpropagates through a
        # helper of its own) leaves the helper's mode to its callers.
        # So is a helper that only module-level functions named for evaluation call
        # (``predict_pdf`` -> ``_weibull_pdf``), where one of them leaves grad on, in torch
        # code (a script's ``evaluate_pipeline`` that runs an ONNX runtime makes no
        # inference code of the helpers it calls).
        by_name = bool(sites) and all(site.in_evaluation and self._imports_torch(site_module)
                                      for site_module, _, site in sites)
        return any((site.after_eval or by_name)
                   and self._mode_at(site_module, caller, site.switches) != "off"
                   for site_module, caller, site in sites) and not any(
            caller is not None and _trains(caller) for _, caller, _ in sites)

    def _imports_torch(self, module: str) -> bool:
        return any(imp.target == "torch" or imp.target.startswith("torch.")
                   for imp in self.summaries[module].imports)

    def side_job(self, module: str, function: Function) -> bool:
        """Called only as a statement inside training loops (``sample_images(G, step)``), and
        trains nothing itself: work done on the side of training, such as sampling."""
        key = f"{module}.{function.qualname}"
        sites = self._callers_of(key)
        return (bool(sites) and all(s.discarded and s.in_backward_loop for _, _, s in sites)
                and not _trains(function))

    def unsummarised_callees(self) -> set[str]:
        """Absolute names called after ``.eval()`` or from a training loop whose module has
        no summary: inference code no prefilter saw, or a helper a training loop relies on
        (one that clears gradients). For ``self.model(x)`` in a method, the class the object
        assigned to ``self.model`` (``self.model = Net()``, ``Net`` from a sibling module):
        whether it is an ``nn.Module`` shows only in its own module's summary."""
        wanted: set[str] = set()
        for module, function, site in self._call_index()[1]:
            scope = function.qualname if function else ""
            names = [self.resolve(module, site.callee, scope)]
            if site.callee.startswith("self.") and function is not None:
                ctor = self._attribute_ctor(module, scope, site.callee.split(".")[1])
                if ctor is not None:
                    names.append(self.resolve(module, ctor))
            for name in names:
                if "#" not in name and name not in wanted and self.definition(name) is None:
                    wanted.add(name)
        return wanted

    def _attribute_ctor(self, module: str, method: str, attribute: str) -> str | None:
        """The class, as written, that the method's class assigns to ``self.attribute``."""
        owner = method.rpartition(".")[0]
        klass = self._classes.get(module, {}).get(owner)
        if klass is None:
            return None
        return next((ctor for name, ctor in klass.attributes if name == attribute), None)

    def undefined_names(self, module: str) -> set[str]:
        """Absolute names the module's view looks up (what it calls and imports) that no
        summarised module defines, as far as re-exports lead."""
        summary = self.summaries[module]
        names = set(self.imports(module).values())
        names.update(self.resolve(module, site.callee) for site in summary.sites)
        for function in summary.functions:
            names.update(self.resolve(module, site.callee, function.qualname)
                         for site in function.sites)
        return self._undefined(module, names)

    def undefined_bases(self, module: str) -> set[str]:
        """The bases that no summarised module defines of the module's classes that use
        what an inherited method returns (``self.log = self.reduce_loss_dict(...)``)."""
        summary = self.summaries[module]
        return self._undefined(module, {self.resolve(module, base)
                                        for klass in summary.classes
                                        if _inherited_calls(klass, summary)
                                        for base in klass.bases})

    def _undefined(self, module: str, names: set[str]) -> set[str]:
        package = self._package(module)
        found: set[str] = set()
        for name in names:
            end = None if "#" in name or self.definition(name) is not None else (
                self._unresolved(name))
            if end is None:
                continue
            found.add(end)
            if package and end.partition(".")[0] not in self._tops:
                # `from utils import to_device` beside it: a sibling once summarised.
                found.add(f"{package}.{end}")
        return found

    def hooked_methods(self) -> frozenset[str]:
        """Names of the methods that project classes call with each batch of their own
        loader loops (``self.forward_model(batch)``) or with a loader (``self._predict(
        loader)``): a subclass elsewhere that overrides one copies batches though no rule's
        prefilter may have seen its file."""
        return frozenset(name for fed in (self._hooks_fed, self._loaders_fed)
                         for methods in fed.values() for name in methods)

    # ------------------------------------------------------------------ returns, classes

    def returns(self, absolute: str) -> ReturnFact | None:
        """Which elements of what calling a project function (or class instance) returns
        are certainly detached; None when nothing is known to be."""
        found = self.definition(absolute)
        if found is None:
            return None
        where, item = found
        if isinstance(item, Class):
            call = next((self._functions[where].get(f"{item.qualname}.{m}")
                         for m in ("__call__", "forward") if m in item.methods), None)
            if call is None:
                return None
            item = call
        return _return_fact(item)

    def _inherited_returns(self, module: str, klass: Class,
                           summary: ModuleSummary) -> dict[str, ReturnFact]:
        """What the methods that ``klass`` calls on ``self`` and inherits from a project base
        in another module return, where that is known to be detached
        (``self.log = self.reduce_loss_dict(losses)``, ``BaseModel`` elsewhere)."""
        found: dict[str, ReturnFact] = {}
        for name in sorted(_inherited_calls(klass, summary)):
            inherited = self._inherited(module, klass, name, 0)
            if inherited is None or inherited[0] == module:
                continue
            fact = _return_fact(inherited[1])
            if fact is not None:
                found[name] = fact
        return found

    def clears_grad(self, absolute: str, depth: int = 0) -> bool:
        """A project function that clears gradients, itself or through project callees
        (``zero_grads(params)`` in a utilities module)."""
        key = (absolute, depth)
        known = self._clears.get(key)
        if known is not None:
            return known
        found = self.definition(absolute)
        if found is None or depth > 3:
            result = False
        else:
            where, function = found
            result = isinstance(function, Function) and (function.clears_grad or any(
                self.clears_grad(self.resolve(where, site.callee, function.qualname), depth + 1)
                for site in function.sites
            ))
        self._clears[key] = result
        return result

    def _data_helper(self, view: ModuleView, module: str, written: str, absolute: str) -> None:
        """Record a loader wrapper or a blocking device-copy helper of another module."""
        if written in view.wrappers or written in view.movers:
            return
        found = self.definition(absolute)
        if found is None or found[0] == module or not isinstance(found[1], Function):
            return
        function = found[1]
        params = list(function.params)
        if params[:1] in (["self"], ["cls"]) and "." in written:
            params = params[1:]
        if function.yields_param in params:
            view.wrappers[written] = (params.index(function.yields_param), function.yields_param)
        moved = tuple((params.index(p), p) for p in function.moves_params if p in params)
        if moved:
            view.movers[written] = moved
            flag = function.nonblocking_flag
            if flag in params:
                view.mover_flags[written] = (params.index(flag), flag)

    def is_module_class(self, absolute: str, depth: int = 0) -> bool:
        """A project class deriving (through project classes) from an nn.Module-like base."""
        cached = self._module_class.get(absolute)
        if cached is not None:
            return cached
        if depth > _MAX_DEPTH:
            return False
        self._module_class[absolute] = False  # a cycle is no module
        found = self.definition(absolute)
        result = False
        klass = None if found is None else found[1]
        if found is not None and isinstance(klass, Class):
            where = found[0]
            result = "forward" in klass.methods or any(
                self._module_base(self.resolve(where, base), depth) for base in klass.bases
            )
        self._module_class[absolute] = result
        return result

    def batch_params(self, module: str) -> dict[str, tuple[str, ...]]:
        """Methods of the module's classes that a project base class in another module
        calls with each batch of its loader loop (``for batch in train_loader:
        self.training_forward(batch)`` in the base, ``training_forward`` overridden here):
        which parameters get the batch."""
        return self._fed_params(module, self._hooks_fed)

    def batch_makers(self, module: str, fed: Mapping[str, tuple[str, ...]],
                     ) -> dict[str, tuple[str, ...]]:
        """For each method of the module that a project base elsewhere feeds batches
        (``fed``: :meth:`batch_params`): the methods of the object whose results the base's
        loops draw those batches from (``self.train_loader, self.net =
        self.training_prepare(X)`` ... ``for b in self.train_loader: self.training_forward(b)``
        -> ``training_prepare``), where the loops say."""
        found: dict[str, tuple[str, ...]] = {}
        if not fed:
            return found
        classes = {klass.qualname: klass for klass in self.summaries[module].classes}
        for qualname in fed:
            owner, _, name = qualname.rpartition(".")
            klass = classes.get(owner)
            if klass is None:
                continue
            bases = self._bases_elsewhere_of(module, klass)
            made_by: dict[str, set[str]] = defaultdict(set)
            for attribute, maker in (*klass.made_by,
                                     *(pair for _, base in bases for pair in base.made_by)):
                made_by[attribute].add(maker)
            makers: set[str] = set()
            for where, base in bases:
                prefix = f"{base.qualname}."
                for function in self.summaries[where].functions:
                    if not function.qualname.startswith(prefix):
                        continue
                    for site in function.sites:
                        if site.callee != f"self.{name}" or not site.batch_args:
                            continue
                        source = site.batch_source
                        if source.endswith("()"):
                            makers.add(source[len("self."):-2])
                        elif source:
                            makers |= made_by.get(source[len("self."):], set())
            if makers:
                found[qualname] = tuple(sorted(makers))
        return found

    def fed_by_bases(self, module: str) -> bool:
        """Does a base class elsewhere hand batches or loaders to this module's methods?"""
        return bool(self.batch_params(module) or self.loader_params(module))

    def loader_params(self, module: str) -> dict[str, tuple[str, ...]]:
        """Methods of the module's classes that a project base class in another module
        hands a loader itself (``loader = DataLoader(data); return self._predict(loader)``
        in the base, ``_predict`` overridden here to loop over it): which parameters get it."""
        return self._fed_params(module, self._loaders_fed)

    def _fed_params(self, module: str, fed_by_base: dict[tuple[str, str], dict[str, set[str]]],
                    ) -> dict[str, tuple[str, ...]]:
        found: dict[str, tuple[str, ...]] = {}
        if not fed_by_base:  # no base class hands such values to a method of its object
            return found
        own = self._functions.get(module, {})
        for klass in self.summaries[module].classes:
            fed: dict[str, set[str]] = {}
            for where, base in self._bases_elsewhere_of(module, klass):
                for name, keys in fed_by_base.get((where, base.qualname), {}).items():
                    fed.setdefault(name, set()).update(keys)
            for name, keys in fed.items():
                method = own.get(f"{klass.qualname}.{name}")
                if method is None:
                    continue
                params = [p for p in method.params if p not in ("self", "cls")]
                given = {params[int(k)] if k.isdigit() else k for k in keys
                         if (k.isdigit() and int(k) < len(params)) or k in params}
                if given:
                    found[method.qualname] = tuple(sorted(given))
        return found

    @cached_property
    def _hooks_fed(self) -> dict[tuple[str, str], dict[str, set[str]]]:
        """(module, class qualname) -> method name -> the positions or keywords that the
        class's own loader loops give a batch in ``self.method(batch)`` calls."""
        return self._self_calls_giving(0)

    @cached_property
    def _loaders_fed(self) -> dict[tuple[str, str], dict[str, set[str]]]:
        """(module, class qualname) -> method name -> the positions or keywords that the
        class's own methods give a loader in ``self.method(loader)`` calls."""
        return self._self_calls_giving(1)

    def _self_calls_giving(self, which: int) -> dict[tuple[str, str], dict[str, set[str]]]:
        return {(module, owner): calls
                for module, summary in self.summaries.items()
                for owner, calls in self._alone.self_calls(summary)[which].items()}

    def _bases_elsewhere_of(self, module: str, klass: Class) -> tuple[tuple[str, Class], ...]:
        """:meth:`_bases_elsewhere` from the class itself, once per class: every module's
        classes are asked twice (batches and loaders), and deep hierarchies share bases."""
        key = (module, id(klass))
        found = self._elsewhere.get(key)
        if found is None:
            found = self._elsewhere[key] = tuple(self._bases_elsewhere(module, klass, 0))
        return found

    def _bases_elsewhere(self, module: str, klass: Class,
                         depth: int) -> Iterator[tuple[str, Class]]:
        """The project base classes of ``klass`` (transitively) defined in other modules."""
        if depth > _MAX_DEPTH:
            return
        for where, base_class in self._project_bases(module, klass):
            if where != module:
                yield where, base_class
            yield from self._bases_elsewhere(where, base_class, depth + 1)

    def is_plain_loader(self, absolute: str, depth: int = 0) -> bool:
        """A project class named like a DataLoader (``LemmaDataLoader``, ``PReNetLoader``)
        that is none: no base reaches a ``DataLoader`` from outside the project and none of
        its methods calls anything named like a loader (``DataLoader(...)``,
        ``_make_data_loader(...)``). It batches the data itself, so no loader worker pins its
        batches and its constructor takes no ``pin_memory``."""
        if depth > _MAX_DEPTH or not absolute.endswith("Loader"):
            return False
        found = self.definition(absolute)
        if found is None or not isinstance(found[1], Class):
            return False
        return self._builds_no_loader(found[0], found[1], depth)

    def _builds_no_loader(self, module: str, klass: Class, depth: int) -> bool:
        for base in klass.bases:
            absolute = self.resolve(module, base)
            found = self.definition(absolute)
            if found is None or not isinstance(found[1], Class):
                if absolute.rsplit(".", 1)[-1].endswith("DataLoader"):
                    return False  # `class MoleculeDataLoader(DataLoader)`
                continue
            if depth >= _MAX_DEPTH or not self._builds_no_loader(found[0], found[1], depth + 1):
                return False
        prefix = f"{klass.qualname}."
        own = klass.qualname.rsplit(".", 1)[-1]
        # A call named like a loader (`DataLoader(...)`, `_make_data_loader(...)`, a helper
        # that builds one) in its constructor, its iteration or their private helpers: it
        # wraps real loaders. A public method that hands out a DataLoader built from the
        # data (fluke's `as_dataloader()`) or a copy of itself (`clone()`) does not feed
        # its own iteration.
        return not any(
            LOADER_NAME.search(callee := site.callee.rsplit(".", 1)[-1]) and callee != own
            for function in self.summaries[module].functions
            if function.qualname.startswith(prefix)
            and function.qualname[len(prefix):].startswith("_")
            for site in function.sites
        )

    def _module_base(self, absolute: str, depth: int) -> bool:
        """A base class that makes its subclasses modules. A class the project defines is
        judged by its own bases and methods, not by its name: ``class BaseModel(ABC)`` is a
        plain class however it is named. A base from outside the project goes by its name
        (``nn.Module``, ``LightningModule``, ``PreTrainedModel``, ``ResNet``)."""
        found = self.definition(absolute)
        if found is not None and isinstance(found[1], Class):
            return self.is_module_class(absolute, depth + 1)
        return bool(_MODULE_BASE.search(absolute))

    # ------------------------------------------------------------------ views

    def evaluation(self, module: str) -> tuple[frozenset[str], frozenset[str]]:
        """The module's functions that callers run after ``.eval()``, and those only ever
        called on the side of training loops: inference code the module's own text may not
        show."""
        functions = self.summaries[module].functions
        return (frozenset(f.qualname for f in functions if self.eval_called(module, f)),
                frozenset(f.qualname for f in functions if self.side_job(module, f)))

    def reveals(self, module: str) -> bool:
        """Does the rest of the project show code in the module that its own text does not:
        inference code, or per-batch hooks of a loader loop elsewhere?"""
        return any(self.evaluation(module)) or self.fed_by_bases(module)

    def view(self, module: str) -> ModuleView:
        """Everything ``module``'s analyses may ask, answered ahead of time."""
        summary = self.summaries[module]
        view = ModuleView(module, imports=dict(self.imports(module)))
        for switch in _switches_in(summary):
            if switch.name in view.switches:
                continue
            bare = self.switch_mode(module, Switch(switch.name, False))
            called = self.switch_mode(
                module, Switch(switch.name, True, switch.has_args, switch.flag))
            if bare is not None or called is not None:
                view.switches[switch.name] = (bare, called)
        for function in summary.functions:
            mode = self.function_mode(module, function)
            if mode is not None:
                view.function_modes[function.qualname] = mode
        view.eval_called, view.side_jobs = self.evaluation(module)
        referenced: set[str] = set()
        scoped: list[tuple[str, Iterable[Site]]] = [("", summary.sites)]
        scoped += [(f.qualname, f.sites) for f in summary.functions]
        clearers: set[str] = set()
        for scope, sites in scoped:
            for site in sites:
                absolute = self.resolve(module, site.callee, scope)
                referenced.add(absolute)
                if site.callee not in clearers and self.clears_grad(absolute):
                    clearers.add(site.callee)
                self._data_helper(view, module, site.callee, absolute)
        # Copy helpers imported by name but called where no site is recorded (inside a
        # lambda: `map(lambda b: batch_to_device(b, device), features)`).
        for local, absolute in self.imports(module).items():
            if local not in view.movers and local not in view.wrappers:
                self._data_helper(view, module, local, absolute)
                view.wrappers.pop(local, None)
        view.grad_clearers = frozenset(clearers)
        view.plain_loaders = frozenset(
            absolute for local, absolute in self.imports(module).items()
            if local.endswith("Loader") and self.is_plain_loader(absolute))
        for klass in summary.classes:
            attributes: dict[str, str] = {}
            for attribute, ctor in klass.attributes:
                absolute = self.resolve(module, ctor)
                if self.definition(absolute) is not None:
                    attributes[attribute] = absolute
                    referenced.add(absolute)
                    if self.is_module_class(absolute):  # `self.model = Net()`, Net elsewhere
                        view.module_classes = view.module_classes | {absolute}
            if attributes:
                view.attributes[klass.qualname] = attributes
            for base in klass.bases:
                absolute = self.resolve(module, base)
                if self.is_module_class(absolute):
                    view.module_classes = view.module_classes | {absolute}
                elif isinstance((self.definition(absolute) or (None, None))[1], Class):
                    view.plain_classes = view.plain_classes | {absolute}
            if self.is_module_class(f"{module}.{klass.qualname}"):
                view.module_classes = view.module_classes | {f"{module}.{klass.qualname}"}
            inherited = self._inherited_returns(module, klass, summary)
            if inherited:
                view.inherited_returns[klass.qualname] = inherited
            casts = frozenset(
                name for name in _inherited_calls(klass, summary)
                if (found := self._inherited(module, klass, name, 0)) is not None
                and found[0] != module and found[1].host_cast)
            if casts:
                view.host_methods[klass.qualname] = casts
        defined = {f.qualname.rpartition(".")[2] for f in summary.functions}
        view.predict_without_grad = frozenset(
            name for name in sorted(PREDICT_API & defined)
            if "off" in self.method_call_modes(name))
        view.batch_params = self.batch_params(module)
        view.loader_params = self.loader_params(module)
        view.batch_makers = self.batch_makers(module, view.batch_params)
        for absolute in sorted(referenced):
            # A project class built here or held by an attribute (`enc = Encoder(d)`,
            # `self.encoder = Encoder(d)`): the methods it runs without grad.
            off = self.methods_without_grad(absolute)
            if off:
                view.methods_without_grad[absolute] = off
            fact = self.returns(absolute)
            if fact is not None:
                view.returns[absolute] = fact
        methods = {site.callee.rpartition(".")[2] for _, sites in scoped for site in sites
                   if "." in site.callee}
        for name in sorted(methods | set(summary.method_calls)):
            method = self._methods_once.get(name)
            fact = None if method is None else _return_fact(method)
            if fact is not None:
                view.method_returns[name] = fact
        return view

    @cached_property
    def _methods_once(self) -> dict[str, Function]:
        """Method name -> the project's one method of that name: names two project classes
        define, and the protocol every model or trainer has (``forward``, ``step``), are
        left out, so that a receiver of another library's class is not taken for it."""
        seen: dict[str, Function | None] = {}
        for summary in self.summaries.values():
            classes = {c.qualname for c in summary.classes}
            for function in summary.functions:
                owner, _, name = function.qualname.rpartition(".")
                if owner in classes and not name.startswith("__"):
                    seen[name] = None if name in seen else function
        return {name: function for name, function in seen.items()
                if function is not None and name not in _PROTOCOL_METHODS}


# Methods that many libraries' classes define: a call of one names no project method.
_PROTOCOL_METHODS = frozenset({
    "forward", "step", "update", "train", "eval", "predict", "loss", "compute_loss",
    "training_step", "validation_step", "test_step", "generate", "sample", "backward", "get",
    "item", "items", "keys", "values", "to", "run", "fit", "evaluate", "encode", "decode",
    "state_dict", "load_state_dict", "parameters", "zero_grad", "call", "apply", "reset",
    "act", "log", "save", "load",
})


def _trains(function: Function) -> bool:
    return any(site.callee.rsplit(".", 1)[-1] in _TRAINING_CALLS for site in function.sites)


def _inherited_calls(klass: Class, summary: ModuleSummary) -> set[str]:
    """The methods the class's own methods call on ``self``, using what they return, that
    it does not define: a base class's (``self.post_init()``, result unused, is left out)."""
    prefix = f"{klass.qualname}."
    called = {site.callee[len("self."):] for f in summary.functions
              if f.qualname.startswith(prefix) for site in f.sites
              if not site.discarded and site.callee.startswith("self.")
              and site.callee.count(".") == 1}
    return called - set(klass.methods)


def _return_fact(function: Function) -> ReturnFact | None:
    """Per element, is every ``return`` of it detached? Tuples must agree in length. (A
    returned name that might be a grad switch is judged as a value too.)"""
    returns = [r for r in function.returns if r.kind in ("value", "switch")]
    if not returns or len(returns) != len(function.returns):
        return None
    widths = {len(r.detached) for r in returns}
    if len(widths) != 1:
        return None
    detached = tuple(all(r.detached[i] for r in returns) for i in range(widths.pop()))
    if function.falls_through and len(detached) != 1:
        return None
    if not any(detached):
        return None
    return ReturnFact(detached, len(detached) > 1)


def _switches_in(summary: ModuleSummary) -> Iterable[Switch]:
    for function in summary.functions:
        yield from function.decorators
        for site in function.sites:
            yield from site.switches
        for _, switches in function.param_calls:
            yield from switches
    for site in summary.sites:
        yield from site.switches


# (paths, hubs) -> summaries: of the paths, those worth one (a file that may define a copy
# helper), and every hub (a module others star-import: the names they look up live on in it).
# (paths, paths summarised whatever they hold, per path the last names looked up in it)
Fetch = Callable[[list[str], frozenset[str], Mapping[str, frozenset[str]]],
                 Mapping[str, ModuleSummary]]
class _Places:
    """Where each file of a run is: its import root, its module name and the names it can be
    imported by. Worked out once per file for one :func:`build_views` call, which asks again
    for every file in each fetch round."""

    def __init__(self) -> None:
        self._packages: dict[str, bool] = {}  # folder -> holds an __init__.py
        self._located: dict[str, tuple[Path, ModuleName]] = {}
        self._names: dict[str, tuple[tuple[Path, str], ...]] = {}
        # (import root, module name) -> the paths importable by it, for the paths it was
        # built over (the run's files: the same in every call)
        self._by_name: tuple[frozenset[str], dict[tuple[Path, str], list[str]]] | None = None

    def of(self, path: str) -> tuple[Path, ModuleName]:
        found = self._located.get(path)
        if found is None:
            from memlint.project.layout import located

            found = self._located[path] = located(Path(path), self._packages)
        return found

    def names(self, path: str) -> tuple[tuple[Path, str], ...]:
        """(import root, module name there) pairs: see :func:`_names_seen_from`."""
        found = self._names.get(path)
        if found is None:
            root, module = self.of(path)
            found = self._names[path] = tuple(_names_seen_from(root, module.name))
        return found

    def by_name(self, known: Iterable[str]) -> dict[tuple[Path, str], list[str]]:
        """Which of the ``known`` paths each (import root, module name) names."""
        paths = frozenset(known)
        if self._by_name is None or self._by_name[0] != paths:
            index: dict[tuple[Path, str], list[str]] = defaultdict(list)
            for path in sorted(paths):
                for name in self.names(path):
                    index[name].append(path)
            self._by_name = (paths, dict(index))
        return self._by_name[1]


# owner class -> method -> the positions or keywords its own ``self.method(...)`` calls give
SelfCalls = dict[str, dict[str, set[str]]]


class _SummaryFacts:
    """Facts read from one module summary alone, shared by the models :func:`build_views`
    builds in one call (each fetch round builds them afresh over mostly the same summaries);
    keyed by the summary object, which the entry keeps alive."""

    def __init__(self) -> None:
        self._self_calls: dict[int, tuple[ModuleSummary, SelfCalls, SelfCalls]] = {}

    def self_calls(self, summary: ModuleSummary) -> tuple[SelfCalls, SelfCalls]:
        """The methods that a class's own methods call on ``self`` with a batch of a loader
        loop, and with a loader: (batches, loaders)."""
        found = self._self_calls.get(id(summary))
        if found is None:
            batches: SelfCalls = {}
            loaders: SelfCalls = {}
            classes = {c.qualname for c in summary.classes}
            for function in summary.functions:
                owner = function.qualname.rpartition(".")[0]
                if owner not in classes:
                    continue
                for site in function.sites:
                    for keys, into in ((site.batch_args, batches), (site.loader_args, loaders)):
                        if keys:
                            name = site.callee[len("self."):]
                            into.setdefault(owner, {}).setdefault(name, set()).update(keys)
            found = self._self_calls[id(summary)] = (summary, batches, loaders)
        return found[1], found[2]


class Views(Mapping[str, ModuleView]):
    """The views :func:`build_views` promises, each built when first read: a view costs a
    walk of every function's callers, and the runner reads few of a call that a second one
    (after summarising the modules the first found missing) supersedes."""

    def __init__(self, promised: Mapping[str, tuple[ProjectModel, str]]) -> None:
        self._promised = promised
        self._built: dict[str, ModuleView] = {}

    def __getitem__(self, path: str) -> ModuleView:
        view = self._built.get(path)
        if view is None:
            model, module = self._promised[path]
            view = self._built[path] = model.view(module)
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._promised)

    def __len__(self) -> int:
        return len(self._promised)


class ViewMemo:
    """What :func:`build_views` works out that stays true as summaries are added: where files
    are, facts of one summary alone, and the names each module looks up in vain. The runner
    calls it twice (the second time with the modules the first found missing), and each call
    has fetch rounds that add summaries: a module's lookups are worked out again only when a
    module added since could answer one of them (its name leads the looked-up name)."""

    def __init__(self) -> None:
        self.places = _Places()
        self.alone = _SummaryFacts()
        self._seen: dict[str, int] = {}  # path -> id of the summary the entries were made with
        self._undefined: dict[tuple[str, str], set[str]] = {}  # (kind, path) -> names

    def update(self, summaries: Mapping[str, ModuleSummary]) -> None:
        """Forget the entries that a summary added since the last call may change: those
        with a looked-up name under an added module, and every entry of an import root where
        some module star-imports an added one (what a summarised module star-imports is not
        followed further, so the names it would lead to show nowhere)."""
        added = [path for path, summary in summaries.items()
                 if self._seen.get(path) != id(summary)]
        if not added:
            return
        for path in added:
            self._seen[path] = id(summaries[path])
        if not self._undefined:
            return
        names: dict[Path, set[str]] = defaultdict(set)
        for path in added:
            for root, written in self.places.names(path):
                names[root].add(written)
        starred = {imp.target.rpartition(".")[2] for summary in summaries.values()
                   for imp in summary.imports if imp.local == "*"}
        # (`from . import *` names no module: any added one may be it.)
        everything = {root for root, modules in names.items()
                      if "" in starred or any(m.rpartition(".")[2] in starred for m in modules)}
        stale = [key for key, found in self._undefined.items()
                 if (root := self.places.of(key[1])[0]) in everything
                 or _leads_to(found, names.get(root, set()))]
        for key in stale:
            del self._undefined[key]

    def undefined(self, path: str, work_out: Callable[[str], set[str]], module: str,
                  ) -> set[str]:
        """``work_out(module)`` (``undefined_names`` or ``undefined_bases`` of the file at
        ``path``), unless an entry made with the same summaries' answers stands."""
        key = (work_out.__name__, path)
        found = self._undefined.get(key)
        if found is None:
            found = self._undefined[key] = work_out(module)
        return found


def _leads_to(names: Iterable[str], modules: set[str]) -> bool:
    """Does one of the absolute ``names`` start with one of the ``modules``' names?"""
    if not modules:
        return False
    for name in names:
        at = name.find(".")
        while at != -1:
            if name[:at] in modules:
                return True
            at = name.find(".", at + 1)
        if name in modules:
            return True
    return False


# Rounds of fetching: a star-import hub fetched in one round names modules of its own.
_FETCH_ROUNDS = 3


def build_views(summaries: Mapping[str, ModuleSummary], wanted: Iterable[str],
                known: Iterable[str] = (), bare: Iterable[str] = (),
                hooks: Iterable[str] = (), copying: Iterable[str] = (),
                fetch: Fetch | None = None, search_hooks: bool = True,
                memo: ViewMemo | None = None) -> tuple[Views, set[str]]:
    """The views of the ``wanted`` paths, from the summaries of every file known (by path),
    and the paths among ``known`` (every file of the run) whose summary the model would use:
    modules it saw called as inference code or from training loops but not summarised.

    A path in ``bare`` (a file that no rule applies to on its own) gets a view only
    when the rest of the project reveals code in it (:meth:`ProjectModel.reveals`), which
    is when the runner adds a rule for it; otherwise its view would go unread. A path in
    ``hooks`` (a file no rule's prefilter selected) gets one only when it overrides a
    per-batch hook of a base class's loader loop (the cheaper half of that question).

    ``fetch`` is handed the unsummarised paths among ``known`` whose modules a module that
    follows device copies names, where no summary defines the name (``from .utils import
    batch_to_device``); it returns the summaries of those worth one (a file that may define a
    copy helper), and the views are built with them. Such a module is one of ``copying``
    (``wanted`` paths whose rules follow copies) or one that a base class elsewhere feeds
    batches (whose copies the runner then checks).

    ``search_hooks`` False leaves out the search of unsummarised files for overrides of
    per-batch hooks (a second call, whose first made that search already). ``memo``: what
    an earlier call over fewer summaries worked out (:class:`ViewMemo`).

    Files are grouped by import root, one model per root, so that a module name means the
    same file it means to Python. Each view is built when it is first read (:class:`Views`).
    """
    wanted, known, bare, hooks = list(wanted), list(known), list(bare), list(hooks)
    copying = set(copying)
    fetched: dict[str, ModuleSummary] = {}
    memo = memo if memo is not None else ViewMemo()
    places, alone = memo.places, memo.alone
    roots, where = _by_root(summaries, places)
    models = {root: ProjectModel(modules, alone) for root, modules in roots.items()}
    hubs: set[str] = set()  # star-import hubs fetched: what they import is looked up too
    base_modules: set[str] = set()  # fetched for the bases they define
    for _ in range(_FETCH_ROUNDS if fetch is not None else 0):
        assert fetch is not None
        memo.update(summaries)
        # The names the copying modules look up in vain, by root.
        undefined: dict[Path, set[str]] = defaultdict(set)
        for path in (*wanted, *bare, *hooks, *sorted(hubs)):
            found = where.get(path)
            if found is not None and (path in copying or path in hubs
                                      or models[found[0]].fed_by_bases(found[1])):
                undefined[found[0]] |= memo.undefined(
                    path, models[found[0]].undefined_names, found[1])
        # The modules defining the bases of the classes linted here: summarised whatever
        # they hold (a base's methods run on the subclass's object).
        bases: dict[Path, set[str]] = defaultdict(set)
        for path in (*wanted, *sorted(base_modules)):
            found = where.get(path)
            if found is not None:
                bases[found[0]] |= memo.undefined(
                    path, models[found[0]].undefined_bases, found[1])
        based = _modules_of(bases, known, summaries, places)
        looked_up = _wanted_modules(undefined, known, summaries, places)
        named = set(looked_up) | based
        # `from .utils import *` of an unsummarised `utils`: its names are looked up there.
        starred = _modules_of({root: {n for n in names if n.endswith(".*")}
                               for root, names in undefined.items()}, known, summaries, places)
        new = fetch(sorted(named), frozenset(starred | based), looked_up) if named else {}
        if not new:
            break
        hubs |= starred & set(new)
        base_modules |= based & set(new)  # their own bases are looked up next round
        fetched = {**fetched, **new}
        summaries = {**summaries, **new}
        roots, where = _by_root(summaries, places)
        models = {root: ProjectModel(modules, alone) for root, modules in roots.items()}
    promised: dict[str, tuple[ProjectModel, str]] = {}
    for path in wanted:
        found = where.get(path)
        if found is not None:
            promised[path] = models[found[0]], found[1]
    for path in bare:
        found = where.get(path)
        if found is not None and models[found[0]].reveals(found[1]):
            promised[path] = models[found[0]], found[1]
    for path in hooks:
        found = where.get(path)
        if found is not None and path not in promised and models[found[0]].fed_by_bases(
                found[1]):
            promised[path] = models[found[0]], found[1]
    views = Views(promised)
    missing = _modules_of({root: model.unsummarised_callees()
                           for root, model in models.items()}, known, summaries, places)
    for path in fetched:
        # Summarised for a copy helper, but the rest of the project may also show code in
        # it (an override of a base class's per-batch hook): the runner asks again.
        found = where[path]
        if path not in views and models[found[0]].reveals(found[1]):
            missing.add(path)
    hooked = {root: model.hooked_methods() for root, model in models.items()}
    if search_hooks and any(hooked.values()):
        # Unsummarised files of a root whose loader loops feed per-batch hooks, read for a
        # definition of one (a subclass's `def forward_model(`): their copies are batch
        # copies. Only the bytes are searched; the runner summarises what matches.
        # A model's `forward` is defined in most files: too common to be worth reading for.
        patterns = {root: re.compile(rb"def (?:%s)\(" % b"|".join(
            re.escape(n.encode()) for n in sorted(names - MODEL_MACHINERY)))
            for root, names in hooked.items() if names - MODEL_MACHINERY}
        for path in known:
            if path in summaries or path in missing:
                continue
            pattern = patterns.get(places.of(path)[0])
            if pattern is not None and _file_matches(path, pattern):
                missing.add(path)
    return views, missing


def _by_root(summaries: Mapping[str, ModuleSummary], places: _Places,
             ) -> tuple[dict[Path, dict[ModuleName, ModuleSummary]], dict[str, tuple[Path, str]]]:
    """The summaries grouped by import root (with their namespace-package names), and each
    path's root and module name."""
    roots: dict[Path, dict[ModuleName, ModuleSummary]] = defaultdict(dict)
    where: dict[str, tuple[Path, str]] = {}
    for path, summary in summaries.items():
        root, name = places.of(path)
        roots[root][name] = summary
        where[path] = (root, name.name)
    _add_namespace_names(roots)
    return roots, where


def _modules_of(names: Mapping[Path, Iterable[str]], known: Iterable[str],
                summaries: Mapping[str, ModuleSummary], places: _Places) -> set[str]:
    """The unsummarised paths among ``known`` whose module is the module part of one of the
    absolute ``names`` of their import root (``pkg.utils`` of ``pkg.utils.batch_to_device``),
    under any name Python can import it by."""
    return set(_wanted_modules(names, known, summaries, places))


def _wanted_modules(names: Mapping[Path, Iterable[str]], known: Iterable[str],
                    summaries: Mapping[str, ModuleSummary], places: _Places,
                    ) -> dict[str, frozenset[str]]:
    """:func:`_modules_of`'s paths, each with the last names of what is looked up in it
    (``batch_to_device``)."""
    prefixes: dict[Path, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for root, absolute in names.items():
        for name in absolute:
            parts = name.split(".")
            for i in range(1, len(parts)):
                prefixes[root][".".join(parts[:i])].add(parts[-1])
    if not any(prefixes.values()):
        return {}
    index = places.by_name(known)
    found: dict[str, set[str]] = defaultdict(set)
    for root, written in prefixes.items():
        for name, lasts in written.items():
            for path in index.get((root, name), ()):
                if path not in summaries:
                    found[path] |= lasts
    return {path: frozenset(lasts) for path, lasts in found.items()}


def _file_matches(path: str, pattern: re.Pattern[bytes]) -> bool:
    """Does the file hold ``pattern`` where a word starts? The boundary is checked here,
    not by a leading ``\\b``: a pattern that opens with a literal is searched for that
    literal's occurrences only, about ten times faster."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    return any(m.start() == 0 or not _WORD_BYTE.match(data, m.start() - 1)
               for m in pattern.finditer(data))


_WORD_BYTE = re.compile(rb"\w")


# How many folders up a folder without ``__init__.py`` is looked at as a namespace package.
_NAMESPACE_DEPTH = 2


def _add_namespace_names(roots: dict[Path, dict[ModuleName, ModuleSummary]]) -> None:
    """Also name each module as a namespace package would: ``models/resnet.py`` (no
    ``__init__.py`` in ``models/``) is ``models.resnet`` to a script beside ``models/``
    (``from models.resnet import ResNet``) and to its own siblings when they import it so.

    The extra names go into the model of the module's own root and of each ancestor root
    up to ``_NAMESPACE_DEPTH`` folders up; a name a real module already has is kept.
    """
    extra: dict[Path, dict[ModuleName, ModuleSummary]] = defaultdict(dict)
    for root, modules in roots.items():
        for name, summary in modules.items():
            for where_used, written in _names_seen_from(root, name.name):
                if written != name.name and where_used in roots:
                    extra[where_used][ModuleName(written, name.is_package)] = summary
    for root, aliases in extra.items():
        known = {name.name for name in roots[root]}
        for alias, summary in aliases.items():
            if alias.name not in known:
                roots[root][alias] = summary


def _names_seen_from(root: Path, name: str) -> Iterator[tuple[Path, str]]:
    """(import root, module name there) pairs under which module ``name`` of ``root`` can be
    imported: its own, and the namespace-package names (see ``_add_namespace_names``), in
    its own root and in the roots above it."""
    yield root, name
    ancestor, parts = root, [name]
    for _ in range(_NAMESPACE_DEPTH):
        if not ancestor.name.isidentifier() or ancestor.parent == ancestor:
            return
        parts.insert(0, ancestor.name)
        ancestor = ancestor.parent
        written = ".".join(parts)
        yield root, written
        yield ancestor, written

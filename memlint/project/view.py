"""What the project knows that one module needs, as the per-file analyses ask it.

The project model (in the parent process) answers every cross-file question a module can ask
ahead of time and packs the answers into a :class:`ModuleView`: small, picklable, sent with
the file to a worker, and hashed into the result cache's key, so a file is linted again when
a fact it reads changes in another file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from memlint.vocabulary import GradMode


@dataclass(frozen=True)
class ReturnFact:
    """What calling a project function (or an instance of a project class) returns."""

    detached: tuple[bool, ...]  # per element of the returned tuple; one element otherwise
    is_tuple: bool


@dataclass
class ModuleView:
    module: str
    # local name -> absolute dotted name, relative imports resolved
    imports: dict[str, str] = field(default_factory=dict)
    # dotted name as written here -> (mode as a bare decorator, mode when called)
    switches: dict[str, tuple[GradMode | None, GradMode | None]] = field(default_factory=dict)
    # qualname of a function of this module -> the grad mode its body starts in
    function_modes: dict[str, GradMode] = field(default_factory=dict)
    # functions of this module that a caller runs after ``model.eval()``
    eval_called: frozenset[str] = frozenset()
    # functions of this module only ever called, result unused, inside a training loop
    side_jobs: frozenset[str] = frozenset()
    # absolute name of a project function or class -> what calling it returns
    returns: dict[str, ReturnFact] = field(default_factory=dict)
    # class qualname in this module -> method it calls on ``self`` but inherits from a project
    # base in another module -> what calling that method returns
    inherited_returns: dict[str, dict[str, ReturnFact]] = field(default_factory=dict)
    # class qualname in this module -> attribute -> absolute name of the class assigned to it
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    # absolute name of a project class held by such an attribute or built here -> its
    # methods a decorator runs without grad
    methods_without_grad: dict[str, frozenset[str]] = field(default_factory=dict)
    # names of the ``predict()`` API (``PREDICT_API``) defined here that some project call
    # site (``model.predict(x)``, any receiver) runs with autograd off: the project's own way
    # of calling it, which users of the model are taken to follow
    predict_without_grad: frozenset[str] = frozenset()
    # absolute names of project classes (referenced here) that are nn.Module subclasses
    module_classes: frozenset[str] = frozenset()
    # absolute names of project classes used as bases here that are not: a base named like
    # a model (``TabModel``, ``BaseModel``) that the project defines as a plain class
    plain_classes: frozenset[str] = frozenset()
    # absolute names of project classes named like a DataLoader that are none (no DataLoader
    # base, none built inside): they batch the data themselves (``LemmaDataLoader``)
    plain_loaders: frozenset[str] = frozenset()
    # callees as written here that clear gradients (themselves or through project callees)
    grad_clearers: frozenset[str] = frozenset()
    # callees as written here, defined in another module, that hand on the items of one
    # argument (a loader wrapper), and that copy arguments to a device without
    # non_blocking (a ``to_device`` helper): (positional index without self, name)
    wrappers: dict[str, tuple[int, str]] = field(default_factory=dict)
    movers: dict[str, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    # of those movers, the ones whose copies take ``non_blocking`` from a parameter that is
    # off by default: (positional index without self, name) of that parameter
    mover_flags: dict[str, tuple[int, str]] = field(default_factory=dict)
    # class qualname -> the methods it calls on ``self`` and inherits from a project base in
    # another module that hand on a parameter's data on the host (``Function.host_cast``)
    host_methods: dict[str, frozenset[str]] = field(default_factory=dict)
    # method qualname of this module -> the parameters given DataLoader batches unchanged by a
    # loop in a project base class in another module (``self.training_forward(batch)``)
    batch_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # method qualname of this module -> the parameters given a DataLoader itself by a project
    # base class in another module (``self._predict(loader)``: the override loops over it)
    loader_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # method qualname in ``batch_params`` -> the object's methods whose results the base's
    # loops draw its batches from (``training_prepare``, which returns the loader)
    batch_makers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # method name called here -> what the one project method of that name returns, where some
    # of it is detached: for a receiver no name types (``self.models["pi"].loss_parts(x)``)
    method_returns: dict[str, ReturnFact] = field(default_factory=dict)

    def qualify(self, dotted: str) -> str:
        """``dotted`` with its head expanded through this module's imports or definitions."""
        head, _, rest = dotted.partition(".")
        full = self.imports.get(head)
        if full is None:
            return dotted
        return f"{full}.{rest}" if rest else full

    def switch_mode(self, dotted: str, called: bool) -> GradMode | None:
        modes = self.switches.get(dotted)
        if modes is None:
            return None
        return modes[1] if called else modes[0]

    def returns_of(self, dotted: str) -> ReturnFact | None:
        return self.returns.get(self.qualify(dotted))

    def inherited_return(self, class_qualname: str, method: str) -> ReturnFact | None:
        """``self.method(...)`` in the class, the method a project base elsewhere defines."""
        return self.inherited_returns.get(class_qualname, {}).get(method)

    def attribute_class(self, class_qualname: str, attribute: str) -> str | None:
        return self.attributes.get(class_qualname, {}).get(attribute)

    def method_without_grad(self, owner: str, method: str) -> bool:
        """Does the project class ``owner`` (absolute) decorate ``method`` to run with
        gradients off, itself or in a project base?"""
        return method in self.methods_without_grad.get(owner, ())

    def is_module_class(self, dotted: str) -> bool:
        return self.qualify(dotted) in self.module_classes

    def is_plain_class(self, dotted: str) -> bool:
        """A project class, known not to derive from ``nn.Module`` whatever its name."""
        return self.qualify(dotted) in self.plain_classes

    def is_plain_loader(self, dotted: str) -> bool:
        """``LemmaDataLoader`` as written here: a project class that is no DataLoader."""
        return self.qualify(dotted) in self.plain_loaders

    def fed_by_bases(self) -> bool:
        """Does a base class in another module hand batches or loaders to methods here?"""
        return bool(self.batch_params or self.loader_params)

    def fingerprint(self) -> str:
        data = json.dumps(
            [self.module, sorted(self.imports.items()), sorted(self.switches.items()),
             sorted(self.function_modes.items()), sorted(self.eval_called),
             sorted(self.side_jobs),
             sorted((k, v.detached, v.is_tuple) for k, v in self.returns.items()),
             sorted((k, sorted((m, f.detached, f.is_tuple) for m, f in v.items()))
                    for k, v in self.inherited_returns.items()),
             sorted((k, sorted(v.items())) for k, v in self.attributes.items()),
             sorted((k, sorted(v)) for k, v in self.methods_without_grad.items()),
             sorted(self.predict_without_grad),
             sorted(self.module_classes), sorted(self.plain_classes),
             sorted(self.plain_loaders),
             sorted(self.grad_clearers),
             sorted(self.wrappers.items()), sorted(self.movers.items()),
             sorted(self.mover_flags.items()),
             sorted((k, sorted(v)) for k, v in self.host_methods.items()),
             sorted(self.batch_params.items()), sorted(self.loader_params.items()),
             sorted(self.batch_makers.items()),
             sorted((k, v.detached, v.is_tuple) for k, v in self.method_returns.items())],
            separators=(",", ":"),
        )
        return hashlib.blake2b(data.encode(), digest_size=12).hexdigest()

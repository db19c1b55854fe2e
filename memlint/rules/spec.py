"""What the command line knows of a rule before importing it.

Importing a rule means importing libcst, which costs about 0.2 s: most of a pre-commit run
on one file. The parent process only needs a rule's code, defaults and prefilter triggers,
so it works with :class:`RuleSpec` records, read from the generated :mod:`memlint.rules.index`,
and a worker imports the rule classes (and libcst) only for a file that one of them may flag.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlint.diagnostics import FixSafety

if TYPE_CHECKING:
    from memlint.rules.base import Rule


@dataclass(frozen=True)
class RuleSpec:
    """A rule's identity, defaults and triggers, as copied from its class."""

    code: str
    name: str
    module: str
    qualname: str
    default_enabled: bool
    fix_safety: FixSafety | None
    triggers: tuple[str, ...]
    requires: tuple[tuple[str, ...], ...] = ()
    trigger_pattern: bytes | None = None
    code_gate: tuple[str, ...] = ()
    code_requires: tuple[tuple[str, ...], ...] = ()
    skips_test_code: bool = False
    function_local: bool = False
    # The class itself, when the spec was taken from one (rules a test or plugin injects,
    # which cannot be imported by name); None for the generated index.
    rule_class: type[Rule] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, rule: type[Rule]) -> RuleSpec:
        return cls(rule.code, rule.name, rule.__module__, rule.__qualname__,
                   rule.default_enabled, rule.fix_safety, tuple(rule.triggers),
                   tuple(tuple(group) for group in rule.requires), rule.trigger_pattern,
                   tuple(rule.code_gate), tuple(tuple(group) for group in rule.code_requires),
                   rule.skips_test_code, rule.function_local, rule)

    @property
    def ident(self) -> str:
        """Where the rule is defined, for the cache key: moving a rule invalidates results."""
        return f"{self.module}.{self.qualname}"

    def load(self) -> type[Rule]:
        """The rule class; the first call for a generated spec imports its module."""
        if self.rule_class is not None:
            return self.rule_class
        value: object = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            value = getattr(value, part)
        from memlint.rules.base import Rule

        if not (isinstance(value, type) and issubclass(value, Rule)):
            raise TypeError(f"{self.ident} is not a memlint rule")
        return value


def as_specs(rules: Iterable[RuleSpec | type[Rule]]) -> tuple[RuleSpec, ...]:
    """Specs for a mix of specs and rule classes, the forms callers hand the runner."""
    return tuple(r if isinstance(r, RuleSpec) else RuleSpec.of(r) for r in rules)

"""The contract every rule follows: one class, its own docs and its own examples.

A rule is a libcst ``BatchableCSTVisitor``: the engine walks each file once and dispatches
every node to all enabled rules (Fixit's model). Rules read shared facts from
``self.context.analysis`` instead of re-deriving them, and call :meth:`Rule.report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from memlint.diagnostics import FixSafety

if TYPE_CHECKING:
    from memlint.context import FileContext


@dataclass(frozen=True)
class Valid:
    """Code the rule must stay silent on."""

    source: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag, on exactly ``lines`` (1-based, in the dedented source)."""

    source: str
    lines: tuple[int, ...]
    # Expected source after applying this rule's fixes (safe and unsafe); None: no fix offered.
    fixed: str | None = None


@dataclass(frozen=True)
class Fix:
    """Replacements computed on the libcst tree; the fixer makes each one an edit of the file's
    text where the replaced node stands (all of a fix's replacements, or none)."""

    safety: FixSafety
    # original node -> replacement node (cst.RemovalSentinel.REMOVE to delete)
    replacements: Mapping[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel]


@dataclass
class Finding:
    """What a rule reports, before the engine turns it into a positioned Diagnostic."""

    node: cst.CSTNode
    code: str
    name: str
    message: str
    fix: Fix | None = None
    extra: dict[str, object] = field(default_factory=dict)


class Rule(cst.BatchableCSTVisitor):
    """Base class for memlint rules.

    Subclasses set the class attributes below and write their documentation as the class
    docstring in ruff's shape: ``## What it does``, ``## Why is this bad?``, ``## Example``,
    ``## How to fix`` (and ``## Fix safety`` where a fix is offered).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    # On by default? Opt-in rules are enabled through `select`.
    default_enabled: ClassVar[bool] = True
    # The engine skips the rule on a file that contains none of these substrings.
    # An empty tuple means the rule always runs.
    triggers: ClassVar[tuple[str, ...]] = ()
    # Further any-of groups that must all match too (the rule needs, say, both a hidden
    # state and a backward pass), so that broad words alone do not cost a parse.
    requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # A bytes regular expression that must also match, where plain words are too broad.
    trigger_pattern: ClassVar[bytes | None] = None
    # Checked on the parsed code, after the text triggers: the rule can only report in a
    # file whose code holds one of these (`call:backward`, `node:Try`; see memlint.gates).
    code_gate: ClassVar[tuple[str, ...]] = ()
    # Further any-of groups of such tokens that the code must hold too, as `requires` is to
    # `triggers` (a collection in evaluation code, and somewhere a value with a graph).
    code_requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # The rule never reports in test code (`memlint.vocabulary.is_test_code`, judged from the
    # path): such a file is not parsed for it at all.
    skips_test_code: ClassVar[bool] = False
    # The rule reads only the function it reports in, the module's top-level code and
    # imports, and the file's bindings of the names its moves go to: in a file linted only
    # for such rules, the bodies of functions its prefilter rejects are not parsed
    # (memlint.pruning).
    function_local: ClassVar[bool] = False
    # The rule reads comments: a file linted for it is never judged on a tree without them
    # (memlint.fastcst).
    reads_comments: ClassVar[bool] = False
    # The best fix this rule can offer, for `memlint rule` and the README table.
    fix_safety: ClassVar[FixSafety | None] = None
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.findings: list[Finding] = []

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        fix: Fix | None = None,
    ) -> None:
        self.findings.append(
            Finding(
                node=node,
                code=self.code,
                name=self.name,
                message=message or self.message,
                fix=fix,
            )
        )

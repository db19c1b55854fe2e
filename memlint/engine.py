"""Lint one file: prefilter, parse once, run every enabled rule in one batched pass.

Positions are resolved only for files that have findings, so the common case (a clean
file) pays for parsing and one walk, never for PositionProvider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import libcst as cst
from libcst._position import CodeRange

from memlint.context import FileContext
from memlint.diagnostics import Diagnostic, FixSafety
from memlint.dispatch import visit_batched
from memlint.filecheck import INTERNAL_ERROR, PARSE_ERROR, file_diagnostic
from memlint.gates import for_path
from memlint.positions import finding_positions
from memlint.prefilter import applicable_rules
from memlint.rules.base import Finding, Rule

if TYPE_CHECKING:
    import ast

    from memlint.fastcst import Built
    from memlint.project.view import ModuleView


def _no_validation(node: cst.CSTNode) -> None:
    """Stands in for ``CSTNode.__post_init__`` while the parser builds a tree."""


def parse(source: bytes) -> cst.Module:
    """Parse bytes, honouring a PEP 263 coding cookie and the file's line endings.

    Every node libcst builds validates itself in ``__post_init__`` (regular expressions over
    each whitespace string, identifier checks): about 15% of a parse, spent re-checking what
    its own parser just produced (libcst's source says as much). Validation is left out for
    the parse only; nodes built afterwards (fixes) are validated as usual.
    """
    validate = cst.CSTNode.__dict__.get("__post_init__")
    if validate is None:  # a libcst without the hook: nothing to skip
        return cst.parse_module(source)
    setattr(cst.CSTNode, "__post_init__", _no_validation)  # noqa: B010  # a class attribute
    try:
        return cst.parse_module(source)
    finally:
        setattr(cst.CSTNode, "__post_init__", validate)  # noqa: B010


def parse_or_report(path: str, source: bytes) -> cst.Module | Diagnostic:
    """The parsed module, or the one MEM999 diagnostic that says why it does not parse."""
    try:
        return parse(source)
    except cst.ParserSyntaxError as exc:
        return file_diagnostic(path, PARSE_ERROR, f"cannot parse: {exc.message}",
                               exc.raw_line, exc.raw_column + 1)
    except (RecursionError, ValueError, UnicodeDecodeError, SyntaxError) as exc:
        return file_diagnostic(path, PARSE_ERROR, f"cannot parse: {type(exc).__name__}: {exc}")


def decoded_source(source: bytes, module: cst.Module) -> str:
    """The file's text, equal to ``module.code`` but without regenerating it from the tree.

    ``Module.code`` re-renders every node, which costs about as much as parsing; libcst
    round-trips exactly, so decoding the bytes with the encoding it detected gives the same text.
    """
    try:
        return source.decode(module.encoding)
    except (LookupError, UnicodeDecodeError):
        return module.code


def run_rules(context: FileContext, rules: Sequence[type[Rule]]) -> list[Finding]:
    if context.analysis.imports.foreign_framework():
        return []  # another framework's code (a JAX or Warp module): no rule applies
    instances = [rule(context) for rule in for_path(rules, context.path, context.source)]
    visit_batched(context.analysis.tree, instances)
    findings: list[Finding] = []
    for instance in instances:
        findings.extend(instance.findings)
    return findings


def position_findings(context: FileContext, findings: Sequence[Finding],
                      positions: Mapping[cst.CSTNode, CodeRange] | None = None
                      ) -> list[Diagnostic]:
    """Diagnostics at the findings' places (``positions``: known already, else libcst's)."""
    tree = context.analysis.tree
    if positions is None:
        positions = finding_positions(context.module, context.source, tree,
                                      [f.node for f in findings], context.statements)
    out: list[Diagnostic] = []
    for f in findings:
        pos = positions[f.node]
        stmt = tree.enclosing_statement(f.node)
        stmt_pos = positions.get(stmt)
        out.append(
            Diagnostic(
                path=context.path,
                line=pos.start.line,
                column=pos.start.column + 1,
                end_line=pos.end.line,
                end_column=pos.end.column + 1,
                code=f.code,
                name=f.name,
                message=f.message,
                fix=None if f.fix is None else f.fix.safety,
                statement_line=None if stmt_pos is None else stmt_pos.start.line,
            )
        )
    return out


def lint_module(
    context: FileContext, rules: Sequence[type[Rule]]
) -> tuple[list[Finding], list[Diagnostic]]:
    findings = run_rules(context, rules)
    if not findings:
        return [], []
    return findings, position_findings(context, findings)


# Set to judge every file on libcst's own tree (comparing the two, measuring the gain).
LIBCST_ONLY = os.environ.get("MEMLINT_LIBCST_ONLY", "") not in ("", "0")


def source_ranges(context: FileContext, built: Built, findings: Sequence[Finding]
                  ) -> dict[cst.CSTNode, CodeRange] | None:
    """The findings' and their statements' ranges from the source text; None when one of
    them is a node whose range only libcst's tree gives."""
    tree = context.analysis.tree
    ranges: dict[cst.CSTNode, CodeRange] = {}
    for finding in findings:
        for node in (finding.node, tree.enclosing_statement(finding.node)):
            found = built.range_of(node)
            if found is None:
                return None
            ranges[node] = found
    return ranges


def _lint_without_layout(path: str, source: bytes, rules: Sequence[type[Rule]],
                         project: ModuleView | None,
                         statements: tuple[tuple[int, int], ...] | None,
                         tree: ast.Module | None = None) -> list[Diagnostic] | None:
    """The diagnostics as judged on the tree :mod:`memlint.fastcst` builds; None when only
    libcst's own tree can judge the file.

    That tree costs about half of libcst's parse and holds every node a rule reads; the
    source text gives a finding's position and the code a message quotes. Rules that read
    comments, files the stdlib tree cannot rebuild, a finding on a node whose position the
    text does not give, and any failure go to libcst's tree, which alone also gives fixes.
    """
    if LIBCST_ONLY or any(rule.reads_comments for rule in rules):
        return None
    from memlint import fastcst

    built = fastcst.build(source, tree)
    if built is None:
        return None
    context = FileContext(path=path, source=decoded_source(source, built.module),
                          module=built.module, project=project, statements=statements,
                          text_of=built.text_of)
    try:
        findings = run_rules(context, rules)
        if not findings:
            return []
        ranges = source_ranges(context, built, findings)
        return None if ranges is None else position_findings(context, findings, ranges)
    except MemoryError:
        raise
    except Exception:  # RecursionError included: libcst's tree decides, and reports it
        return None


def lint_source(path: str, source: bytes, rules: Sequence[type[Rule]],
                project: ModuleView | None = None, *,
                prefiltered: bool = False,
                statements: tuple[tuple[int, int], ...] | None = None,
                tree: ast.Module | None = None) -> list[Diagnostic]:
    """All diagnostics for one file, before suppression comments are applied.

    ``project``: what the project model knows that this module needs (facts from other
    files); without it the file is judged on its own. ``prefiltered``: the caller already
    chose the rules that apply. ``statements``: the top-level statements' lines from the
    scan pass (:func:`~memlint.astwalk.statement_lines`), so that placing findings needs no
    second stdlib parse of the file; ``tree``: the scan's stdlib tree of ``source``, so that
    building the tree to lint needs none either.

    Never raises for a problem in the file: a syntax error becomes MEM999 and an unexpected
    failure inside a rule becomes MEM997, so one bad file cannot stop a run.
    """
    active = list(rules) if prefiltered else applicable_rules(source, rules)
    if not active:
        return []
    quick = _lint_without_layout(path, source, active, project, statements, tree)
    if quick is not None:
        return sorted(quick, key=Diagnostic.sort_key)
    module = parse_or_report(path, source)
    if isinstance(module, Diagnostic):
        return [module]
    context = FileContext(path=path, source=decoded_source(source, module), module=module,
                          project=project, statements=statements)
    try:
        _, diagnostics = lint_module(context, active)
    except RecursionError:
        return [file_diagnostic(path, INTERNAL_ERROR, "file is nested too deeply to analyse")]
    except MemoryError:
        raise  # the worker reports it (memlint.filecheck)
    except Exception as exc:
        return [file_diagnostic(path, INTERNAL_ERROR,
                                f"internal error while linting: {type(exc).__name__}: {exc}")]
    return sorted(diagnostics, key=Diagnostic.sort_key)


__all__ = ["FixSafety", "applicable_rules", "lint_module", "lint_source", "parse"]

"""Apply the fixes rules computed, ruff's way: safe by default, unsafe on request.

Fixes are node replacements on the libcst tree, applied by a transformer, so comments,
formatting, the coding cookie and line endings survive untouched. Each pass applies every
fix that does not overlap an earlier one, then lints the result again; passes repeat until
nothing is left to fix (bounded), which makes a second ``--fix`` a no-op. A result that no
longer parses is never kept, and a file is replaced atomically and only if nobody changed
it while memlint was working.
"""

from __future__ import annotations

import ast
import difflib
import os
import stat
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

import libcst as cst

from memlint.config import Settings
from memlint.context import FileContext
from memlint.diagnostics import ENGINE_CODES, Diagnostic, FixSafety
from memlint.engine import lint_module, lint_source, parse
from memlint.notebook import is_notebook
from memlint.prefilter import applicable_rules
from memlint.rules.base import Finding, Fix, Rule
from memlint.rules.mem998_unused_noqa import resolve_unused_findings
from memlint.rules.spec import RuleSpec, as_specs
from memlint.runner import RunResult, display_path
from memlint.suppression import index_for

# Enough for fixes that uncover further fixes; a rule whose fix keeps re-firing stops here.
MAX_PASSES = 10

NodeT = TypeVar("NodeT", bound=cst.CSTNode)
Pair = tuple[Finding, Diagnostic]
# Decides which findings of a file stand; by default, what a lint run would report.
FindingFilter = Callable[[FileContext, list[Pair]], list[Pair]]


def keep_all(context: FileContext, pairs: list[Pair]) -> list[Pair]:
    return pairs


def standing_findings(context: FileContext, pairs: list[Pair]) -> list[Pair]:
    """The findings a lint run would report: suppression comments applied, MEM998 resolved.

    A suppressed finding is never fixed, and an unused-noqa fix removes only the codes that
    silenced nothing.
    """
    index = index_for(context.source)
    kept = {id(d) for d in index.apply([d for _, d in pairs], unsuppressible=ENGINE_CODES)}
    return resolve_unused_findings(context, index, [(f, d) for f, d in pairs if id(d) in kept])


class FileChangedError(Exception):
    """The file on disk is no longer the content the fixes were computed from."""


@dataclass
class FixResult:
    path: str
    original: bytes
    fixed: bytes
    applied: int = 0
    remaining: list[Diagnostic] = field(default_factory=list)
    # Why fixing stopped early (a fix that would not parse, an internal error), if it did.
    problem: str | None = None
    encoding: str = "utf-8"
    # A notebook: (cell number, old source, new source) of each changed cell, for the diff.
    cells: list[tuple[int, str, str]] | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


class _ApplyReplacements(cst.CSTTransformer):
    def __init__(self, replacements: Mapping[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel]):
        super().__init__()
        self.replacements = replacements

    def on_leave(
        self, original_node: NodeT, updated_node: NodeT
    ) -> NodeT | cst.RemovalSentinel | cst.FlattenSentinel[NodeT]:
        replacement = self.replacements.get(original_node)
        if replacement is None:
            return updated_node
        # A rule's replacement stands where the original stood; libcst checks the type.
        return cast(NodeT, replacement)


def allowed(fix: Fix, unsafe: bool) -> bool:
    return fix.safety is FixSafety.SAFE or unsafe


def non_overlapping(context: FileContext, fixes: Sequence[Fix]) -> list[Fix]:
    """Fixes whose replaced nodes neither coincide with nor nest in an earlier chosen fix's.

    The rest wait for the next pass, where they are recomputed on the updated tree.
    """
    tree = context.analysis.tree
    claimed: set[cst.CSTNode] = set()
    claimed_ancestors: set[cst.CSTNode] = set()
    chosen: list[Fix] = []
    for fix in fixes:
        nodes = list(fix.replacements)
        clash = any(
            n in claimed or n in claimed_ancestors or any(a in claimed for a in tree.ancestors(n))
            for n in nodes
        )
        if clash:
            continue
        chosen.append(fix)
        for n in nodes:
            claimed.add(n)
            claimed_ancestors.update(tree.ancestors(n))
    return chosen


def _compiles(source: bytes) -> bool:
    with warnings.catch_warnings():
        # An invalid escape in the user's code is not our business here.
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            ast.parse(source)
        except (SyntaxError, ValueError):
            return False
    return True


def _still_valid(original: bytes, candidate: bytes) -> bool:
    """The candidate parses with libcst, and with CPython too if the original did."""
    try:
        parse(candidate)
    except Exception:  # any failure means the fix broke the file
        return False
    return _compiles(candidate) or not _compiles(original)


def fix_source(
    path: str,
    source: bytes,
    rules: Sequence[type[Rule]],
    *,
    unsafe: bool = False,
    keep: FindingFilter = standing_findings,
) -> FixResult:
    """Fix ``source`` in memory; the result says what changed and which diagnostics remain."""
    result = FixResult(path=path, original=source, fixed=source)
    current = source
    for pass_number in range(MAX_PASSES + 1):
        active = applicable_rules(current.decode("utf-8", errors="replace"), rules)
        if not active:
            return result
        try:
            module = parse(current)
            result.encoding = module.encoding
            context = FileContext(path=path, source=module.code, module=module)
            findings, diagnostics = lint_module(context, active)
            pairs = keep(context, list(zip(findings, diagnostics, strict=True)))
        except Exception:  # lint_source reports it as MEM999/MEM997
            result.remaining = lint_source(path, current, rules)
            return result
        fixes = [f.fix for f, _ in pairs if f.fix is not None and allowed(f.fix, unsafe)]
        if not fixes or pass_number == MAX_PASSES:
            result.remaining = sorted((d for _, d in pairs), key=Diagnostic.sort_key)
            return result
        chosen = non_overlapping(context, fixes)
        replacements: dict[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel] = {}
        for fix in chosen:
            replacements.update(fix.replacements)
        try:
            candidate = module.visit(_ApplyReplacements(replacements)).bytes
        except Exception as exc:  # a broken fix must not lose the file
            candidate, result.problem = current, f"a fix could not be applied: {exc}"
        if candidate != current and not _still_valid(source, candidate):
            candidate, result.problem = current, "a fix produced code that does not parse"
        if candidate == current:
            result.remaining = sorted((d for _, d in pairs), key=Diagnostic.sort_key)
            return result
        current = candidate
        result.fixed = current
        result.applied += len(chosen)
    return result  # pragma: no cover - the loop always returns


def unified_diff(result: FixResult) -> str:
    """The fix as a unified diff, ``a/`` and ``b/`` prefixed like git's."""
    if result.cells is not None:  # a notebook: the changed cells, not the JSON
        from memlint.notebook_fix import cell_diff

        return cell_diff(result.path, result.cells)

    def lines(data: bytes) -> list[str]:
        out = data.decode(result.encoding, errors="replace").splitlines(keepends=True)
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += "\n\\ No newline at end of file\n"
        return out

    return "".join(
        difflib.unified_diff(
            lines(result.original), lines(result.fixed),
            fromfile=f"a/{result.path}", tofile=f"b/{result.path}",
        )
    )


def write_if_unchanged(path: Path, original: bytes, new: bytes) -> None:
    """Replace ``path`` with ``new``, unless it no longer holds ``original``.

    The file keeps what makes it the user's: a file without write permission is left alone
    (root can write it, but its owner asked not to), and a file with other hard links, or
    one whose owner a new file could not keep, is rewritten in place so every link and the
    ownership stay. Otherwise the new content goes to a temporary file next to the target
    (``os.replace`` is atomic only within one file system) with the target's permission
    bits and owner, and replaces it atomically. A symlink is followed, so the link stays a
    link.
    """
    target = Path(os.path.realpath(path))
    st = target.stat()
    mode = stat.S_IMODE(st.st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise FileChangedError("not writable; left untouched")
    if st.st_nlink > 1:
        _write_in_place(target, original, new)
        return
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".memlint")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        tmp = os.stat(tmp_name)
        if (tmp.st_uid, tmp.st_gid) != (st.st_uid, st.st_gid):
            try:
                os.chown(tmp_name, st.st_uid, st.st_gid)
            except OSError:
                os.unlink(tmp_name)
                _write_in_place(target, original, new)
                return
        if target.read_bytes() != original:
            raise FileChangedError("changed on disk while fixing; left untouched")
        os.replace(tmp_name, target)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def _write_in_place(target: Path, original: bytes, new: bytes) -> None:
    """Overwrite the file itself (its inode, links and owner stay), as black and ruff do."""
    with open(target, "r+b") as handle:
        if handle.read() != original:
            raise FileChangedError("changed on disk while fixing; left untouched")
        handle.seek(0)
        handle.write(new)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def fix_file(
    path: Path,
    rules: Sequence[type[Rule]],
    *,
    unsafe: bool = False,
    keep: FindingFilter = standing_findings,
    write: bool = True,
    source: bytes | None = None,
) -> FixResult:
    """Fix one file on disk; ``write=False`` computes the result only (``--diff``).

    ``source`` is the content the caller already read, if any; the file is left alone
    should it differ from that by the time the fix is ready.
    """
    data = path.read_bytes() if source is None else source
    if is_notebook(str(path)):
        from memlint.notebook_fix import fix_notebook

        result = fix_notebook(str(path), data, rules, unsafe=unsafe, keep=keep)
    else:
        result = fix_source(str(path), data, rules, unsafe=unsafe, keep=keep)
    if write and result.changed:
        write_if_unchanged(path, data, result.fixed)
    return result


@dataclass
class FixRun:
    """What ``--fix`` / ``--diff`` did across a run."""

    results: list[FixResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def applied(self) -> int:
        return sum(r.applied for r in self.results if r.changed)

    @property
    def changed(self) -> list[FixResult]:
        return [r for r in self.results if r.changed]

    def diff(self) -> str:
        return "".join(unified_diff(r) for r in self.changed)


def apply_fixes(
    files: Sequence[Path],
    lint: RunResult,
    settings: Settings,
    rules: Sequence[RuleSpec | type[Rule]],
    *,
    unsafe: bool,
    write: bool,
    cwd: Path | None = None,
) -> FixRun:
    """Fix the files whose lint results offer an applicable fix.

    Only those files are parsed again, in this process: the lint run, which isolates
    crashes in worker processes, has already shown that they parse. Each file gets the
    rules enabled for it, per-file ignores included.
    """
    here = cwd or Path.cwd()
    by_display = {display_path(path, here): path for path in files}
    enabled = [spec.load() for spec in as_specs(rules) if spec.code in settings.enabled]
    run = FixRun()
    for file in lint.files:
        if not any(d.fix is not None and (d.fix is FixSafety.SAFE or unsafe)
                   for d in file.diagnostics):
            continue
        path = by_display.get(file.path)
        if path is None:
            continue
        ignored = settings.ignored_for(path)
        active = [rule for rule in enabled if rule.code not in ignored]
        try:
            result = fix_file(path, active, unsafe=unsafe, write=write)
        except (OSError, FileChangedError) as exc:
            run.warnings.append(f"{file.path}: not fixed: {exc}")
            continue
        result.path = file.path
        if result.problem is not None:
            run.warnings.append(f"{file.path}: {result.problem}")
        run.results.append(result)
    return run

"""Where a cold lint spends its CPU: the stages of the per-file pipeline, timed one by one.

Runs in one process over a folder of ``.py`` files with the default rules, in the order a
worker does the work, with the worker's own functions: read, text prefilter, stdlib parse and
code gates, module summary (files some rule's code gate keeps, and files that may hold
cross-file facts; any other file is summarised only when the project model asks, in the
parent), the syntax check of files left with no rule (skipped when the stdlib parse
already succeeded), the function bodies a file linted only for function-local rules leaves
out (``memlint.pruning``), the libcst tree built from the stdlib parser (``memlint.fastcst``;
libcst's own parse for a file it cannot rebuild, a rule that reads comments, a finding it
cannot place), tree index, rule visits, positions of findings. It prints each stage's CPU
seconds and share; ``--libcst`` times every file on libcst's own tree instead.

    python bench/profile_stages.py bench/.work/transformers
    python bench/profile_stages.py DIR --select MEM001,MEM010

Use it to decide what to attack next; ``bench/lint_speed.py`` measures the whole command
side by side with the peers.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--select", default="", help="comma-separated rule codes "
                        "(default: the default rules)")
    parser.add_argument("--libcst", action="store_true",
                        help="every file on libcst's tree, as before memlint.fastcst")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")

    from memlint import fastcst
    from memlint.astwalk import statement_lines
    from memlint.context import FileContext
    from memlint.engine import (
        decoded_source,
        parse,
        position_findings,
        run_rules,
        source_ranges,
    )
    from memlint.filecheck import syntax_errors
    from memlint.gates import code_facts, for_path, gated
    from memlint.pool import GC_THRESHOLDS
    from memlint.prefilter import applicable_rules
    from memlint.project.summary import needs_summary, parse_source, summary_of
    from memlint.pruning import blank_ranges, blanked
    from memlint.rules import all_rules
    from memlint.rules.base import Finding

    wanted = {c.strip() for c in args.select.split(",") if c.strip()}
    rules = [r for r in all_rules()
             if (r.code in wanted if wanted else r.default_enabled)]
    stages = dict.fromkeys(("read", "prefilter", "syntax check", "stdlib parse", "summary",
                            "code gates", "pruning", "stdlib tree", "libcst parse",
                            "tree index", "rules",
                            "positions"),
                           0.0)
    files = sorted(args.folder.rglob("*.py"))
    gc.set_threshold(*GC_THRESHOLDS)  # as a worker runs
    lines = linted = findings = fallbacks = 0

    def lap(stage: str, since: float) -> float:
        now = time.process_time()
        stages[stage] += now - since
        return now

    for path in files:
        t = time.process_time()
        source = path.read_bytes()
        t = lap("read", t)
        lines += source.count(b"\n")
        active = applicable_rules(source, for_path(rules, str(path)))
        t = lap("prefilter", t)
        tree = None
        wanted = needs_summary(source) or path.name == "__init__.py"
        if active or wanted:
            tree = parse_source(source, str(path))
            t = lap("stdlib parse", t)
        if active and tree is not None:
            active = gated(active, code_facts(tree, source))
            t = lap("code gates", t)
        if (active or wanted) and tree is not None:  # a file no rule keeps: only if wanted
            summary_of(tree)
            t = lap("summary", t)
        if not active:
            if tree is None:
                syntax_errors(str(path), source)
            lap("syntax check", t)
            continue
        if tree is not None and all(r.function_local for r in active):
            source = blanked(source, blank_ranges(tree, source, active))
        t = lap("pruning", t)
        built = None
        if not args.libcst and not any(r.reads_comments for r in active):
            built = fastcst.build(source)
        t = lap("stdlib tree", t)
        if built is None:
            try:
                module = parse(source)
            except Exception:  # reported as MEM999 by memlint; nothing more to time
                continue
            t = lap("libcst parse", t)
        else:
            module = built.module
        linted += 1
        # The scan pass hands the worker the statements' lines, as here.
        context = FileContext(path=str(path), source=decoded_source(source, module),
                              module=module,
                              statements=None if tree is None else statement_lines(tree.body),
                              text_of=None if built is None else built.text_of)
        context.analysis.tree  # noqa: B018  # built lazily: timed on its own
        t = lap("tree index", t)
        try:
            found: list[Finding] | None = run_rules(context, active)
        except fastcst.Unsupported:  # code libcst renders differently: its tree decides
            found = None
        t = lap("rules", t)
        ranges = None if built is None or not found else source_ranges(context, built, found)
        if built is not None and (found is None or (found and ranges is None)):
            fallbacks += 1  # as the engine does: libcst's tree judges the file again
            module = parse(source)
            context = FileContext(path=str(path), source=decoded_source(source, module),
                                  module=module, statements=context.statements)
            found = run_rules(context, active)
            t = lap("libcst parse", t)
        if found:
            findings += len(found)
            position_findings(context, found, ranges)
        lap("positions", t)

    total = sum(stages.values())
    print(f"{len(files):,} files ({linted:,} linted, {fallbacks} judged again on libcst's "
          f"tree), {lines:,} lines, {findings} findings: "
          f"{total:.1f} CPU s, {lines / total:,.0f} lines per CPU second")
    for stage, seconds in stages.items():
        print(f"  {stage:13s} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

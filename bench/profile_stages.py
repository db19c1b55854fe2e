"""Where a cold lint spends its CPU: the stages of the per-file pipeline, timed one by one.

Runs in one process over a folder of ``.py`` files with the default rules, in the order a
worker does the work (read, prefilter, stdlib parse, module summary, libcst parse, tree
index, rule visits, positions of findings), and prints each stage's CPU seconds and share.
The stdlib-parse row is the syntax check of files no rule applies to; for the others the
summary parses the file itself, so that row counts twice for them.

    python bench/profile_stages.py bench/.work/transformers
    python bench/profile_stages.py DIR --select MEM001,MEM010

Use it to decide what to attack next; ``bench/lint_speed.py`` measures the whole command
side by side with the peers.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--select", default="", help="comma-separated rule codes "
                        "(default: the default rules)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")

    from memlint.context import FileContext
    from memlint.engine import decoded_source, parse, position_findings, run_rules
    from memlint.prefilter import applicable_rules
    from memlint.project.summary import summarise_source
    from memlint.rules import all_rules

    wanted = {c.strip() for c in args.select.split(",") if c.strip()}
    rules = [r for r in all_rules()
             if (r.code in wanted if wanted else r.default_enabled)]
    stages = dict.fromkeys(("read", "prefilter", "stdlib parse", "summary", "libcst parse",
                            "tree index", "rules", "positions"), 0.0)
    files = sorted(args.folder.rglob("*.py"))
    lines = linted = findings = 0

    def lap(stage: str, since: float) -> float:
        now = time.process_time()
        stages[stage] += now - since
        return now

    for path in files:
        t = time.process_time()
        source = path.read_bytes()
        t = lap("read", t)
        lines += source.count(b"\n")
        active = applicable_rules(source, rules)
        t = lap("prefilter", t)
        if not active:
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(source)
            lap("stdlib parse", t)
            continue
        summarise_source(source, str(path))
        t = lap("summary", t)
        try:
            module = parse(source)
        except Exception:  # reported as MEM999 by memlint; nothing more to time
            continue
        t = lap("libcst parse", t)
        linted += 1
        context = FileContext(path=str(path), source=decoded_source(source, module),
                              module=module)
        context.analysis.tree  # noqa: B018  # built lazily: timed on its own
        t = lap("tree index", t)
        found = run_rules(context, active)
        t = lap("rules", t)
        if found:
            findings += len(found)
            position_findings(context, found)
        lap("positions", t)

    total = sum(stages.values())
    print(f"{len(files):,} files ({linted:,} linted), {lines:,} lines, {findings} findings: "
          f"{total:.1f} CPU s, {lines / total:,.0f} lines per CPU second")
    for stage, seconds in stages.items():
        print(f"  {stage:13s} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

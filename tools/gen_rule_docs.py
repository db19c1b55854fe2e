"""Regenerate docs/rules/*.md and the README rule table from the rules' docstrings.

The docstrings are the single source of rule documentation (as in ruff); this script only
copies them out. ``--check`` exits 1 when the generated files are stale, for tests and CI.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from memlint.output.ruledoc import catalogue, render_doc, render_markdown_table
from memlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "rules"
README = ROOT / "README.md"
SECTION = re.compile(r"(<!-- section:rules-table -->\n)(.*?)(<!-- /section:rules-table -->)",
                     re.DOTALL)


def expected() -> dict[Path, str]:
    items = catalogue(all_rules())
    files = {DOCS / f"{code}.md": render_doc(item) for code, item in items.items()}
    readme = README.read_text(encoding="utf-8")
    table = render_markdown_table(items.values())
    files[README] = SECTION.sub(lambda m: m.group(1) + table + m.group(3), readme)
    return files


def stale() -> list[Path]:
    out = [path for path, text in expected().items()
           if not path.exists() or path.read_text(encoding="utf-8") != text]
    known = set(expected())
    out += [p for p in DOCS.glob("*.md") if p not in known]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="report stale files, write nothing")
    args = parser.parse_args()
    if args.check:
        bad = stale()
        for path in bad:
            print(f"stale: {path.relative_to(ROOT)} (run python tools/gen_rule_docs.py)")
        return 1 if bad else 0
    DOCS.mkdir(parents=True, exist_ok=True)
    for path in DOCS.glob("*.md"):
        path.unlink()
    for path, text in expected().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A JSON list of diagnostics, for scripts and dashboards."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo
from memlint.output.text import printable, statistics


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    return json.dumps([{**d.to_json(), "path": printable(d.path)} for d in diagnostics],
                      indent=2) + "\n"


def render_statistics(diagnostics: Sequence[Diagnostic]) -> str:
    rows = [{"code": code, "name": name, "count": n} for n, code, name in statistics(diagnostics)]
    return json.dumps(rows, indent=2) + "\n"

"""GitLab Code Quality report (a JSON list), for merge-request widgets.

Each issue carries a fingerprint that stays the same while the finding does (its code,
path, message and the text of its line, not its line number), so GitLab can tell new
findings from moved ones; repeated identical findings get distinct fingerprints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memlint.diagnostics import ENGINE_CODES, Diagnostic
from memlint.output.ruledoc import RuleInfo


def _fingerprint(d: Diagnostic, seen: dict[str, int]) -> str:
    material = "\0".join([d.code, Path(d.path).as_posix(), d.message])
    digest = hashlib.blake2b(material.encode("utf-8", "surrogateescape"), digest_size=16)
    key = digest.hexdigest()
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 1:
        digest.update(str(seen[key]).encode())
    return digest.hexdigest()


def issue(d: Diagnostic, fingerprint: str) -> dict[str, Any]:
    return {
        "description": (f"{d.code} {d.message}" if d.cell is None
                        else f"{d.code} (cell {d.cell}) {d.message}"),
        "check_name": f"{d.code} {d.name}",
        "fingerprint": fingerprint,
        "severity": "blocker" if d.code in ENGINE_CODES else "major",
        "location": {
            "path": Path(d.path).as_posix(),
            "positions": {
                "begin": {"line": d.line, "column": d.column},
                "end": {"line": d.end_line, "column": d.end_column},
            },
        },
    }


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    seen: dict[str, int] = {}
    return json.dumps([issue(d, _fingerprint(d, seen)) for d in diagnostics], indent=2) + "\n"

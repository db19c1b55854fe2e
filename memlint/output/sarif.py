"""SARIF 2.1.0, the format GitHub code scanning ingests (``github/codeql-action/upload-sarif``).

Locations are URIs relative to ``%SRCROOT%`` (the directory memlint ran in, normally the
repository root in CI), so code scanning can map them onto the checkout. Columns are
1-based Unicode code points, as libcst counts them; the run declares that explicitly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import memlint
from memlint.diagnostics import ENGINE_CODES, Diagnostic
from memlint.output.ruledoc import RuleInfo, engine_info

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str, base: Path) -> str:
    given = Path(path)
    absolute = Path(os.path.abspath(given if given.is_absolute() else base / given))
    try:
        rel = absolute.relative_to(base).as_posix()
    except ValueError:
        # A URI names the bytes of a path: an undecodable byte is percent-encoded as itself.
        return "file://" + quote(os.fsencode(absolute.as_posix()))
    return quote(os.fsencode(rel))


def _rule(item: RuleInfo) -> dict[str, Any]:
    return {
        "id": item.code,
        "name": item.name,
        "shortDescription": {"text": item.summary},
        "fullDescription": {"text": item.doc or item.summary},
        "help": {"text": item.doc or item.summary, "markdown": item.doc or item.summary},
        "defaultConfiguration": {
            "level": "error" if item.code in ENGINE_CODES else "warning",
            "enabled": item.default_enabled,
        },
        "properties": {"tags": ["memlint", "pytorch", "memory"]},
    }


def _result(d: Diagnostic, index: int, base: Path) -> dict[str, Any]:
    uri = _uri(d.path, base)
    location: dict[str, Any] = {"uri": uri}
    if not uri.startswith("file:"):
        location["uriBaseId"] = "%SRCROOT%"
    return {
        "ruleId": d.code,
        "ruleIndex": index,
        "level": "error" if d.code in ENGINE_CODES else "warning",
        "message": {"text": d.message},
        # SARIF has no slot for ruff-style fix safety; a property bag carries it.
        "properties": {"fix": None if d.fix is None else d.fix.value},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": location,
                "region": {
                    "startLine": d.line,
                    "startColumn": d.column,
                    "endLine": d.end_line,
                    "endColumn": d.end_column,
                },
            }
        }],
    }


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    catalogue = dict(rules)
    for d in diagnostics:
        if d.code not in catalogue:
            catalogue[d.code] = (engine_info(d.code) if d.code in ENGINE_CODES
                                 else RuleInfo(d.code, d.name, d.message, "", True, None))
    ordered = sorted(catalogue.values(), key=lambda r: r.code)
    index = {item.code: i for i, item in enumerate(ordered)}
    base_uri = "file://" + quote(os.fsencode(base.resolve().as_posix())).rstrip("/") + "/"
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "memlint",
                "version": memlint.__version__,
                "semanticVersion": memlint.__version__,
                "rules": [_rule(item) for item in ordered],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": base_uri}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(d, index[d.code], base.resolve()) for d in diagnostics],
        }],
    }
    return json.dumps(log, indent=2) + "\n"

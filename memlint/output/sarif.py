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
    # SARIF has no slot for ruff-style fix safety; a property bag carries it.
    properties: dict[str, Any] = {"fix": None if d.fix is None else d.fix.value}
    region = (d.line, d.column, d.end_line, d.end_column)
    if d.cell is not None:
        # A notebook: the region is where the code lies in the .ipynb file itself (inside
        # the JSON string of that source line), so a viewer opens the right line; the cell
        # and the position within it travel as properties (docs/notebooks.md).
        from memlint.notebook import region_in_file

        region = region_in_file(d) or (1, 1, 1, 1)
        properties.update(cell=d.cell, cellLine=d.line, cellColumn=d.column,
                          cellEndLine=d.end_line, cellEndColumn=d.end_column)
    return {
        "ruleId": d.code,
        "ruleIndex": index,
        "level": "error" if d.code in ENGINE_CODES else "warning",
        "message": {"text": d.message},
        "properties": properties,
        "locations": [{
            "physicalLocation": {
                "artifactLocation": location,
                "region": {
                    "startLine": region[0],
                    "startColumn": region[1],
                    "endLine": region[2],
                    "endColumn": region[3],
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

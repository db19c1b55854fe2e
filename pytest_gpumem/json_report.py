"""The ``--gpumem-json`` file: one object per measured test, for dashboards and CI diffs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_gpumem.atomicfile import write_text_atomically

FORMAT_VERSION = 1


def render(records: Sequence[dict[str, Any]]) -> str:
    ordered = sorted(records, key=lambda r: str(r.get("nodeid", "")))
    return json.dumps({"format": FORMAT_VERSION, "tests": ordered}, indent=2, sort_keys=True) + "\n"


def write_json_report(path: Path, records: Sequence[dict[str, Any]]) -> None:
    write_text_atomically(path, render(records))

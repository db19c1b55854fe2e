"""The generated rule pages and README table must match the rules' docstrings."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_rule_docs.py"


def load_tool() -> ModuleType:
    """By path: the tests run from outside the checkout, where ``tools`` is not importable."""
    spec = importlib.util.spec_from_file_location("gen_rule_docs", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rule_docs_are_regenerated() -> None:
    assert load_tool().stale() == [], "run: python tools/gen_rule_docs.py"

"""The generated rule pages and README table must match the rules' docstrings."""

from __future__ import annotations

from tools.gen_rule_docs import stale


def test_rule_docs_are_regenerated() -> None:
    assert stale() == [], "run: python tools/gen_rule_docs.py"

"""Every rule's own valid/invalid examples run as tests (Fixit's model)."""

from __future__ import annotations

import textwrap

import pytest

from memlint.engine import lint_source
from memlint.rules import all_rules
from memlint.rules.base import Invalid, Rule, Valid

VALID = [
    pytest.param(rule, case, id=f"{rule.code}-valid-{i}")
    for rule in all_rules()
    for i, case in enumerate(rule.valid)
]
INVALID = [
    pytest.param(rule, case, id=f"{rule.code}-invalid-{i}")
    for rule in all_rules()
    for i, case in enumerate(rule.invalid)
]


def _lines(rule: type[Rule], source: str) -> list[int]:
    diags = lint_source("example.py", textwrap.dedent(source).encode(), [rule])
    for d in diags:
        assert d.code == rule.code, d
    return sorted(d.line for d in diags)


@pytest.mark.parametrize(("rule", "case"), VALID)
def test_valid_example_is_silent(rule: type[Rule], case: Valid) -> None:
    assert _lines(rule, case.source) == []


@pytest.mark.parametrize(("rule", "case"), INVALID)
def test_invalid_example_is_flagged(rule: type[Rule], case: Invalid) -> None:
    assert _lines(rule, case.source) == sorted(case.lines)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_documented_and_exemplified(rule: type[Rule]) -> None:
    doc = rule.__doc__ or ""
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## How to fix"):
        assert heading in doc, f"{rule.code} docstring lacks {heading!r}"
    assert rule.valid and rule.invalid, f"{rule.code} needs valid and invalid examples"
    assert rule.name == rule.name.lower() and " " not in rule.name

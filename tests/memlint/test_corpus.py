"""The labelled corpus: realistic scripts whose full set of expected diagnostics is known.

Each expected diagnostic is marked on its line with a trailing ``# expect: MEM001`` comment
(several codes separated by commas). Every other line must stay silent, so a near miss that
starts firing fails the test as surely as a missed finding.

Default rules are checked in every file. An opt-in rule is checked in the files that label
it at least once, so a file written for an opt-in rule states its whole expected set.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlint.engine import lint_source
from memlint.rules import all_rules

CORPUS = Path(__file__).parent / "corpus"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")

Label = tuple[str, int, str]


def expected_labels(path: Path) -> set[Label]:
    labels: set[Label] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in match.group(1).split(","):
                if code.strip():
                    labels.add((path.name, lineno, code.strip()))
    return labels


def checked_codes(expected: set[Label]) -> set[str]:
    default = {rule.code for rule in all_rules() if rule.default_enabled}
    return default | {code for _, _, code in expected} | {"MEM999", "MEM997"}


def actual_labels(path: Path, codes: set[str]) -> set[Label]:
    diags = lint_source(str(path), path.read_bytes(), all_rules())
    return {(path.name, d.line, d.code) for d in diags if d.code in codes}


FILES = sorted(CORPUS.glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file_matches_labels(path: Path) -> None:
    expected = expected_labels(path)
    actual = actual_labels(path, checked_codes(expected))
    assert actual - expected == set(), "false positives"
    assert expected - actual == set(), "missed findings"

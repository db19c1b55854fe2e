"""Per-rule precision and recall of memlint on the labelled training-script corpus.

The corpus marks each expected finding with a trailing ``# expect: MEM001`` comment; the
labels are read and the files linted exactly as tests/memlint/test_corpus.py does (default
rules, plus opt-in rules a file labels), so this report and that test cannot disagree.

    python bench/corpus_scores.py [--details]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.memlint.test_corpus import (  # noqa: E402
    FILES,
    Label,
    actual_labels,
    checked_codes,
    expected_labels,
)


@dataclass
class Score:
    true_positives: list[Label] = field(default_factory=list)
    false_positives: list[Label] = field(default_factory=list)
    false_negatives: list[Label] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        found = len(self.true_positives) + len(self.false_positives)
        return len(self.true_positives) / found if found else None

    @property
    def recall(self) -> float | None:
        wanted = len(self.true_positives) + len(self.false_negatives)
        return len(self.true_positives) / wanted if wanted else None


def score(files: Iterable[Path]) -> dict[str, Score]:
    scores: dict[str, Score] = defaultdict(Score)
    for path in files:
        expected = expected_labels(path)
        actual = actual_labels(path, checked_codes(expected))
        for label in expected & actual:
            scores[label[2]].true_positives.append(label)
        for label in actual - expected:
            scores[label[2]].false_positives.append(label)
        for label in expected - actual:
            scores[label[2]].false_negatives.append(label)
    return dict(sorted(scores.items()))


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def table(scores: dict[str, Score]) -> str:
    rows = ["| Rule | TP | FP | FN | Precision | Recall |", "|---|---:|---:|---:|---:|---:|"]
    total = Score()
    for code, s in scores.items():
        rows.append(f"| {code} | {len(s.true_positives)} | {len(s.false_positives)} "
                    f"| {len(s.false_negatives)} | {_ratio(s.precision)} | {_ratio(s.recall)} |")
        total.true_positives += s.true_positives
        total.false_positives += s.false_positives
        total.false_negatives += s.false_negatives
    rows.append(f"| all | {len(total.true_positives)} | {len(total.false_positives)} "
                f"| {len(total.false_negatives)} | {_ratio(total.precision)} "
                f"| {_ratio(total.recall)} |")
    return "\n".join(rows)


def details(scores: dict[str, Score]) -> str:
    lines: list[str] = []
    for code, s in scores.items():
        for kind, labels in (("false positive", s.false_positives),
                             ("missed", s.false_negatives)):
            lines.extend(f"{name}:{line}: {code} {kind}" for name, line, _ in sorted(labels))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true",
                        help="list every false positive and missed finding")
    args = parser.parse_args(argv)
    if not FILES:
        print("error: the corpus (tests/memlint/corpus/*.py) is empty", file=sys.stderr)
        return 2
    scores = score(FILES)
    print(f"{len(FILES)} corpus files\n")
    print(table(scores))
    if args.details and (text := details(scores)):
        print("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

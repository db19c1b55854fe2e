"""The ecosystem check: memlint on real PyPI packages it was not written for, against labels.

Downloads pinned source distributions (``pip download --no-binary :all: --no-deps``) into
``bench/.work/ecosystem/``, runs memlint on them with the default rules and with every
rule, and compares the findings with ``bench/ecosystem_labels.csv``: one row per finding
someone read and judged (``TP``/``FP``), or per real case memlint should report (``FN``),
with a reason in the labeller's own words (never the third-party code).

It prints, per rule: findings, labelled TP/FP, precision, the labelled misses found and
still missed (recall over those), and lists findings that are new since the labels (not
labelled yet) and labelled findings that vanished, plus the run time.

    python bench/ecosystem.py                     # download (once), lint, compare
    python bench/ecosystem.py --unlabelled new.csv   # also write unlabelled findings as rows
    python bench/ecosystem.py --packages timm skorch
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work" / "ecosystem"
LABELS = REPO / "bench" / "ecosystem_labels.csv"
FIELDS = ("package", "version", "path", "line", "rule", "verdict", "reason")

# Packages whose source distributions hold training or evaluation code (loops, trainers,
# engines, tests and examples that train), pinned so that labels stay valid.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("accelerate", "1.15.0"),
    ("avalanche-lib", "0.6.0"),
    ("captum", "0.9.0"),
    ("d2l", "1.0.3"),
    ("diffusers", "0.42.1"),
    ("espnet", "202511"),
    ("flair", "0.15.1"),
    ("gpytorch", "1.15.2"),
    ("kornia", "0.9.0"),
    ("lightly", "1.6.0"),
    ("lightning", "2.6.6"),
    ("mosaicml", "0.32.1"),
    ("opacus", "1.6.0"),
    ("peft", "0.21.2"),
    ("pykeen", "1.11.1"),
    ("pyro-ppl", "1.9.2"),
    ("pytorch-forecasting", "1.8.0"),
    ("pytorch-ignite", "0.5.5"),
    ("pytorch-metric-learning", "2.9.0"),
    ("pytorch-tabular", "1.2.0"),
    ("sentence-transformers", "6.2.0"),
    ("skorch", "1.4.0"),
    ("speechbrain", "1.1.2"),
    ("stable-baselines3", "2.9.2"),
    ("tianshou", "2.0.1"),
    ("timm", "1.0.31"),
    ("torchgeo", "0.8.1"),
    ("torchmetrics", "1.9.0"),
    ("torchreid", "0.2.5"),
    ("trl", "1.16.0"),
    ("ultralytics", "8.4.190"),
)

Key = tuple[str, str, int, str]  # package, path inside it, line, rule


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    path: str
    line: int
    rule: str
    message: str

    @property
    def key(self) -> Key:
        return self.package, self.path, self.line, self.rule


@dataclass(frozen=True)
class Label:
    package: str
    version: str
    path: str
    line: int
    rule: str
    verdict: str
    reason: str

    @property
    def key(self) -> Key:
        return self.package, self.path, self.line, self.rule


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-")


def fetch(name: str, version: str) -> Path:
    """The extracted sdist of one package (downloaded and unpacked once)."""
    target = WORK / "src" / f"{_normalise(name)}-{version}"
    if target.is_dir():
        return target
    downloads = WORK / "sdists"
    downloads.mkdir(parents=True, exist_ok=True)
    found = [p for p in downloads.iterdir() if _normalise(p.name).startswith(
        f"{_normalise(name)}-{version}.")]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
             "--no-deps", f"{name}=={version}", "-d", str(downloads)],
            check=True,
        )
        found = [p for p in downloads.iterdir() if _normalise(p.name).startswith(
            f"{_normalise(name)}-{version}.")]
    archive = found[0]
    scratch = target.with_name(target.name + ".partial")
    scratch.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(scratch)
    else:
        with tarfile.open(archive) as t:
            t.extractall(scratch, filter="data")
    (top,) = list(scratch.iterdir())  # an sdist holds one folder, NAME-VERSION/
    top.rename(target)
    scratch.rmdir()
    return target


def lint(roots: dict[str, Path], select_all: bool,
         select: str | None = None) -> tuple[list[Finding], float]:
    """Every finding in the packages, and the wall time of the one memlint run."""
    versions = {name: version for name, version in PACKAGES}
    args = [sys.executable, "-m", "memlint", "--no-cache", "--isolated", "--exit-zero",
            "--no-respect-gitignore",  # the tree sits under this repository's bench/.work/
            "--output-format", "json", *(["--select", "ALL"] if select_all else []),
            *(["--select", select] if select else []),
            *(str(p) for p in roots.values())]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=WORK)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"memlint failed ({done.returncode}): {done.stderr.strip()}")
    by_root = {str(p.resolve()): name for name, p in roots.items()}
    findings = []
    for item in json.loads(done.stdout):
        path = (WORK / item["path"]).resolve()
        for root, name in by_root.items():
            if str(path).startswith(root + os.sep):
                rel = path.relative_to(root).as_posix()
                if item.get("cell") is not None:  # a notebook: lines count within the cell
                    rel = f"{rel}:cell {item['cell']}"
                findings.append(Finding(name, versions[name], rel, int(item["line"]),
                                        str(item["code"]), str(item["message"])))
                break
    return findings, seconds


def read_labels(path: Path = LABELS) -> list[Label]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Label(r["package"], r["version"], r["path"], int(r["line"]), r["rule"],
                  r["verdict"].strip().upper(), r["reason"])
            for r in csv.DictReader(handle)
        ]


@dataclass
class RuleScore:
    findings: int = 0
    tp: int = 0
    fp: int = 0
    unlabelled: int = 0
    misses_found: int = 0
    misses_left: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        """Over the labelled real cases: TPs plus the FN rows."""
        wanted = self.tp + self.misses_found + self.misses_left
        return (self.tp + self.misses_found) / wanted if wanted else None


def score(findings: Iterable[Finding], labels: Iterable[Label]) -> dict[str, RuleScore]:
    by_key = {label.key: label for label in labels}
    found = {f.key for f in findings}
    scores: dict[str, RuleScore] = defaultdict(RuleScore)
    for f in findings:
        s = scores[f.rule]
        s.findings += 1
        label = by_key.get(f.key)
        if label is None:
            s.unlabelled += 1
        elif label.verdict == "TP":
            s.tp += 1
        elif label.verdict == "FP":
            s.fp += 1
        else:  # a labelled miss that is now reported
            s.misses_found += 1
    for label in by_key.values():
        if label.verdict == "FN" and label.key not in found:
            scores[label.rule].misses_left += 1
    return dict(sorted(scores.items()))


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(title: str, findings: Sequence[Finding], labels: Sequence[Label],
           seconds: float, rules: set[str] | None) -> None:
    relevant = [label for label in labels if rules is None or label.rule in rules]
    scores = score(findings, relevant)
    print(f"\n## {title}: {len(findings)} findings in {seconds:.1f} s")
    print(f"{'rule':<8} {'found':>6} {'TP':>5} {'FP':>5} {'unlab':>6} {'prec':>5} "
          f"{'FN found':>9} {'FN left':>8} {'recall':>7}")
    for rule, s in scores.items():
        print(f"{rule:<8} {s.findings:>6} {s.tp:>5} {s.fp:>5} {s.unlabelled:>6} "
              f"{_ratio(s.precision):>5} {s.misses_found:>9} {s.misses_left:>8} "
              f"{_ratio(s.recall):>7}")
    found = {f.key for f in findings}
    vanished = [label for label in relevant
                if label.verdict in ("TP", "FP") and label.key not in found]
    if vanished:
        print(f"vanished since labelled ({len(vanished)}):")
        for label in vanished:
            print(f"  {label.verdict} {label.package} {label.path}:{label.line} {label.rule}"
                  f"  ({label.reason})")


def write_unlabelled(path: Path, findings: Sequence[Finding], labels: Sequence[Label]) -> int:
    known = {label.key for label in labels}
    rows = [f for f in findings if f.key not in known]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow((*FIELDS, "message"))
        for f in sorted(rows, key=lambda f: f.key):
            writer.writerow((f.package, f.version, f.path, f.line, f.rule, "", "", f.message))
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", help="only these packages (names as pinned)")
    parser.add_argument("--unlabelled", type=Path, help="write unlabelled findings here (CSV)")
    parser.add_argument("--select", metavar="CODES",
                        help="one run with only these rules (for tuning one rule)")
    opts = parser.parse_args(argv)
    chosen = [(n, v) for n, v in PACKAGES if not opts.packages or n in opts.packages]
    roots = {name: fetch(name, version) for name, version in chosen}
    lines = sum(p.read_bytes().count(b"\n") for r in roots.values() for p in r.rglob("*.py"))
    print(f"ecosystem: {len(roots)} packages, {lines:,} lines of Python")
    labels = read_labels()
    from memlint.rules import rule_specs

    default_rules = {spec.code for spec in rule_specs() if spec.default_enabled}
    if opts.select:
        chosen_rules = set(opts.select.split(","))
        found, seconds = lint(roots, select_all=False, select=opts.select)
        report(f"--select {opts.select}", found, labels, seconds, chosen_rules)
        if opts.unlabelled is not None:
            n = write_unlabelled(opts.unlabelled, found, labels)
            print(f"wrote {n} unlabelled findings to {opts.unlabelled}")
        return 0
    default, default_s = lint(roots, select_all=False)
    everything, all_s = lint(roots, select_all=True)
    report("default rules", default, labels, default_s, default_rules)
    report("every rule", everything, labels, all_s, None)
    counts = Counter(f.package for f in default)
    print("\ndefault-rule findings per package: "
          + ", ".join(f"{name} {counts.get(name, 0)}" for name, _ in chosen))
    if opts.unlabelled is not None:
        n = write_unlabelled(opts.unlabelled, everything, labels)
        print(f"wrote {n} unlabelled findings to {opts.unlabelled}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())

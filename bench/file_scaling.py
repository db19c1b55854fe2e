"""Does a file ten times longer cost ten times more? memlint on 1k, 10k and 100k-line files.

Each file is ordinary training code: the corpus's scripts (or, with ``--source DIR``, every
``.py`` under DIR that the stdlib can parse), concatenated until the size is reached and cut
at a top-level statement. Each size is linted cold in a fresh process (``--no-cache -j 1``)
and the CPU seconds of memlint and its worker are printed with the cost per 1,000 lines and
its growth against the smallest size (1.0x everywhere means linear).

    python bench/file_scaling.py
    python bench/file_scaling.py --source bench/.work/ecosystem/src --sizes 1000 10000 100000
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pieces(source: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(source.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        # A __future__ import is only valid at the top of a module.
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith("from __future__"))
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        out.append(text)
    return out


def build(pieces: Sequence[str], lines: int) -> str:
    """At least ``lines`` lines of the pieces, repeated as needed, cut between statements."""
    chunks: list[str] = []
    count = 0
    while count < lines:
        for piece in pieces:
            chunks.append(piece)
            count += piece.count("\n") + 1
            if count >= lines:
                break
    return "\n".join(chunks) + "\n"


def cpu_run(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds (children included) of one cold memlint run on ``path``."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memlint", "--no-cache", "--exit-zero", "-q",
                    "-j", "1", "--file-timeout", "3600", str(path)],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=REPO / "tests" / "memlint" / "corpus")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    args = parser.parse_args(argv)
    pieces = _pieces(args.source)
    if not pieces:
        parser.error(f"no parsable .py file under {args.source}")
    print(f"| Lines | Bytes | Wall s | CPU s | CPU s per 1k lines | vs {args.sizes[0]:,} lines |")
    print("|---:|---:|---:|---:|---:|---:|")
    base: float | None = None
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes:
            text = build(pieces, size)
            path = Path(scratch) / f"lines_{size}.py"
            path.write_text(text, encoding="utf-8")
            lines = text.count("\n")
            wall, cpu = cpu_run(path)
            per_k = 1000 * cpu / lines
            base = per_k if base is None else base
            print(f"| {lines:,} | {len(text.encode()):,} | {wall:.2f} | {cpu:.2f} | "
                  f"{per_k:.3f} | {per_k / base:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

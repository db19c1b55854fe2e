"""``python -m memlint`` behaves exactly like the ``memlint`` console script."""

from __future__ import annotations

from memlint.cli import run

if __name__ == "__main__":
    run()

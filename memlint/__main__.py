"""``python -m memlint`` behaves exactly like the ``memlint`` console script."""

from __future__ import annotations

import sys

from memlint.cli import main

if __name__ == "__main__":
    sys.exit(main())

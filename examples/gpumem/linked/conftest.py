"""Puts this folder on ``sys.path`` so that ``from train import ...`` works however pytest is
started: from here, or as ``pytest examples/gpumem`` from the repository root, whose pytest
configuration imports test files without adding their folder (``--import-mode=importlib``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

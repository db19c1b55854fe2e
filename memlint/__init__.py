"""memlint: a static linter for PyTorch memory hygiene."""

__version__ = "0.1.0"

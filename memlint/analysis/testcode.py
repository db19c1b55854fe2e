"""Is this file test code? Forwards and copies there run on toy data, once.

Several rules leave test code alone: a smoke forward in a test is no evaluation run, and a
batch copied in a test loop is no input pipeline. Judged from the path alone: pytest's own
test modules (``test_*.py``, ``*_test.py``, ``conftest.py``), modules directly inside a
``tests``/``test``/``testing`` folder, and ``testing_*`` helper modules.
"""

from __future__ import annotations

import re

_PYTEST_MODULE = re.compile(r"(?:^|[/\\])(?:test_[^/\\]*|[^/\\]*_test\.py|conftest\.py)$")
_TEST_SUPPORT = re.compile(
    r"(?:^|[/\\])(?:tests?|testing)[/\\][^/\\]+$|(?:^|[/\\])testing_[^/\\]*$"
)


def is_pytest_module(path: str) -> bool:
    """A file pytest collects by default (or its conftest)."""
    return _PYTEST_MODULE.search(path) is not None


def is_test_code(path: str) -> bool:
    """A pytest module or a test-support module."""
    return is_pytest_module(path) or _TEST_SUPPORT.search(path) is not None

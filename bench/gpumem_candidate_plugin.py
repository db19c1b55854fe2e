"""A pytest plugin for ``bench/gpumem_backends.py --suite``: every test phase (setup, call,
teardown) of a real suite runs inside one measuring candidate, named by the environment
variable ``GPUMEM_CANDIDATE``, so the candidates' costs compare on real tests rather than
on one training loop. Only the cost is of interest here; the plugin itself measures with
``--gpumem``.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from gpumem_backends import CANDIDATES

_make = CANDIDATES[os.environ.get("GPUMEM_CANDIDATE", "plain")]


def _phase() -> Generator[None, object, object]:
    with _make():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase())

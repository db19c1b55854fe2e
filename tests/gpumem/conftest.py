"""Helpers for running real pytest sessions with the plugin loaded."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

import pytest

pytest.importorskip("torch", reason="the plugin's measurement tests need torch")

from pytest_gpumem.backends.cpu import warm_up

# In-process pytester runs forget modules first imported inside them; torch's compiler
# stack, imported when the first dispatch mode is entered, cannot be imported twice.
warm_up()

RunGpumem = Callable[..., pytest.RunResult]


def plugin_args() -> tuple[str, ...]:
    """``-p`` for a source checkout; nothing once the ``gpumem`` entry point is installed.

    Loading the module under both names would register it twice, which pluggy refuses.
    """
    if any(ep.name == "gpumem" for ep in entry_points(group="pytest11")):
        return ()
    return ("-p", "pytest_gpumem.plugin")


@pytest.fixture
def run_gpumem(pytester: pytest.Pytester) -> RunGpumem:
    """Run pytest in-process on the pytester directory, with the plugin and extra args."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(*plugin_args(), *args)

    return run

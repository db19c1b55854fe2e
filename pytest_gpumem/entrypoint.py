"""How to name the plugin on a pytest command line, installed or from a source checkout.

Installed, pytest loads it through the ``pytest11`` entry point ``gpumem``; passing
``-p pytest_gpumem.plugin`` as well would register the module under a second name, which
pluggy refuses. From a source checkout there is no entry point, so ``-p`` is needed.
"""

from __future__ import annotations

from importlib.metadata import entry_points

ENTRY_POINT = "gpumem"
MODULE = "pytest_gpumem.plugin"


def plugin_args() -> tuple[str, ...]:
    if any(ep.name == ENTRY_POINT for ep in entry_points(group="pytest11")):
        return ()
    return ("-p", MODULE)

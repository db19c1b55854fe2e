"""Keep a torch this process has imported in ``sys.modules`` across in-process pytest runs.

pytester's in-process runs (``pytester.runpytest()``, the default way to test a plugin) put
``sys.modules`` back as it was before each run, so a torch first imported inside one run
(by ``--gpumem``, or by the test file it runs) is taken out afterwards. Its C extension
stays loaded, and the next run's ``import torch`` then executes torch's Python modules a
second time over it, which fails (``SystemError: ... bad call flags``) or crashes the
process. So when a session ends, the installed-library modules that are loaded alongside
torch are remembered, and when the next session starts, those that were taken out are put
back: the same module objects, which is what a second import must find. Nothing here
imports torch; a process that never imported it remembers nothing.
"""

from __future__ import annotations

import sys
from types import ModuleType

_KEPT: dict[str, ModuleType] = {}


def _library_folders() -> tuple[str, ...]:
    import sysconfig  # only once torch is loaded: not on an ordinary run's start-up path

    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return tuple(sorted(folders))


def remember_torch_modules() -> None:
    """Remember torch's modules and the installed libraries loaded with it (numpy, sympy,
    ...), which no test file defines; called when a session ends."""
    if "torch" not in sys.modules:
        return
    folders = _library_folders()
    for name, module in list(sys.modules.items()):
        if name in _KEPT or not isinstance(module, ModuleType):
            continue
        path = getattr(module, "__file__", None)
        if name == "torch" or name.startswith("torch.") or (
            isinstance(path, str) and path.startswith(folders)
        ):
            _KEPT[name] = module


def restore_torch_modules() -> None:
    """Put back each remembered module something took out of ``sys.modules``; called
    before a session loads its conftests."""
    for name, module in _KEPT.items():
        sys.modules.setdefault(name, module)

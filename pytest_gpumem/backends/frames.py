"""Which stack frames are the user's, so a report names the line that allocated memory.

Torch and the standard library are skipped; pytest, pluggy and this plugin end the walk,
since everything below them is test-runner machinery.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import CodeType, FrameType

from pytest_gpumem.backends.base import Frame

USER, LIBRARY, STOP = 0, 1, 2


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


class FrameFilter:
    """Classifies code objects once each, so walking a stack per allocation stays cheap."""

    def __init__(self) -> None:
        import _pytest
        import pluggy
        import torch

        import pytest_gpumem

        self._stop = tuple(
            os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep
            for m in (_pytest, pluggy, pytest_gpumem)
        )
        torch_dir = os.path.dirname(os.path.abspath(str(torch.__file__))) + os.sep
        self._library = (torch_dir,)
        paths = sysconfig.get_paths()
        self._site = tuple({paths["purelib"] + os.sep, paths["platlib"] + os.sep})
        self._stdlib = tuple({paths["stdlib"] + os.sep, paths["platstdlib"] + os.sep})
        self._kinds: dict[CodeType, int] = {}

    def _classify(self, filename: str) -> int:
        if filename.startswith("<"):
            return LIBRARY  # <frozen importlib...>, <string>
        path = os.path.abspath(filename)
        if path.startswith(self._library):
            return LIBRARY
        if path.startswith(self._stop):
            return STOP
        if path.startswith(self._site):
            return USER  # third-party code under test counts as the user's
        if path.startswith(self._stdlib):
            return LIBRARY
        return USER

    def user_frames(self, frame: FrameType | None, depth: int) -> tuple[Frame, ...]:
        """Up to ``depth`` user frames from ``frame`` outwards, innermost first."""
        out: list[Frame] = []
        kinds = self._kinds
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind == STOP:
                break
            if kind == USER:
                out.append((code.co_filename, frame.f_lineno, code.co_name))
                if len(out) >= depth:
                    break
            frame = frame.f_back
        return tuple(out)

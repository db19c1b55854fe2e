"""Which stack frames are the user's, so a report names the line that allocated memory.

Torch and the standard library are skipped; pytest, pluggy and this plugin end the walk,
since everything below them is test-runner machinery.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable
from types import CodeType, FrameType

from pytest_gpumem.backends.base import Frame

USER, LIBRARY, STOP = 0, 1, 2
# torch.compile's generated kernels live in its cache (/tmp/torchinductor_<user>/ by
# default): torch's code, though outside torch's folder.
_GENERATED = os.sep + "torchinductor_"


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
        self._files: dict[str, int] = {}

    def _classify(self, filename: str) -> int:
        if filename.startswith("<"):
            return LIBRARY  # <frozen importlib...>, <string>
        path = os.path.abspath(filename)
        if path.startswith(self._library) or _GENERATED in path:
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
        if depth <= 0:
            return ()
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

    def user_records(self, records: Iterable[Frame], depth: int) -> tuple[Frame, ...]:
        """The same choice over recorded frames, innermost first: the CUDA allocator's
        history keeps ``(filename, line, function)`` per allocation, not live frames."""
        out: list[Frame] = []
        files = self._files
        for record in records:
            kind = files.get(record[0])
            if kind is None:
                kind = files[record[0]] = self._classify(record[0])
            if kind == STOP:
                break
            if kind == USER:
                out.append(record)
                if len(out) >= depth:
                    break
        return tuple(out)

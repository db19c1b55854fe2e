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
from typing import Any

from pytest_gpumem.backends.base import Frame

USER, LIBRARY, STOP = 0, 1, 2
# A stack as the hot path records it: the id of each user frame's code object and its
# instruction offset (``f_lasti``), flattened (id, offset, id, offset, ...): ints hash
# cheaply, code objects do not. ``resolve`` names the lines.
RawStack = tuple[int, ...]
_MAX_LINES = 200_000  # (code, offset) -> line entries kept before the cache starts over
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
        self._files: dict[str, int] = {}
        self._lines: dict[tuple[CodeType, int], int | None] = {}
        # every code object met, by id: classified once, and kept alive so ids stay unique
        self._codes: dict[int, CodeType] = {}
        self._code_kinds: dict[int, int] = {}
        self._resolved: dict[RawStack, tuple[Frame, ...]] = {}

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
        return self.resolve(self.raw_user_frames(frame, depth))

    def raw_user_frames(self, frame: FrameType | None, depth: int) -> RawStack:
        """``user_frames`` for the per-allocation hot path: the same frames as code ids
        and instruction offsets, so that no line number is worked out for a stack that is
        never reported (reading ``f_lineno`` costs more than the walk's other steps)."""
        if depth <= 0:
            return ()
        out: list[int] = []
        kinds = self._code_kinds
        found = 0
        while frame is not None:
            code = frame.f_code
            ident = id(code)
            kind = kinds.get(ident)
            if kind is None:
                self._codes[ident] = code
                kind = kinds[ident] = self._classify(code.co_filename)
            if kind == STOP:
                break
            if kind == USER:
                out.append(ident)
                out.append(frame.f_lasti)
                found += 1
                if found >= depth:
                    break
            frame = frame.f_back
        return tuple(out)

    def resolve(self, raw: RawStack) -> tuple[Frame, ...]:
        """The ``(filename, line, function)`` frames of a stack from ``raw_user_frames``:
        what ``user_frames`` would have returned while those frames were live."""
        done = self._resolved.get(raw)
        if done is not None:
            return done
        if len(self._resolved) >= _MAX_LINES:
            self._resolved.clear()
            self._lines.clear()
        codes = self._codes
        frames = tuple(
            (code.co_filename, self._line(code, offset), code.co_name)
            for code, offset in zip([codes[i] for i in raw[::2]], raw[1::2], strict=True)
        )
        self._resolved[raw] = frames
        return frames

    def _line(self, code: CodeType, offset: int) -> Any:
        """The line of the instruction at ``offset``, as ``frame.f_lineno`` reads it."""
        key = (code, offset)
        if key in self._lines:
            return self._lines[key]
        line = None
        for start, end, number in code.co_lines():
            if start <= offset < end:
                line = number
                break
        self._lines[key] = line
        return line

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

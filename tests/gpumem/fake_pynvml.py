"""A test double of nvidia-ml-py's ``pynvml``: only the NVML calls pytest_gpumem makes.

It is configured through the ``FAKE_PYNVML`` environment variable (JSON), read on every call,
so the same file works in-process and when copied as ``pynvml.py`` into a pytester session::

    {"library": true,
     "devices": [{"uuid": "GPU-a", "total": 100, "used": 60,
                  "processes": [["self", 40], [4242, 20]]}]}

``"self"`` stands for the calling process's PID; ``"processes": "unsupported"`` makes the
process query fail the way drivers without per-process accounting do.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12
_TEXT = {
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class _Memory:
    total: int
    free: int
    used: int


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None


def _state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads(os.environ.get("FAKE_PYNVML", "{}"))
    return state


def _check_library() -> None:
    if not _state().get("library", True):
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)


def nvmlInit() -> None:
    _check_library()


def nvmlShutdown() -> None:
    _check_library()


def _devices() -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = _state().get("devices", [])
    return devices


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < len(_devices()):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return index


def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
    for index, device in enumerate(_devices()):
        if device.get("uuid") == uuid:
            return index
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    device = _devices()[handle]
    return _Memory(
        total=device["total"], free=device["total"] - device["used"], used=device["used"]
    )


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[_Process]:
    processes = _devices()[handle].get("processes", [])
    if processes == "unsupported":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [
        _Process(pid=os.getpid() if pid == "self" else int(pid), usedGpuMemory=used)
        for pid, used in processes
    ]

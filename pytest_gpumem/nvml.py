"""The driver's view of GPU memory through NVML (``nvidia-ml-py``, module ``pynvml``).

The caching allocator only sees tensors. NVML also sees the CUDA context, NCCL buffers,
cuDNN/cuBLAS handles and other libraries in the process (CuPy, JAX, TensorRT), which is
what decides whether a whole process fits on a given card.

Per-process figures come from the driver's list of compute processes. Inside a container
the driver reports host PIDs, so our own PID is often missing from that list; we then fall
back to the device-wide "used" figure and say so in the reading's ``note``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from pytest_gpumem.units import format_bytes

Scope = Literal["process", "device"]


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message is one line meant for the user."""


@dataclass(frozen=True)
class NvmlReading:
    used_bytes: int
    total_bytes: int
    scope: Scope
    note: str = ""


def import_pynvml() -> ModuleType:
    """Import ``pynvml`` only when asked, so plain runs never pay for or trip over it."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise NvmlUnavailable(
            "the NVML view needs nvidia-ml-py (pip install nvidia-ml-py), which is not installed"
        ) from None
    except Exception as exc:  # e.g. the deprecated 'pynvml' package warning under -W error
        raise NvmlUnavailable(f"importing pynvml failed: {type(exc).__name__}: {exc}") from None


def nvml_device_key(cuda_index: int, visible_devices: str | None) -> int | str:
    """Translate a CUDA device index into NVML's numbering (an index or a UUID).

    NVML ignores ``CUDA_VISIBLE_DEVICES`` and numbers every GPU in the machine, so CUDA's
    device 0 under ``CUDA_VISIBLE_DEVICES=2,3`` is NVML's device 2.
    """
    if not visible_devices:
        return cuda_index
    tokens = [token.strip() for token in visible_devices.split(",") if token.strip()]
    if cuda_index >= len(tokens):
        raise NvmlUnavailable(
            f"CUDA device {cuda_index} is not among CUDA_VISIBLE_DEVICES={visible_devices!r}"
        )
    token = tokens[cuda_index]
    if token.isdigit():
        return int(token)
    return token  # a GPU-/MIG- UUID


class NvmlView:
    """An initialised NVML session watching one GPU on behalf of one process."""

    def __init__(self, nvml: Any, handle: object, pid: int, label: str) -> None:
        self._nvml = nvml
        self._handle = handle
        self._pid = pid
        self.label = label

    @classmethod
    def open(
        cls,
        cuda_index: int,
        *,
        env: Mapping[str, str] | None = None,
        pid: int | None = None,
        nvml: Any = None,
    ) -> NvmlView:
        environ = os.environ if env is None else env
        module: Any = import_pynvml() if nvml is None else nvml
        key = nvml_device_key(cuda_index, environ.get("CUDA_VISIBLE_DEVICES"))
        try:
            module.nvmlInit()
        except module.NVMLError as exc:
            raise NvmlUnavailable(
                f"NVML is not usable here ({exc}); is an NVIDIA driver installed?"
            ) from None
        try:
            if isinstance(key, int):
                handle = module.nvmlDeviceGetHandleByIndex(key)
            else:
                handle = module.nvmlDeviceGetHandleByUUID(key)
        except module.NVMLError as exc:
            module.nvmlShutdown()
            raise NvmlUnavailable(f"NVML has no GPU {key!r} ({exc})") from None
        return cls(module, handle, os.getpid() if pid is None else pid, f"nvml:{key}")

    def close(self) -> None:
        self._nvml.nvmlShutdown()

    def read(self) -> NvmlReading:
        """This process's GPU memory, or the whole device's when NVML cannot tell."""
        nvml = self._nvml
        info = nvml.nvmlDeviceGetMemoryInfo(self._handle)
        try:
            processes = list(nvml.nvmlDeviceGetComputeRunningProcesses(self._handle))
        except nvml.NVMLError as exc:
            reason = f"NVML cannot list processes ({exc})"
        else:
            mine = [proc for proc in processes if proc.pid == self._pid]
            used = [proc.usedGpuMemory for proc in mine]
            if mine and all(isinstance(value, int) for value in used):
                return NvmlReading(sum(used), int(info.total), "process")
            if mine:
                reason = "the driver does not report per-process memory here"
            elif processes:
                reason = (
                    f"pid {self._pid} is not among the {len(processes)} PIDs NVML lists "
                    "(inside a container the driver reports host PIDs)"
                )
            else:
                reason = "NVML lists no compute processes (containers often hide them)"
        note = f"device-wide used memory, including other processes: {reason}"
        return NvmlReading(int(info.used), int(info.total), "device", note)


def outside_allocator(reading: NvmlReading, reserved: int, allocated: int) -> str:
    """One line on what the driver counts beyond torch's caching allocator.

    NVML's figure is every byte the driver gave the process (or the device); the allocator
    reserved part of it, and live tensors use part of that. The rest is not tensor memory:
    the CUDA context (kernel images, per-thread stacks), library handles and workspaces that
    bypass the allocator (cuDNN, NCCL), and other libraries in the process.
    """
    whose = "this process" if reading.scope == "process" else "the whole device"
    outside = reading.used_bytes - reserved
    return (
        f"{whose} uses {format_bytes(reading.used_bytes)} by NVML; torch's caching allocator "
        f"reserved {format_bytes(reserved)} of it ({format_bytes(allocated)} in live tensors, "
        f"{format_bytes(reserved - allocated)} cached for reuse); the other "
        f"{format_bytes(outside)} is outside the allocator: the CUDA context, library handles "
        "and buffers that bypass it (cuDNN, NCCL), and other libraries"
        + ("" if reading.scope == "process" else ", plus every other process on the device")
    )

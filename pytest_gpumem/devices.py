"""Which GPU an xdist worker owns.

Each worker process is pinned to one CUDA device, so peaks measured by different workers
never mix on a shared device's counters (peak statistics are per process *and* device).
Workers are spread round-robin over ``--gpumem-devices`` or, by default, every visible
device: worker ``gwN`` gets ``devices[N % len(devices)]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

_WORKER = re.compile(r"^gw(\d+)$")


class DeviceConfigError(Exception):
    """A device option the user gave cannot be used; the message is one line."""


def worker_id(env: Mapping[str, str] | None = None) -> str:
    """The xdist worker id (``gw0``...) or ``"main"`` for a run without xdist workers."""
    environ = os.environ if env is None else env
    return environ.get("PYTEST_XDIST_WORKER") or "main"


def worker_index(worker: str) -> int | None:
    match = _WORKER.match(worker)
    return int(match.group(1)) if match else None


def parse_device_list(text: str) -> list[int]:
    """Parse ``--gpumem-devices=0,1,3``."""
    devices: list[int] = []
    for part in text.split(","):
        token = part.strip()
        if not token.isdigit():
            raise DeviceConfigError(
                f"--gpumem-devices={text!r}: expected comma-separated CUDA indices like '0,1'"
            )
        devices.append(int(token))
    return devices


def parse_memory_fraction(text: str) -> float:
    try:
        fraction = float(text)
    except ValueError:
        fraction = -1.0
    if not 0.0 < fraction <= 1.0:
        raise DeviceConfigError(
            f"--gpumem-memory-fraction={text!r}: expected a number in (0, 1], e.g. 0.45"
        )
    return fraction


@dataclass(frozen=True)
class Pinning:
    worker: str
    device_index: int | None  # None: not pinned (CPU backend, or no worker)


def pick_device(worker: str, devices: list[int], visible_count: int) -> Pinning:
    """Choose this worker's CUDA device; ``devices`` empty means all visible ones."""
    index = worker_index(worker)
    pool = devices or list(range(visible_count))
    unknown = [device for device in pool if device >= visible_count]
    if unknown:
        raise DeviceConfigError(
            f"--gpumem-devices names device {unknown[0]}, but only {visible_count} CUDA "
            "device(s) are visible"
        )
    if index is None or not pool:
        return Pinning(worker, pool[0] if devices else None)
    return Pinning(worker, pool[index % len(pool)])

"""Reading the CUDA caching allocator's recorded history: which blocks a test left alive,
and which were alive at its peak.

The allocator's counters say how much; only its history says where. Each entry of
``torch.cuda.memory._snapshot()["device_traces"][device]`` is one action on one block
(``alloc``, ``free_requested``, ``free_completed``, segment actions), with the block's
address, size, a time stamp and the Python frames that made it. This module replays those
entries; it imports no torch, so the replay is tested on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_gpumem.backends.base import Frame

# A block stops counting as allocated when its free is requested: the allocator's
# ``allocated_bytes`` drops then, even if a stream still uses it until free_completed.
_FREES = frozenset({"free_requested", "free_completed"})

Entry = Mapping[str, Any]
Block = tuple[int, int, tuple[Frame, ...]]  # (address, size, user frames)
PickFrames = Callable[[Iterable[Frame]], tuple[Frame, ...]]


def entries_between(
    trace: Sequence[Entry], start_us: int, end_us: int | None = None
) -> list[Entry]:
    """The entries stamped in ``[start_us, end_us]`` (Unix microseconds, the clock of
    ``time.time_ns() // 1000``); none when the trace carries no time stamps."""
    return [
        e for e in trace
        if "time_us" in e and int(e["time_us"]) >= start_us
        and (end_us is None or int(e["time_us"]) <= end_us)
    ]


def recorded_frames(entry: Entry) -> list[Frame]:
    """An entry's frames as ``(filename, line, function)``, innermost first."""
    return [
        (str(f.get("filename", "?")), int(f.get("line", 0)), str(f.get("name", "?")))
        for f in entry.get("frames") or ()
    ]


def _block(entry: Entry, pick: PickFrames) -> Block:
    return int(entry.get("addr", 0)), int(entry.get("size", 0)), pick(recorded_frames(entry))


def surviving_blocks(entries: Iterable[Entry], pick: PickFrames) -> list[Block]:
    """Blocks allocated by these entries and not freed by them, in allocation order."""
    live: dict[int, Entry] = {}
    for entry in entries:
        action = entry.get("action")
        if action == "alloc":
            live[int(entry.get("addr", 0))] = entry
        elif action in _FREES:
            live.pop(int(entry.get("addr", 0)), None)
    return [_block(e, pick) for e in live.values()]


def blocks_at_peak(entries: Iterable[Entry], pick: PickFrames) -> list[Block]:
    """Blocks allocated by these entries and alive at the moment their net allocation was
    highest (frees of older blocks count against it, as they do in the allocator's peak)."""
    live: dict[int, Entry] = {}
    net = best = 0
    at_best: list[Entry] = []
    dirty = False  # the live set is copied at the first free after a new high, not per alloc
    for entry in entries:
        action = entry.get("action")
        if action == "alloc":
            live[int(entry.get("addr", 0))] = entry
            net += int(entry.get("size", 0))
            if net > best:
                best, dirty = net, True
        elif action in _FREES:
            if dirty:
                at_best, dirty = list(live.values()), False
            address = int(entry.get("addr", 0))
            if action == "free_requested" or address in live:
                net -= int(entry.get("size", 0))
            live.pop(address, None)
    if dirty:
        at_best = list(live.values())
    return [_block(e, pick) for e in at_best]

"""The cheap text prefilter: a rule runs on a file only if the file holds one of its triggers.

It reads raw bytes (triggers are ASCII, and Python source encodings are ASCII-compatible),
so a file that no rule applies to is neither decoded nor parsed, and it needs no libcst:
the command line applies it to rule specs before any rule class is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Protocol, TypeVar


class Triggered(Protocol):
    """What the prefilter reads of a rule: rule classes and rule specs both have it."""

    @property
    def triggers(self) -> tuple[str, ...]: ...

    @property
    def requires(self) -> tuple[tuple[str, ...], ...]: ...

    @property
    def trigger_pattern(self) -> bytes | None: ...


T = TypeVar("T", bound=Triggered)


def applicable_rules(text: str | bytes, rules: Iterable[T]) -> list[T]:
    """The rules whose trigger groups all match somewhere in the file, and whose pattern does."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return [r for r in rules
            if all(not group or any(t in data for t in group)
                   for group in _byte_groups(r.triggers, r.requires))
            and (r.trigger_pattern is None or _pattern(r.trigger_pattern).search(data))]


@cache
def _pattern(source: bytes) -> re.Pattern[bytes]:
    return re.compile(source)


@cache
def _byte_groups(triggers: tuple[str, ...], requires: tuple[tuple[str, ...], ...]
                 ) -> tuple[tuple[bytes, ...], ...]:
    """The trigger groups as bytes; each non-empty group needs one match."""
    return tuple(tuple(t.encode("utf-8") for t in group) for group in (triggers, *requires))

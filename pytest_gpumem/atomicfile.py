"""Whole-file writes that a killed run cannot leave half done."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary sibling, then rename it over ``path`` in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""Whole-file writes that a killed run cannot leave half done, and output paths checked
before a run starts rather than after it ends."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


class OutputPathError(OSError):
    """An output file the run could never write; the message is one line."""


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary sibling, then rename it over ``path`` in one step.

    The file gets the permissions any new file gets (0666 less the umask), as a plain
    ``open`` would give it; ``tempfile.mkstemp`` would leave a report or baseline readable
    by its owner only, which a CI step running as another user cannot upload.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_output(path: Path, what: str) -> None:
    """Make sure ``path`` can be written at the end of the run: its folder exists (created
    now if need be) and is writable, and the path is not a folder. Raises
    :class:`OutputPathError` with one line saying why not."""
    if path.is_dir():
        raise OutputPathError(f"{what} {path} is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(
            f"cannot create the folder of {what} {path}: {exc.strerror or exc}"
        ) from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {what} {path}: its folder is not writable")


def check_output_folder(path: Path, what: str) -> None:
    """Make sure files can be written into the folder ``path`` during the run, without
    creating it yet: it is a folder or can be made one (its nearest existing ancestor is a
    writable folder). Raises :class:`OutputPathError` with one line saying why not."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == path else f" ({existing} is a file)"
        raise OutputPathError(f"{what} {path} is not a folder{where}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {what} {path}: {existing} is not writable")

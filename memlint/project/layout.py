"""Where modules are: a file's dotted module name, and the files of the package it is in.

A file's import root is the nearest folder above it without an ``__init__.py``: in
``repo/pkg/sub/mod.py`` with ``pkg/__init__.py`` and ``pkg/sub/__init__.py`` the module is
``pkg.sub.mod``; a script with no ``__init__.py`` beside it is a top-level module named
after itself, as Python imports it when run from its folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memlint.config import DEFAULT_EXCLUDE

# Folders never searched for a package's modules: the discovery defaults.
_SKIP_DIRS = frozenset(DEFAULT_EXCLUDE)
# A package too large to index for a one-file run is indexed no further than this.
MAX_PACKAGE_FILES = 5000


@dataclass(frozen=True)
class ModuleName:
    name: str  # dotted
    is_package: bool  # an __init__.py: relative imports start from the module itself


def module_name(path: Path) -> ModuleName:
    return located(path)[1]


def located(path: Path, packages: dict[str, bool] | None = None) -> tuple[Path, ModuleName]:
    """The import root (the folder Python would put on ``sys.path``) and the module name.

    Modules resolve each other's imports only under the same root: two ``train.py`` scripts in
    different folders are different modules. ``packages``: which folders hold an
    ``__init__.py``, as learnt so far, for a caller that locates many files of one tree at
    one time (one ``stat`` per folder instead of one per file and level).
    """
    absolute = os.path.abspath(path)
    folder, file = os.path.split(absolute)
    stem = file[:-3] if file.endswith(".py") else Path(file).stem
    is_package = stem == "__init__"
    parts: list[str] = [] if is_package else [stem]
    known = {} if packages is None else packages
    while True:
        parent, name = os.path.split(folder)
        if parent == folder:
            break
        package = known.get(folder)
        if package is None:
            package = known[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
        if not package:
            break
        parts.append(name)
        folder = parent
    return Path(folder), ModuleName(".".join(reversed(parts)) or stem, is_package)


def package_files(paths: Iterable[Path], covered: Iterable[Path] = ()) -> list[Path]:
    """Every Python file of the packages the given files belong to (once each), and of the
    modules and packages beside their import root that they import by a top-level name
    (``from models.resnet import ResNet`` in a ``train.py`` next to ``models/``: Python finds
    them there when the file runs), so that a one-file run sees what a run over the folder
    does. Files inside a ``covered`` folder add nothing (the run discovers those itself)."""
    folders = [Path(os.path.abspath(c)) for c in covered]

    def inside_covered(path: Path) -> bool:
        return any(path == f or f in path.parents for f in folders)

    named = [Path(os.path.abspath(p)) for p in paths]
    named = [p for p in named if not inside_covered(p)]
    trees: set[Path] = set()
    packages: dict[str, bool] = {}  # one stat per folder
    for path in named:
        top, located_as = located(path, packages)
        if located_as.is_package or "." in located_as.name:  # in a package: all of it
            trees.add(top / located_as.name.partition(".")[0])
        for head in _imported_heads(path):
            module = top / head
            if module.is_dir() and (any(module.glob("*.py"))):
                trees.add(module)  # a package, or a namespace package of modules
            elif module.with_suffix(".py").is_file():
                trees.add(module.with_suffix(".py"))
    found: list[Path] = []
    seen: set[Path] = set()
    for tree in sorted(t for t in trees if not inside_covered(t)):
        walked = [(str(tree.parent), [], [tree.name])] if tree.is_file() else os.walk(tree)
        for folder, dirs, files in walked:
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    file = Path(folder) / name
                    if file not in seen:
                        seen.add(file)
                        found.append(file)
                        if len(found) >= MAX_PACKAGE_FILES:
                            return found
    return found


# `import a, b as c` / `from a.b import c` at the start of a line: the top-level names. Lines
# are found from the word `import` (a literal the regular expression engine skips to, ten
# times faster than trying every line start), then read from their start.
_IMPORT_WORD = re.compile(rb"import[ \t]")
_IMPORT_LINE = re.compile(rb"[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([^\n#;]+))")


def _imported_heads(path: Path) -> set[str]:
    """The top-level module names a file imports absolutely (read from its text: a name too
    many costs a folder walk, a name missed only leaves the file judged with less)."""
    try:
        data = path.read_bytes()
    except OSError:
        return set()
    heads: set[str] = set()
    done = -1  # the start of the last line read
    for word in _IMPORT_WORD.finditer(data):
        start = data.rfind(b"\n", 0, word.start()) + 1
        if start == done:
            continue
        done = start
        match = _IMPORT_LINE.match(data, start)
        if match is None:
            continue
        names = [match.group(1)] if match.group(1) else match.group(2).split(b",")
        for name in names:
            words = name.split(b".")[0].split()
            if words:
                heads.add(words[0].decode("ascii", "replace"))
    return {h for h in heads if h.isidentifier()}

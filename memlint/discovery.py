"""Which files a run lints: walk directories like git would see them, never loop on links.

Directories are walked without following symbolic links to directories (as git and ruff do),
so a symlink loop cannot hang the walk. ``.gitignore`` files from the repository root down
to each file apply, and exclude patterns (gitignore syntax, relative to the project root)
prune whole directories. Explicitly named files are linted even when excluded, unless
``force_exclude`` is set: pre-commit names every changed file explicitly.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from memlint.config import DEFAULT_INCLUDE


@dataclass(frozen=True)
class Skipped:
    """A path memlint could not or would not lint, and why, for a one-line warning."""

    path: Path
    reason: str


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def _git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _global_excludes_file() -> Path | None:
    """git's ``core.excludesFile`` from the user's configuration, else its default path.

    Read from the config files directly (the common ``[core] excludesFile = PATH`` form):
    starting ``git`` for one setting would cost more than the rest of a small run.
    """
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    for config in (xdg / "git" / "config", home / ".gitconfig"):
        try:
            text = config.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("["):
                section = line.strip("[]").strip().lower()
            elif section == "core" and "=" in line:
                key, _, value = line.partition("=")
                if key.strip().lower() == "excludesfile":
                    return Path(os.path.expanduser(value.strip().strip('"')))
    return xdg / "git" / "ignore"


class GitignoreRules:
    """The ``.gitignore`` files that apply to a path, loaded once per directory."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._roots: dict[Path, Path] = {}
        self._repo_specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._matchers: dict[tuple[Path, Path], Callable[[str, bool], bool] | None] = {}

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            spec: pathspec.GitIgnoreSpec | None = None
            try:
                lines = (directory / ".gitignore").read_text(encoding="utf-8").splitlines()
                spec = pathspec.GitIgnoreSpec.from_lines(lines)
            except (OSError, UnicodeDecodeError):
                spec = None
            self._specs[directory] = spec
        return self._specs[directory]

    def _top(self, directory: Path) -> Path:
        """The repository root above a directory, or the directory itself outside git."""
        if directory not in self._roots:
            self._roots[directory] = _git_root(directory) or directory
        return self._roots[directory]

    def _repository_spec(self, top: Path) -> pathspec.GitIgnoreSpec | None:
        """The repository's own ``.git/info/exclude`` and the user's global excludes file
        (``core.excludesFile``, else ``$XDG_CONFIG_HOME/git/ignore``), as git reads them:
        below every ``.gitignore`` in precedence."""
        if top in self._repo_specs:
            return self._repo_specs[top]
        lines: list[str] = []
        if (top / ".git").exists():
            for source in (_global_excludes_file(), top / ".git" / "info" / "exclude"):
                if source is None:
                    continue
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    lines += source.read_text(encoding="utf-8").splitlines()
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self._repo_specs[top] = spec
        return spec

    def ignored(self, path: Path, is_dir: bool, top: Path) -> bool:
        """Deeper ``.gitignore`` files override shallower ones, as git resolves them."""
        matcher = self.matcher(path.parent, top)
        return matcher is not None and matcher(path.name, is_dir)

    def matcher(self, directory: Path, top: Path) -> Callable[[str, bool], bool] | None:
        """Whether an entry of ``directory`` (by name) is ignored; None when no ignore file
        applies there (most folders of most trees: nothing to match per file). Worked out
        once per folder of a walk, which asks for each of its entries."""
        key = (directory, top)
        if key in self._matchers:
            return self._matchers[key]
        # (spec, the folder's path relative to the spec's own folder, with a slash), the
        # repository's excludes first, then each .gitignore from the shallowest down.
        specs: list[tuple[pathspec.GitIgnoreSpec, str]] = []
        base = self._repository_spec(top)
        if base is not None and (directory == top or top in directory.parents):
            specs.append((base, _prefix(directory, top)))
        for folder in reversed([directory, *directory.parents]):
            if folder != top and top not in folder.parents:
                continue
            spec = self._spec(folder)
            if spec is not None:
                specs.append((spec, _prefix(directory, folder)))
        found = None if not specs else _gitignore_matcher(tuple(specs))
        self._matchers[key] = found
        return found


def _prefix(directory: Path, folder: Path) -> str:
    rel = directory.relative_to(folder).as_posix()
    return "" if rel == "." else rel + "/"


def _gitignore_matcher(specs: tuple[tuple[pathspec.GitIgnoreSpec, str], ...],
                       ) -> Callable[[str, bool], bool]:
    def ignored(name: str, is_dir: bool) -> bool:
        verdict = False
        for spec, prefix in specs:
            result = spec.check_file(prefix + name + ("/" if is_dir else ""))
            if result.include is not None:
                verdict = result.include
        return verdict
    return ignored


class Excluder:
    """Exclude patterns matched against root-relative paths (and bare names outside root)."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        self.root = root
        self.patterns = tuple(patterns)
        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        # Patterns that are all plain names (the defaults: `build`, `.venv`) exclude a path
        # one of whose parts is one of them: a set lookup per entry of a walk.
        self._names = (frozenset(self.patterns)
                       if all(_PLAIN_NAME.fullmatch(p) for p in self.patterns) else None)
        self._clean: dict[Path, bool] = {}

    def excluded(self, path: Path, is_dir: bool) -> bool:
        rel = _relative(path, self.root)
        if rel is None:
            rel = path.name
        if rel in ("", "."):
            return False
        if self._names is not None:
            return not self._names.isdisjoint(rel.split("/"))
        return self.spec.match_file(rel + ("/" if is_dir else ""))

    def excludes_entry(self, directory: Path, name: str, is_dir: bool) -> bool:
        """``excluded`` for an entry of ``directory`` by its name, as a walk asks."""
        if self._names is None:
            return self.excluded(directory / name, is_dir)
        if name in self._names:
            return True
        clean = self._clean.get(directory)
        if clean is None:
            rel = _relative(directory, self.root)
            # Outside the root only the entry's own name is matched.
            clean = self._clean[directory] = rel is None or self._names.isdisjoint(
                rel.split("/"))
        return not clean


# A gitignore pattern that matches a file or folder of this name at any depth, and nothing
# else: no glob, negation, anchor, escape, comment or trailing space.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]*[A-Za-z0-9_-][A-Za-z0-9_.\-]*")


# A directory's (root, exclude patterns): the config file that governs it (hierarchical).
ExcludeSource = Callable[[Path], tuple[Path, Sequence[str]]]


class Excluders:
    """The excluder for each directory: its governing config's patterns, relative to that
    config's root, as ruff applies nested configs' excludes to their own subtrees."""

    def __init__(self, default: Excluder, source: ExcludeSource | None) -> None:
        self.default = default
        self._source = source
        self._by_dir: dict[Path, Excluder] = {}
        self._by_key: dict[tuple[Path, tuple[str, ...]], Excluder] = {}

    def for_dir(self, directory: Path) -> Excluder:
        if self._source is None:
            return self.default
        found = self._by_dir.get(directory)
        if found is None:
            root, patterns = self._source(directory)
            key = (root, tuple(patterns))
            if key == (self.default.root, tuple(self.default.patterns)):
                found = self.default
            else:
                found = self._by_key.setdefault(key, Excluder(patterns, root))
            self._by_dir[directory] = found
        return found

    def excluded(self, path: Path, is_dir: bool) -> bool:
        return self.for_dir(path.parent).excluded(path, is_dir)


class Includer:
    """Include patterns: the default set is answered from the file name alone (the walk
    asks for every file), others are matched like exclude patterns."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        suffixes = [p[1:] for p in patterns if p.startswith("*.") and "/" not in p
                    and not any(c in p[2:] for c in "*?[")]
        self.suffixes = tuple(suffixes) if len(suffixes) == len(patterns) else None
        self.patterns = Excluder(patterns, root)  # the same gitignore-style matching

    def included(self, path: Path, name: str) -> bool:
        if self.suffixes is not None:
            return name.endswith(self.suffixes)
        return self.patterns.excluded(path, False)


def discover(
    paths: Iterable[Path],
    *,
    root: Path,
    exclude: Sequence[str],
    force_exclude: bool = False,
    respect_gitignore: bool = True,
    include: Sequence[str] = DEFAULT_INCLUDE,
    exclude_source: ExcludeSource | None = None,
) -> Discovery:
    """Every Python file (and notebook) under ``paths``, sorted and de-duplicated.

    ``include``: gitignore-style patterns a file found in a directory must match; a file
    named explicitly is linted whatever its name. ``exclude_source`` gives each directory its
    own exclude patterns (nested configs); ``root``/``exclude`` are the default.
    """
    excluder = Excluders(Excluder(exclude, root), exclude_source)
    included = Includer(include, root)
    gitignore = GitignoreRules()
    found = Discovery()
    seen: set[Path] = set()

    def add(path: Path) -> None:
        if path not in seen:
            seen.add(path)
            found.files.append(path)

    for given in paths:
        path = Path(os.path.abspath(given))
        if path.is_dir():
            if force_exclude and _excluded_or_inside(path, excluder):
                continue
            top = gitignore._top(path) if respect_gitignore else path
            for file in _walk(path, excluder, gitignore if respect_gitignore else None, top,
                              found.skipped, included):
                add(file)
        elif path.is_file():
            if force_exclude and _excluded_or_inside(path, excluder):
                continue
            add(path)
        elif path.is_symlink():
            found.skipped.append(Skipped(path, "broken symbolic link or symlink loop"))
        else:
            found.skipped.append(Skipped(path, "not a file or directory"))
    found.files.sort()
    return found


def _excluded_or_inside(path: Path, excluders: Excluders) -> bool:
    """For --force-exclude: a named file is excluded if it or any parent matches."""
    if excluders.excluded(path, path.is_dir()):
        return True
    for parent in path.parents:
        excluder = excluders.for_dir(parent.parent)
        if parent == excluder.root or _relative(parent, excluder.root) is None:
            continue
        if excluder.excluded(parent, True):
            return True
    return False


def _walk(
    top: Path,
    excluder: Excluders,
    gitignore: GitignoreRules | None,
    git_top: Path,
    skipped: list[Skipped],
    included: Includer,
) -> Iterable[Path]:
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(Skipped(directory, f"cannot list directory: {exc.strerror}"))
            continue
        excludes = excluder.for_dir(directory).excludes_entry
        ignored = None if gitignore is None else gitignore.matcher(directory, git_top)
        subdirs: list[Path] = []
        for entry in entries:
            name = entry.name
            try:
                # Never follow a link to a directory: that is how a walk loops forever.
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file()
            except OSError:
                is_dir = is_file = False
            if is_dir:
                if excludes(directory, name, True):
                    continue
                if ignored is not None and ignored(name, True):
                    continue
                subdirs.append(Path(entry.path))
            elif is_file:
                path = Path(entry.path)
                if not included.included(path, name):
                    continue
                if excludes(directory, name, False):
                    continue
                if ignored is not None and ignored(name, False):
                    continue
                yield path
            elif entry.is_symlink() and included.included(Path(entry.path), name):
                skipped.append(Skipped(Path(entry.path), "broken symbolic link or symlink loop"))
        stack.extend(reversed(subdirs))

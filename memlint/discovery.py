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
from collections.abc import Iterable, Sequence
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
        chain = [path.parent, *path.parent.parents]
        verdict = False
        base = self._repository_spec(top)
        if base is not None and (path == top or top in path.parents):
            rel = path.relative_to(top).as_posix() + ("/" if is_dir else "")
            result = base.check_file(rel)
            if result.include is not None:
                verdict = result.include
        for directory in reversed(chain):
            if directory != top and top not in directory.parents:
                continue
            spec = self._spec(directory)
            if spec is None:
                continue
            rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = result.include
        return verdict


class Excluder:
    """Exclude patterns matched against root-relative paths (and bare names outside root)."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        self.root = root
        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)

    def excluded(self, path: Path, is_dir: bool) -> bool:
        rel = _relative(path, self.root)
        if rel is None:
            rel = path.name
        if rel in ("", "."):
            return False
        return self.spec.match_file(rel + ("/" if is_dir else ""))


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
) -> Discovery:
    """Every Python file (and notebook) under ``paths``, sorted and de-duplicated.

    ``include``: gitignore-style patterns a file found in a directory must match; a file
    named explicitly is linted whatever its name.
    """
    excluder = Excluder(exclude, root)
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


def _excluded_or_inside(path: Path, excluder: Excluder) -> bool:
    """For --force-exclude: a named file is excluded if it or any parent matches."""
    if excluder.excluded(path, path.is_dir()):
        return True
    rel = _relative(path, excluder.root)
    if rel is None:
        return False
    return any(
        excluder.excluded(parent, True) for parent in path.parents if parent != excluder.root
        and _relative(parent, excluder.root) is not None
    )


def _walk(
    top: Path,
    excluder: Excluder,
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
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                # Never follow a link to a directory: that is how a walk loops forever.
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file()
            except OSError:
                is_dir = is_file = False
            if is_dir:
                if excluder.excluded(path, True):
                    continue
                if gitignore is not None and gitignore.ignored(path, True, git_top):
                    continue
                subdirs.append(path)
            elif is_file:
                if not included.included(path, entry.name):
                    continue
                if excluder.excluded(path, False):
                    continue
                if gitignore is not None and gitignore.ignored(path, False, git_top):
                    continue
                yield path
            elif entry.is_symlink() and included.included(path, entry.name):
                skipped.append(Skipped(path, "broken symbolic link or symlink loop"))
        stack.extend(reversed(subdirs))

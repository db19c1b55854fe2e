"""Settings from ``[tool.memlint]`` and the command line, resolved the way ruff users expect.

Rule selection follows ruff: the highest-priority ``select`` (command line over file) is the
basis, then ``extend-select`` and ``ignore`` adjust it; within one layer the more specific
selector wins, and an ``ignore`` wins a tie. Exclude and per-file-ignore patterns use
gitignore syntax, matched against paths relative to the project root.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from memlint.diagnostics import ENGINE_CODES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

# ruff's default excludes, plus build output and caches.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".memlint_cache", ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype",
    ".ruff_cache", ".svn", ".tox", ".venv", ".vscode", "__pycache__", "__pypackages__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
)

# Which files a directory walk lints, matched gitignore-style; ruff's defaults (notebooks
# included, as ruff does since 0.6). ``include = ["*.py", "*.pyi"]`` leaves notebooks out.
DEFAULT_INCLUDE: tuple[str, ...] = ("*.py", "*.pyi", "*.ipynb")

LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "include",
             "extend-include")
KNOWN_KEYS = frozenset((*LIST_KEYS, "per-file-ignores"))


class ConfigError(Exception):
    """A setting memlint cannot honour; the CLI prints it as one usage-error line."""


@dataclass(frozen=True)
class Layer:
    """One source of settings (the file or the command line); None means "not given"."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] | None = None
    extend_include: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    """The effective configuration of one run."""

    root: Path
    enabled: frozenset[str]
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    config_path: Path | None = None
    include: tuple[str, ...] = DEFAULT_INCLUDE
    _pfi_specs: tuple[tuple[pathspec.GitIgnoreSpec, frozenset[str]], ...] = field(
        default=(), compare=False, repr=False
    )

    def __post_init__(self) -> None:
        specs = tuple(
            (pathspec.GitIgnoreSpec.from_lines([pattern]), codes)
            for pattern, codes in self.per_file_ignores
        )
        object.__setattr__(self, "_pfi_specs", specs)

    def ignored_for(self, relpath: str) -> frozenset[str]:
        """Codes that per-file-ignores switch off for a path relative to the root."""
        out: set[str] = set()
        for spec, codes in self._pfi_specs:
            if spec.match_file(relpath):
                out |= codes
        return frozenset(out)

    def fingerprint(self) -> str:
        """A stable description of everything that changes a file's result, for the cache."""
        pfi = ";".join(f"{p}={','.join(sorted(c))}" for p, c in self.per_file_ignores)
        # Per-file-ignores patterns are relative to the root: one shared cache folder
        # (MEMLINT_CACHE_DIR) must not serve one project's results to another.
        return f"root={self.root}|enabled={','.join(sorted(self.enabled))}|pfi={pfi}"


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.memlint]`` table, from start upward."""
    here = start.resolve()
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _has_memlint_table(candidate):
            return candidate
    return None


def _has_memlint_table(path: Path) -> bool:
    """A found ``pyproject.toml`` that cannot be read is an error, as with ``--config``:
    silently running the default rules instead of the configured ones would hide it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    # Cheap check first: most pyproject files have no memlint section and need no parsing.
    if "memlint" not in text:
        return False
    data = _parse_toml(path, text)
    tool = data.get("tool")
    return isinstance(tool, dict) and "memlint" in tool


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def load_layer(path: Path) -> Layer:
    """Read and validate ``[tool.memlint]``; any unknown key or wrong type is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    table = _parse_toml(path, text).get("tool", {}).get("memlint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.memlint] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r} in [tool.memlint] "
            f"(known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    lists = {key: _string_list(path, key, table[key]) for key in LIST_KEYS if key in table}
    pfi: dict[str, tuple[str, ...]] | None = None
    if "per-file-ignores" in table:
        raw = table["per-file-ignores"]
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: per-file-ignores must be a table of pattern = [codes]")
        pfi = {
            str(pattern): _string_list(path, f"per-file-ignores.{pattern}", codes)
            for pattern, codes in raw.items()
        }
    return Layer(
        select=lists.get("select"),
        ignore=lists.get("ignore", ()),
        extend_select=lists.get("extend-select", ()),
        per_file_ignores=pfi,
        exclude=lists.get("exclude"),
        extend_exclude=lists.get("extend-exclude", ()),
        include=lists.get("include"),
        extend_include=lists.get("extend-include", ()),
    )


def _string_list(path: Path, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {key} must be a list of strings, got {value!r}")
    return tuple(value)


def parse_per_file_ignores(entries: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Command-line ``PATTERN:CODE[,CODE]`` entries, as ruff spells them."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        pattern, sep, codes = entry.rpartition(":")
        if not sep or not pattern:
            raise ConfigError(f"--per-file-ignores expects PATTERN:CODES, got {entry!r}")
        # Repeating a pattern adds codes, as repeating the option does everywhere else.
        out[pattern] = (*out.get(pattern, ()), *split_codes(codes))
    return out


def split_codes(text: str) -> list[str]:
    return [part.strip() for part in text.replace(" ", ",").split(",") if part.strip()]


def _specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def _expand(selector: str, known: Iterable[str], where: str) -> set[str]:
    norm = selector.strip().upper()
    if norm == "ALL":
        return set(known)
    matched = {code for code in known if code.startswith(norm)}
    if not norm or not matched:
        raise ConfigError(f"unknown rule selector {selector!r} in {where}")
    return matched


def resolve_enabled(
    layers: Sequence[tuple[Layer, str]],
    rule_codes: Iterable[str],
    default_codes: Iterable[str],
) -> frozenset[str]:
    """The enabled rule codes after every layer, lowest priority first."""
    known = set(rule_codes) | set(ENGINE_CODES)
    enabled = set(default_codes)
    for layer, where in layers:
        if layer.select is not None:
            enabled = set()
        steps: list[tuple[int, int, str]] = []
        for sel in (*(layer.select or ()), *layer.extend_select):
            steps.append((_specificity(sel.strip().upper()), 0, sel))
        for sel in layer.ignore:
            steps.append((_specificity(sel.strip().upper()), 1, sel))
        # Less specific first, so `select=MEM, ignore=MEM001` and `ignore=MEM, select=MEM001`
        # both end with the more specific selector's choice.
        for _, is_ignore, sel in sorted(steps, key=lambda s: (s[0], s[1])):
            codes = _expand(sel, known, where)
            if is_ignore:
                enabled -= codes
            else:
                enabled |= codes
    return frozenset(enabled & set(rule_codes))


def validate_codes(codes: Iterable[str], known: Iterable[str], where: str) -> frozenset[str]:
    """Per-file-ignores take codes or prefixes; expand them so a typo is caught now."""
    universe = set(known) | set(ENGINE_CODES)
    out: set[str] = set()
    for code in codes:
        out |= _expand(code, universe, where)
    return frozenset(out)


def build_settings(
    cli: Layer,
    rule_codes: Iterable[str],
    default_codes: Iterable[str],
    *,
    start: Path,
    config_path: Path | None = None,
    isolated: bool = False,
) -> Settings:
    """Merge the config file found from ``start`` (or given) with the command-line layer."""
    codes = sorted(rule_codes)
    if config_path is None and not isolated:
        config_path = find_config(start)
    file_layer = load_layer(config_path) if config_path is not None else Layer()
    where_file = str(config_path) if config_path is not None else "settings"
    enabled = resolve_enabled(
        [(file_layer, where_file), (cli, "command-line options")], codes, default_codes
    )
    pfi_source, pfi_where = (
        (cli.per_file_ignores, "--per-file-ignores")
        if cli.per_file_ignores is not None
        else (file_layer.per_file_ignores or {}, f"{where_file} per-file-ignores")
    )
    pfi = tuple(
        (pattern, validate_codes(pfi_codes, codes, pfi_where))
        for pattern, pfi_codes in sorted(pfi_source.items())
    )
    base_exclude = cli.exclude if cli.exclude is not None else file_layer.exclude
    exclude = (
        *(DEFAULT_EXCLUDE if base_exclude is None else base_exclude),
        *file_layer.extend_exclude,
        *cli.extend_exclude,
    )
    base_include = cli.include if cli.include is not None else file_layer.include
    include = (*(DEFAULT_INCLUDE if base_include is None else base_include),
               *file_layer.extend_include, *cli.extend_include)
    root = config_path.parent if config_path is not None else Path.cwd()
    return Settings(
        root=root.resolve(),
        enabled=enabled,
        per_file_ignores=pfi,
        exclude=tuple(exclude),
        config_path=config_path,
        include=include,
    )

"""Command-line options and ini keys, resolved once per session.

Every option has an ini key of the same meaning. Command-line defaults are ``None`` so that
an unset flag falls through to the ini file; pytest-memray's ini keys are ignored because
its flags default to concrete values (its issue #135), which this layout cannot do.
Per test, a ``gpu_mem`` marker argument beats both (see :func:`limits_for`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_gpumem.atomicfile import OutputPathError, check_output, check_output_folder
from pytest_gpumem.marker import Amount, MarkerSpec
from pytest_gpumem.units import gib_to_bytes, mib_to_bytes

BACKENDS = ("auto", "cuda", "cuda-fast", "cpu", "cpu-fast")
NO_LEAK = Amount(0, "max_leak_mb=0")
TIMELINE_SCOPES = ("failed", "all")


@dataclass(frozen=True)
class Settings:
    """The session-wide configuration after command line and ini are merged."""

    enabled: bool = False
    measure_all: bool = False
    backend: str = "auto"
    max_gb: float | None = None
    budget: Amount | None = None  # the default budget, as written on the command line or ini
    max_leak: Amount = NO_LEAK
    json_path: Path | None = None
    round_bytes: int = 1
    top: int | None = 5  # None: every measured test
    snapshot_dir: Path | None = None
    timeline_dir: Path | None = None
    timeline_all: bool = False


@dataclass(frozen=True)
class Limits:
    """What one test is held to; ``budget_bytes`` is ``None`` when no budget applies."""

    budget_bytes: int | None
    max_leak_bytes: int
    repeat: int
    budget_text: str | None = None  # the budget as the user wrote it: max="512 MiB"
    max_leak_text: str = "max_leak_mb=0"


@dataclass(frozen=True)
class _Option:
    flag: str
    dest: str
    ini: str
    help: str
    parse: Callable[[str, str], Any]
    # None: a switch (store_true on the command line, a bool ini key).
    metavar: str | None = None


def parse_bool(source: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise pytest.UsageError(f"{source} must be true or false, got {text!r}")


def _parse_backend(source: str, text: str) -> str:
    value = text.strip().lower()
    if value not in BACKENDS:
        raise pytest.UsageError(f"{source} must be one of {', '.join(BACKENDS)}, got {text!r}")
    return value


def _parse_timeline_scope(source: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in TIMELINE_SCOPES:
        raise pytest.UsageError(
            f"{source} must be one of {', '.join(TIMELINE_SCOPES)}, got {text!r}"
        )
    return value == "all"


def _parse_number(source: str, text: str, *, whole: bool, zero_ok: bool) -> float:
    """One parser for every numeric option, so they all word their errors alike."""
    kind = "a whole number" if whole else "a number"
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise pytest.UsageError(f"{source} must be {kind}, got {text!r}") from None
    if not math.isfinite(value):  # 'inf', 'nan'
        raise pytest.UsageError(f"{source} must be {kind}, got {text!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "zero or more" if zero_ok else "greater than zero"
        raise pytest.UsageError(f"{source} must be {bound}, got {text!r}")
    return value


def _parse_positive(source: str, text: str) -> float:
    return _parse_number(source, text, whole=False, zero_ok=False)


def _parse_non_negative(source: str, text: str) -> float:
    return _parse_number(source, text, whole=False, zero_ok=True)


def _parse_count(source: str, text: str) -> int:
    return int(_parse_number(source, text, whole=True, zero_ok=True))


def _parse_round(source: str, text: str) -> int:
    return max(1, _parse_count(source, text))


def _parse_path(_source: str, text: str) -> Path:
    return Path(text).expanduser()


_OPTIONS = (
    _Option(
        "--gpumem", "gpumem", "gpumem", "measure and enforce gpu_mem markers.", parse_bool,
    ),
    _Option(
        "--gpumem-all",
        "gpumem_all",
        "gpumem_all",
        "measure every test, marked or not (implies --gpumem); unmarked tests get the "
        "default budget and leak tolerance.",
        parse_bool,
    ),
    _Option(
        "--gpumem-backend",
        "gpumem_backend",
        "gpumem_backend",
        "auto (CUDA when available, else CPU), cuda (the caching allocator's counters, with "
        "its allocation history for sites and snapshots), cuda-fast (the counters alone: "
        "no per-allocation work, no sites), cpu (tensor storages followed per op, with "
        "allocation sites) or cpu-fast (the allocator's events: about 1.2x a plain run "
        "where cpu costs 1.5x to 3x; no sites).",
        _parse_backend,
        "auto|cuda|cuda-fast|cpu|cpu-fast",
    ),
    _Option(
        "--gpumem-max-gb",
        "gpumem_max_gb",
        "gpumem_max_gb",
        "default peak budget in GiB (2**30 bytes) for measured tests without max_gb/max.",
        _parse_positive,
        "GIB",
    ),
    _Option(
        "--gpumem-max-leak-mb",
        "gpumem_max_leak_mb",
        "gpumem_max_leak_mb",
        "default leak tolerance in MiB for measured tests without max_leak_mb/max_leak "
        "(default 0).",
        _parse_non_negative,
        "MIB",
    ),
    _Option(
        "--gpumem-json",
        "gpumem_json",
        "gpumem_json",
        "write per-test measurements as JSON to this path.",
        _parse_path,
        "PATH",
    ),
    _Option(
        "--gpumem-round",
        "gpumem_round",
        "gpumem_round",
        "CPU backend: round each storage up to this many bytes (512 mirrors the CUDA "
        "caching allocator); default 1, exact.",
        _parse_round,
        "BYTES",
    ),
    _Option(
        "--gpumem-top",
        "gpumem_top",
        "gpumem_top",
        "how many of the highest peaks the terminal summary lists (default 5, 0 for all, "
        "as --durations=0).",
        _parse_count,
        "N",
    ),
    _Option(
        "--gpumem-snapshot-dir",
        "gpumem_snapshot_dir",
        "gpumem_snapshot_dir",
        "CUDA backend: where failing tests' memory snapshots go (default: under pytest's "
        "temporary directory).",
        _parse_path,
        "DIR",
    ),
    _Option(
        "--gpumem-timeline-dir",
        "gpumem_timeline_dir",
        "gpumem_timeline_dir",
        "write a self-contained HTML memory timeline (allocated, reserved on CUDA, and the "
        "budget line) of every test that fails a memory check into this directory.",
        _parse_path,
        "DIR",
    ),
    _Option(
        "--gpumem-timeline",
        "gpumem_timeline",
        "gpumem_timeline",
        "which marked tests get a timeline: failed (memory failures, the default) or all.",
        _parse_timeline_scope,
        "failed|all",
    ),
)


def option_help(text: str, ini: str) -> str:
    """An option's help for ``pytest --help``: argparse %-formats help strings, so a literal
    ``%`` (``'10%'``) must be doubled or the whole help page fails to print."""
    return f"{text} [ini: {ini}]".replace("%", "%%")


def add_option(parser: pytest.Parser, flag: str, dest: str, ini: str, text: str, *,
               metavar: str | None) -> None:
    """Register one option and its ini key, the one way every gpumem option is registered.

    ``metavar`` None makes a switch: ``store_true`` on the command line and a ``bool`` ini key
    (``gpumem = true``); any other option stores its text, parsed later so that every bad
    value gets one clear line. Defaults are None/unset so the command line can fall through
    to the ini file.
    """
    group = parser.getgroup("gpumem", "per-test tensor memory budgets (pytest_gpumem)")
    if metavar is None:
        group.addoption(flag, action="store_true", default=None, dest=dest,
                        help=option_help(text, ini))
        parser.addini(ini, text, type="bool", default=None)
    else:
        group.addoption(flag, action="store", default=None, dest=dest, metavar=metavar,
                        help=option_help(text, ini))
        parser.addini(ini, text, type="string", default="")


def ini_text(config: pytest.Config, ini: str) -> str | None:
    """An ini key's value as text (a bool key as ``true``/``false``), None when unset.

    pytest parses ``bool`` keys itself and words a bad one (``gpumem = maybe``) without the
    key's name: the error names it, as for every other bad value.

    pytest 9's native ``[tool.pytest]`` table keeps TOML's types and refuses one that is not
    the key's registered type, so ``gpumem_max_gb = 0.5`` (a float given to a key that is
    text on pytest 8) or ``gpumem = "true"`` would fail: a number, boolean or string is
    taken as its text here, and checked by the key's own parser like any other value.
    """
    try:
        raw = config.getini(ini)
    except (TypeError, ValueError, pytest.UsageError) as exc:
        # A value not of the key's registered type: pytest 9.0 raises TypeError for a
        # native TOML one, 9.2 ValueError (as for a bad bool anywhere); its text goes to
        # the key's own parser, which names the key in its error.
        raw = _toml_scalar(config, ini)
        if raw is None:
            raise pytest.UsageError(f"ini option {ini}: {exc}") from None
    if raw is None:
        return None
    if isinstance(raw, bool):
        return "true" if raw else "false"
    text = raw if isinstance(raw, str) else str(raw)
    return text if text.strip() else None


def _toml_scalar(config: pytest.Config, ini: str) -> str | None:
    """The text of a native-TOML scalar that pytest refused for its type; None otherwise."""
    try:
        with warnings.catch_warnings():  # deprecated in pytest 9, still there; a user's
            warnings.simplefilter("ignore", DeprecationWarning)  # -W error must not see it
            raw = config.inicfg.get(ini)
    except AttributeError:  # a pytest without it: pytest's own error stands
        return None
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int | float | str):
        return str(raw)
    return None


def add_options(parser: pytest.Parser) -> None:
    for opt in _OPTIONS:
        add_option(parser, opt.flag, opt.dest, opt.ini, opt.help, metavar=opt.metavar)


def _value(config: pytest.Config, opt: _Option) -> tuple[Any, str]:
    """The parsed value and how the user wrote it (``--gpumem-max-gb=0.5``)."""
    cli = config.getoption(opt.dest)
    if cli is not None:
        if isinstance(cli, bool):
            return cli, opt.flag
        return opt.parse(opt.flag, str(cli)), f"{opt.flag}={cli}"
    text = ini_text(config, opt.ini)
    if text is None:
        return None, ""
    value = opt.parse(f"ini option {opt.ini}", text)
    if isinstance(value, Path):
        value = ini_relative(config, value)
    return value, f"{opt.ini}={text.strip()}"


def ini_relative(config: pytest.Config, path: Path) -> Path:
    """A path from an ini file, relative to that file's folder as pytest's own path keys
    are (``testpaths``, ``cache_dir``), so ``gpumem_baseline = "gpumem-baseline.json"``
    names one file wherever pytest is started from; command-line paths stay relative to
    the current folder."""
    if path.is_absolute():
        return path
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / path


def read_settings(config: pytest.Config) -> Settings:
    """Merge command line over ini over built-in defaults."""
    read = {opt.dest: _value(config, opt) for opt in _OPTIONS}
    values = {dest: value for dest, (value, _) in read.items()}
    defaults = Settings()
    measure_all = bool(values["gpumem_all"])
    max_gb, leak_mb = values["gpumem_max_gb"], values["gpumem_max_leak_mb"]
    top = values["gpumem_top"]
    return Settings(
        enabled=measure_all or bool(values["gpumem"]),
        measure_all=measure_all,
        backend=values["gpumem_backend"] or defaults.backend,
        max_gb=max_gb,
        budget=None if max_gb is None else Amount(gib_to_bytes(max_gb), read["gpumem_max_gb"][1]),
        max_leak=(
            defaults.max_leak if leak_mb is None
            else Amount(mib_to_bytes(leak_mb), read["gpumem_max_leak_mb"][1])
        ),
        json_path=values["gpumem_json"],
        round_bytes=values["gpumem_round"] or defaults.round_bytes,
        top=defaults.top if top is None else (top or None),
        snapshot_dir=values["gpumem_snapshot_dir"],
        timeline_dir=values["gpumem_timeline_dir"],
        timeline_all=bool(values["gpumem_timeline"]),
    )


def limits_for(spec: MarkerSpec, settings: Settings) -> Limits:
    """Marker argument first, then the session setting (itself command line, then ini)."""
    budget = spec.budget if spec.budget is not None else settings.budget
    leak = spec.max_leak if spec.max_leak is not None else settings.max_leak
    return Limits(
        budget_bytes=None if budget is None else budget.nbytes,
        max_leak_bytes=leak.nbytes,
        repeat=spec.repeat,
        budget_text=None if budget is None else budget.text,
        max_leak_text=leak.text,
    )


def require_writable(path: Path, what: str, *, folder: bool = False) -> None:
    """A one-line usage error before the run when an output file (or a folder of them)
    could not be written."""
    try:
        (check_output_folder if folder else check_output)(path, what)
    except OutputPathError as exc:
        raise pytest.UsageError(f"pytest_gpumem: {exc}") from None


def require_outputs(settings: Settings) -> None:
    """Every output path of the run checked before it starts: the JSON report, and the
    folders of timelines and snapshots (written while the run goes)."""
    if settings.json_path is not None:
        require_writable(settings.json_path, "JSON report")
    if settings.timeline_dir is not None:
        require_writable(settings.timeline_dir, "--gpumem-timeline-dir", folder=True)
    if settings.snapshot_dir is not None:
        require_writable(settings.snapshot_dir, "--gpumem-snapshot-dir", folder=True)

"""The ``memlint`` command: ruff's conventions, so users' habits and CI recipes carry over.

``memlint [check] [PATHS]`` lints; ``memlint rule CODE`` / ``memlint rule --all`` explain
rules. Exit status: 0 no findings, 1 findings (parse errors included), 2 usage or internal
error. Every usage error is one ``memlint: error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

import memlint
from memlint.output import FORMATS
from memlint.pool import DEFAULT_FILE_TIMEOUT, Pool, PoolError

# Everything else is imported inside the functions, after the first worker process has been
# forked (see memlint.pool): a one-file pre-commit run then imports libcst in parallel.
if TYPE_CHECKING:
    from memlint.config import Settings
    from memlint.measured import Report
    from memlint.rules.base import Rule
    from memlint.rules.spec import RuleSpec

# What callers may hand ``main``: rule classes (tests, plugins) or specs.
Rules = Sequence["RuleSpec | type[Rule]"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message and exits; memlint wants one line and a status."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _positive(text: str, *, whole: bool) -> float:
    noun = "a positive integer" if whole else "a positive number"
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    return int(_positive(text, whole=True))


# Longer than this is no limit at all (`inf`, `1e300`): the OS timers cannot represent it.
_NO_LIMIT = 1e9


def _timeout(text: str) -> float | None:
    """Seconds, or None for no limit (``inf``, or anything past a few decades)."""
    value = _positive(text, whole=False)
    return None if value >= _NO_LIMIT else value


def check_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memlint",
        description="Find PyTorch GPU-memory mistakes in Python code.",
        epilog="Explain a rule with `memlint rule MEM001`; list rules with `memlint rule --all`.",
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="files or directories to lint (default: .)")
    parser.add_argument("--version", action="version", version=f"memlint {memlint.__version__}")
    rules = parser.add_argument_group("rule selection (comma-separated codes or prefixes, ALL)")
    rules.add_argument("--select", action="append", metavar="CODES",
                       help="enable exactly these rules, replacing the configured set")
    rules.add_argument("--extend-select", action="append", default=[], metavar="CODES",
                       help="enable these rules in addition")
    rules.add_argument("--ignore", action="append", default=[], metavar="CODES",
                       help="disable these rules")
    rules.add_argument("--per-file-ignores", action="append", metavar="PATTERN:CODES",
                       help="disable rules for files matching a gitignore-style pattern; "
                            "replaces the configured table")
    files = parser.add_argument_group("file selection")
    files.add_argument("--exclude", action="append", metavar="PATTERNS",
                       help="gitignore-style patterns to skip, replacing the defaults")
    files.add_argument("--extend-exclude", action="append", default=[], metavar="PATTERNS",
                       help="patterns to skip in addition to the defaults")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply excludes to explicitly named files too (for pre-commit)")
    files.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false",
                       help="lint files that .gitignore excludes")
    config = parser.add_argument_group("configuration")
    config.add_argument("--config", type=Path, metavar="PYPROJECT",
                        help="read [tool.memlint] from this file instead of searching upward")
    config.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    out = parser.add_argument_group("output")
    out.add_argument("--output-format", choices=sorted(FORMATS), default="text")
    out.add_argument("-o", "--output-file", type=Path, metavar="FILE",
                     help="write the report here instead of stdout")
    out.add_argument("--statistics", action="store_true",
                     help="print the number of findings per rule instead of each finding")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    out.add_argument("--gpumem-report", type=Path, metavar="REPORT_JSON",
                     help="mark findings with the memory a pytest-gpumem JSON report "
                          "(--gpumem-json) measured at their line or in their function")
    out.add_argument("--sort", choices=["location", "measured"], default="location",
                     help="order of findings: by file and line, or most measured memory "
                          "first (needs --gpumem-report)")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="print findings only: no summary, no warnings about skipped files")
    run = parser.add_argument_group("execution")
    run.add_argument("-j", "--jobs", type=_positive_int, default=None,
                     help="worker processes (default: the number of cores)")
    run.add_argument("--file-timeout", type=_timeout, default=DEFAULT_FILE_TIMEOUT,
                     metavar="SECONDS",
                     help="give up on a file after this long; inf for no limit "
                          "(default: %(default)g)")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    run.add_argument("--cache-dir", type=Path, metavar="DIR",
                     help="cache location (default: .memlint_cache in the project root)")
    fixes = parser.add_argument_group("fixes")
    fixes.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fixes.add_argument("--unsafe-fixes", action="store_true",
                       help="with --fix or --diff, also apply fixes that may change behaviour")
    fixes.add_argument("--diff", action="store_true",
                       help="print the fixes as a unified diff and write nothing")
    return parser


def rule_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memlint rule", description="Explain memlint's rules.")
    parser.add_argument("code", nargs="?", help="a rule code such as MEM001, or its name")
    parser.add_argument("--all", action="store_true", help="list every rule")
    parser.add_argument("--output-format", choices=["text", "json"], default="text")
    return parser


def _split(values: Sequence[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _known_rules(rules: Rules | None) -> tuple[RuleSpec, ...]:
    """The rules to run: the generated index, so that no rule (nor libcst) is imported yet."""
    from memlint.rules import rule_specs
    from memlint.rules.spec import as_specs

    if rules is not None:
        return as_specs(rules)

    return rule_specs()


def _config_start(paths: Sequence[Path]) -> Path:
    absolute = [os.path.abspath(p) for p in paths]
    common = Path(os.path.commonpath(absolute))
    return common if common.is_dir() else common.parent


def _settings(args: argparse.Namespace, rules: Sequence[RuleSpec]) -> Settings:
    from memlint.config import ConfigError, Layer, build_settings, parse_per_file_ignores
    from memlint.diagnostics import ENGINE_CODES

    if args.config is not None and not args.config.is_file():
        raise UsageError(f"config file does not exist: {args.config}")
    if args.config is not None and args.isolated:
        raise UsageError("--isolated ignores every configuration file; drop --config or it")
    if args.select is not None and not _split(args.select):
        raise UsageError("--select needs at least one rule code (or ALL)")
    unsuppressible = sorted(
        code for code in (_split(args.ignore) or ()) if code.upper() in ENGINE_CODES)
    if unsuppressible:
        raise UsageError(f"{unsuppressible[0]} reports a file memlint could not check and "
                         "cannot be ignored")
    try:
        cli = Layer(
            select=_split(args.select),
            ignore=_split(args.ignore) or (),
            extend_select=_split(args.extend_select) or (),
            per_file_ignores=(None if args.per_file_ignores is None
                              else parse_per_file_ignores(args.per_file_ignores)),
            exclude=_split(args.exclude),
            extend_exclude=_split(args.extend_exclude) or (),
        )
        return build_settings(
            cli,
            [r.code for r in rules],
            [r.code for r in rules if r.default_enabled],
            start=_config_start(args.paths),
            config_path=args.config,
            isolated=args.isolated,
        )
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _check_cache_dir(directory: Path, paths: Sequence[Path]) -> None:
    """The cache marks its folder ignored (a ``.gitignore`` holding ``*``): a cache folder
    that is, or contains, what is being linted (``--cache-dir .``, an empty variable) would
    hide the project from git and from memlint itself."""
    folder = Path(os.path.abspath(directory))
    for path in paths:
        target = Path(os.path.abspath(path))
        if target == folder or folder in target.parents:
            raise UsageError(f"cache directory {str(directory) or '.'!r} contains the linted "
                             f"path {str(path)!r}; choose a folder of its own (--cache-dir)")


def _warn(message: str, quiet: bool) -> None:
    if not quiet:
        print(f"memlint: warning: {message}", file=sys.stderr)


def _emit(text: str | bytes, output_file: Path | None) -> None:
    """Write the report; ``bytes`` (a diff, in the files' own encodings) are written as is."""
    if output_file is None:
        if isinstance(text, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
        return
    try:
        # Rendered in full before the file is opened: an error never leaves it empty.
        if isinstance(text, bytes):
            output_file.write_bytes(text)
        else:
            output_file.write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise UsageError(f"cannot write {output_file}: {exc.strerror or exc}") from None


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI timeout, ``kill``): handled as Ctrl-C is, so files being written are
    finished, the workers stop and the exit is one line with status 2."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _gpumem_report(args: argparse.Namespace) -> Report | None:
    """The pytest-gpumem report to mark findings with, read before linting: a bad path is
    a usage error at once."""
    if args.gpumem_report is None:
        if args.sort == "measured":
            raise UsageError("--sort=measured needs --gpumem-report REPORT_JSON")
        return None
    from memlint.measured import ReportError, load_report

    try:
        return load_report(args.gpumem_report)
    except ReportError as exc:
        raise UsageError(str(exc)) from None


def check(argv: Sequence[str], rules: Rules | None = None) -> int:
    args = check_parser().parse_args(list(argv))
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave signals alone
        return _checked(args, rules)
    try:
        return _checked(args, rules)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _checked(args: argparse.Namespace, rules: Rules | None) -> int:
    try:
        os.getcwd()
    except OSError:
        # Relative paths, the project root and the cache all start from here.
        raise UsageError("the current directory no longer exists (deleted?); "
                         "cd into the project again") from None
    pool = Pool.start()
    try:
        return _check(args, rules, pool)
    finally:
        pool.close()


def _check(args: argparse.Namespace, rules: Rules | None, pool: Pool) -> int:
    from memlint.cache import CACHE_DIR_NAME, ResultCache, cache_key
    from memlint.diagnostics import ENGINE_CODES
    from memlint.discovery import discover
    from memlint.output import render
    from memlint.output.ruledoc import catalogue
    from memlint.runner import lint_paths

    if not args.paths:
        args.paths = [Path(".")]
    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        raise UsageError(f"path does not exist: {missing[0]}")
    report = _gpumem_report(args)
    known = _known_rules(rules)
    settings = _settings(args, known)
    found = discover(args.paths, root=settings.root, exclude=settings.exclude,
                     force_exclude=args.force_exclude, respect_gitignore=args.respect_gitignore,
                     include=settings.include)
    for skipped in found.skipped:
        _warn(f"{skipped.path}: skipped: {skipped.reason}", args.quiet)
    if not found.files:
        # As ruff does: an empty selection is almost always a mistaken path or exclude.
        _warn("no Python files found under the given paths (excluded or .gitignore'd?)",
              args.quiet)
    cache = None
    if not args.no_cache:
        env = os.environ.get("MEMLINT_CACHE_DIR")
        directory = args.cache_dir or (Path(env) if env else settings.root / CACHE_DIR_NAME)
        _check_cache_dir(Path(directory), args.paths)
        ids = [r.ident for r in known if r.code in settings.enabled]
        cache = ResultCache(Path(directory).absolute(), cache_key(settings.fingerprint(), ids))
    from memlint.project.layout import package_files

    # The sibling modules of files named one by one (pre-commit), for the project model.
    context = package_files(found.files, [p for p in args.paths if p.is_dir()])
    result = lint_paths(found.files, settings, known, jobs=args.jobs or default_jobs(),
                        cache=cache, file_timeout=args.file_timeout, pool=pool,
                        context=context)
    if args.fix or args.diff:
        from memlint.fixer import apply_fixes

        fixed = apply_fixes(found.files, result, settings, known, unsafe=args.unsafe_fixes,
                            write=not args.diff, pool=pool, jobs=args.jobs or default_jobs(),
                            file_timeout=args.file_timeout)
        for warning in fixed.warnings:
            _warn(warning, args.quiet)
        for error in fixed.errors:
            print(f"memlint: error: {error}", file=sys.stderr)
        if args.diff:
            _emit(fixed.diff(), args.output_file)
            # A file memlint could not check (syntax, encoding, unreadable) would otherwise
            # vanish from a --diff run: say so, and do not claim that nothing needs fixing.
            unchecked = [d for d in result.diagnostics if d.code in ENGINE_CODES]
            for d in unchecked:
                print(f"memlint: error: {d.path}:{d.location}: {d.code} {d.message}",
                      file=sys.stderr)
            for file in result.files:
                if file.skipped:
                    _warn(f"{file.path}: skipped: {file.skipped}", args.quiet)
            if not args.quiet:
                print(f"memlint: {fixed.applied} fix(es) would be applied", file=sys.stderr)
            if fixed.errors:
                return EXIT_ERROR
            return EXIT_FINDINGS if fixed.changed or unchecked else EXIT_CLEAN
        if fixed.changed:
            if not args.quiet:
                print(f"memlint: fixed {fixed.applied} problem(s) in {len(fixed.changed)} "
                      "file(s)", file=sys.stderr)
            result = lint_paths(found.files, settings, known, jobs=args.jobs or default_jobs(),
                                cache=cache, file_timeout=args.file_timeout, pool=pool,
                                context=context)
    for file in result.files:
        if file.skipped:
            _warn(f"{file.path}: skipped: {file.skipped}", args.quiet)
    if result.cache_warning:
        _warn(result.cache_warning, args.quiet)
    diagnostics = result.diagnostics
    if args.fix:
        diagnostics = fixed.mark(diagnostics)
    if report is not None:
        from memlint.measured import by_measured, mark

        diagnostics = mark(diagnostics, report, Path.cwd())
        if args.sort == "measured":
            diagnostics = by_measured(diagnostics)
    if args.statistics:
        from memlint.output.json_format import render_statistics as json_statistics
        from memlint.output.text import render_statistics as text_statistics

        text = (json_statistics(diagnostics) if args.output_format == "json"
                else text_statistics(diagnostics))
    else:
        text = render(args.output_format, diagnostics, catalogue(known), Path.cwd())
        if args.quiet and args.output_format == "text":
            text = "".join(line + "\n" for line in text.splitlines()[: len(diagnostics)])
    _emit(text, args.output_file)
    if args.fix and fixed.errors:
        return EXIT_ERROR  # a fix that was asked for was not made (said on stderr)
    return EXIT_FINDINGS if diagnostics and not args.exit_zero else EXIT_CLEAN


def explain(argv: Sequence[str], rules: Rules | None = None,
            out: TextIO | None = None) -> int:
    import json
    from dataclasses import asdict

    from memlint.output.ruledoc import catalogue, render_doc, render_table

    stream = out or sys.stdout
    args = rule_parser().parse_args(list(argv))
    items = catalogue(_known_rules(rules))
    if args.all == (args.code is not None):
        raise UsageError("give a rule code, or --all")
    if args.all:
        if args.output_format == "json":
            payload = [{**asdict(item), "fix_safety": item.fix_safety and item.fix_safety.value}
                       for item in items.values()]
            stream.write(json.dumps(payload, indent=2) + "\n")
        else:
            stream.write(render_table(items.values()))
        return EXIT_CLEAN
    wanted = args.code.strip()
    for item in items.values():
        if wanted.upper() == item.code or wanted == item.name:
            if args.output_format == "json":
                stream.write(json.dumps({**asdict(item), "fix_safety": item.fix_safety
                                         and item.fix_safety.value}, indent=2) + "\n")
            else:
                stream.write(render_doc(item))
            return EXIT_CLEAN
    raise UsageError(f"unknown rule {wanted!r} (see `memlint rule --all`)")


def run() -> NoReturn:
    """The console script: ``main``, then a hard exit once the output is flushed.

    Tearing down the interpreter (every imported module, the configuration, the cache) costs
    about 10 ms that a one-file pre-commit run would otherwise wait for; mypy exits the same
    way. Library callers use :func:`main`, which returns.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`memlint | head`): nothing to save
            code = code or EXIT_ERROR
    os._exit(code)


def main(argv: Sequence[str] | None = None, *, rules: Rules | None = None) -> int:
    """Entry point; ``rules`` replaces the discovered rule set (tests inject their own)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "rule":
            return explain(args[1:], rules)
        if args and args[0] == "check":
            args = args[1:]
        return check(args, rules)
    except (UsageError, PoolError) as exc:
        print(f"memlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_CLEAN
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"memlint: error: {how}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # the last line of defence: no traceback
        print(f"memlint: error: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR

"""Wall time of memlint (cold) against TorchFix 0.7.0 and Fixit 2.2.1 on the same files.

Run ``bench/setup_peers.sh`` first. Each corpus is copied to a scratch folder with no
configuration above it, and the tools take turns on it within one run (the order rotates
every repetition), so a busy machine slows them all alike. memlint runs as users run it:
``python -m memlint --no-cache --exit-zero DIR``; the one-file pre-commit case runs the
``memlint`` script of a regular install (``bench/.work/precommit-venv``), as pre-commit does.
The training-script corpus is also timed as notebooks (one cell per top-level block), beside
ruff, for notebook throughput.

    python bench/lint_speed.py                      # memlint on the full tree, peers on a subset
    python bench/lint_speed.py --peers-full --peer-timeout 900
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work"
PEERS = WORK / "peers-venv" / "bin"
TRANSFORMERS = WORK / "transformers"
# The torch-containing files of models/b* in transformers 5.23.0: 33 files, ~32k lines. The
# peers take about 25 minutes together on the full tree on 2 cores, so they run here by default.
DEFAULT_SUBSET = "models/b*/**/*.py"


@dataclass
class Corpus:
    name: str
    root: Path
    files: int
    lines: int


@dataclass
class Timing:
    tool: str
    corpus: str
    runs: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    timed_out: bool = False
    exit_codes: set[int] = field(default_factory=set)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")


def _count(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*.py") if p.is_file()]
    return len(files), sum(p.read_bytes().count(b"\n") for p in files)


def _copy_files(files: Sequence[Path], base: Path, dest: Path) -> None:
    for path in files:
        target = dest / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def make_corpora(scratch: Path, subset: str, include_full: bool) -> list[Corpus]:
    """Copies of the corpora, so no pyproject.toml or .gitignore of this repo applies."""
    if not TRANSFORMERS.is_dir():
        sys.exit(f"error: {TRANSFORMERS} is missing; run bench/setup_peers.sh first")
    corpora: list[Corpus] = []
    if include_full:
        full = scratch / "transformers-full" / "transformers"
        shutil.copytree(TRANSFORMERS, full)
        corpora.append(Corpus("transformers 5.23.0 (all)", full.parent, *_count(full.parent)))
    picked = [
        p for p in sorted(TRANSFORMERS.glob(subset))
        if p.is_file() and b"torch" in p.read_bytes()
    ]
    if not picked:
        sys.exit(f"error: --subset {subset!r} selects no torch-containing file")
    sub = scratch / "transformers-subset" / "transformers"
    _copy_files(picked, TRANSFORMERS, sub)
    label = f"transformers `{subset}` (torch files)"
    corpora.append(Corpus(label, sub.parent, *_count(sub.parent)))
    ours = [*sorted((REPO / "tests" / "memlint" / "corpus").glob("*.py")),
            *sorted((REPO / "examples").rglob("*.py"))]
    own = scratch / "training-scripts"
    _copy_files(ours, REPO, own)
    corpora.append(Corpus("memlint training-script corpus", own, *_count(own)))
    corpora.append(notebook_corpus(ours, scratch / "notebooks"))
    return corpora


NOTEBOOKS = "the same scripts as notebooks"


def as_notebook(source: str) -> str:
    """A script as the notebook it would be: a code cell per top-level block (imports and
    assignments grouped, each function, class or loop a cell of its own), nbformat 4 as
    Jupyter writes it (indent 1, one list item per line)."""
    import ast
    import json

    lines = source.splitlines(keepends=True)
    starts = [0]
    for node in ast.parse(source).body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        simple = isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.Expr))
        if not simple and first > starts[-1]:
            starts.append(first)
    bounds = [*starts, len(lines)]
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": lines[a:b]} for a, b in itertools.pairwise(bounds) if a < b]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def notebook_corpus(scripts: Sequence[Path], dest: Path) -> Corpus:
    """The training-script corpus converted to notebooks, for notebook throughput; its lines
    are the scripts' lines, so its lines/s compares with theirs directly."""
    lines = 0
    for path in scripts:
        source = path.read_text(encoding="utf-8")
        target = dest / path.relative_to(REPO).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(as_notebook(source), encoding="utf-8")
        lines += source.count("\n")
    return Corpus(NOTEBOOKS, dest, len(scripts), lines)


# Where the timed memlint is imported from: a snapshot taken when the run starts, so edits to
# the working tree during a long run change neither the code measured nor the cache key
# (which includes memlint's source).
_memlint_path = REPO


def snapshot_memlint(scratch: Path) -> None:
    global _memlint_path
    target = scratch / "memlint-snapshot"
    shutil.copytree(REPO / "memlint", target / "memlint",
                    ignore=shutil.ignore_patterns("__pycache__"))
    _memlint_path = target


def memlint_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memlint", *args]


def tool_commands(root: Path) -> dict[str, list[str]]:
    return {
        "memlint (cold, --no-cache)": memlint_command("--no-cache", "--exit-zero", str(root)),
        "memlint, every rule on (--select ALL)": memlint_command(
            "--no-cache", "--exit-zero", "--select", "ALL", str(root)),
        "TorchFix 0.7.0": [str(PEERS / "torchfix"), str(root)],
        "Fixit 2.2.1": [str(PEERS / "fixit"), "lint", str(root)],
        # ruff is the speed reference, not a PyTorch linter: 800+ rules, written in Rust.
        RUFF: [str(Path(sys.executable).with_name("ruff")), "check", "--select", "ALL",
               "--no-cache", "--isolated", "--exit-zero", "--quiet", str(root)],
    }


RUFF = "ruff (--select ALL --no-cache)"


def timed(
    command: Sequence[str], cwd: Path, timeout: float | None, env: dict[str, str] | None = None
) -> tuple[float, float, int | None]:
    """Wall and CPU seconds of one run (interpreter start included); exit code None on timeout.

    CPU time (user + system, the tool's worker processes included) is reported beside wall
    time because it barely moves when other work shares the machine.
    """
    if env is None:
        env = {**os.environ, "PYTHONPATH": str(_memlint_path)}
    with tempfile.TemporaryFile() as sink:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=cwd, stdout=sink, stderr=sink, env=env,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - start, float("nan"), None
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode not in (0, 1):
            sink.seek(0)
            tail = sink.read()[-2000:].decode(errors="replace")
            sys.exit(f"error: {' '.join(command)} exited {done.returncode}:\n{tail}")
        return elapsed, cpu, done.returncode


def compare(corpus: Corpus, tools: dict[str, list[str]], repeat: int,
            timeout: float | None) -> list[Timing]:
    timings = {name: Timing(name, corpus.name) for name in tools}
    names = list(tools)
    for rep in range(repeat):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            timing = timings[name]
            if timing.timed_out:
                continue
            elapsed, cpu, code = timed(tools[name], corpus.root, timeout)
            timing.runs.append(elapsed)
            timing.cpu.append(cpu)
            if code is None:
                timing.timed_out = True
            else:
                timing.exit_codes.add(code)
            print(f"  {corpus.name}: {name} {elapsed:.2f}s", file=sys.stderr)
    return list(timings.values())


def _seconds(t: Timing) -> str:
    if t.timed_out:
        return f"> {t.runs[-1]:.0f} (stopped)"
    if len(t.runs) > 5:
        return f"{t.median:.2f} (min {min(t.runs):.2f}, max {max(t.runs):.2f}; {len(t.runs)} runs)"
    runs = ", ".join(f"{r:.2f}" for r in t.runs)
    return f"{t.median:.2f} ({runs})" if len(t.runs) > 1 else f"{t.median:.2f}"


def speed_table(corpora: Sequence[Corpus], results: dict[str, list[Timing]]) -> str:
    rows = ["| Corpus | Files | Lines | Tool | Wall s (median; runs) | CPU s | Lines/s (wall) "
            "| Peer / memlint (wall) | Peer / memlint (CPU) |",
            "|---|---:|---:|---|---|---:|---:|---:|---:|"]
    for corpus in corpora:
        timings = results.get(corpus.name, [])
        ours = next((t for t in timings if t.tool.startswith("memlint")), None)
        for t in timings:
            ratio = cpu_ratio = ""
            if ours is not None and not t.tool.startswith("memlint") and ours.runs:
                ratio = f"{'>' if t.timed_out else ''}{t.median / ours.median:.1f}x"
                if not t.timed_out:
                    cpu_ratio = f"{t.cpu_median / ours.cpu_median:.1f}x"
            rate = "" if t.timed_out else f"{corpus.lines / t.median:,.0f}"
            cpu = "" if t.timed_out else f"{t.cpu_median:.1f}"
            rows.append(f"| {corpus.name} | {corpus.files:,} | {corpus.lines:,} | {t.tool} "
                        f"| {_seconds(t)} | {cpu} | {rate} | {ratio} | {cpu_ratio} |")
    return "\n".join(rows)


PRECOMMIT_VENV = WORK / "precommit-venv"


def precommit_install() -> list[str]:
    """The ``memlint`` console script of a regular (non-editable) install of this checkout.

    pre-commit installs hooks that way, with bytecode compiled at install time; an editable
    install or a PYTHONPATH snapshot would add import costs that pre-commit users never pay.
    """
    python = PRECOMMIT_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PRECOMMIT_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(REPO)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--force-reinstall", str(REPO)], check=True)
    return [str(PRECOMMIT_VENV / "bin" / "memlint")]


def single_file(scratch: Path, repeat: int, memlint: list[str]) -> list[tuple[str, Timing]]:
    """One small file as pre-commit hands it over: a fresh process, the result cache on, and a
    file changed since the last run (as in a commit), so it is parsed every time."""
    candidates = sorted((REPO / "tests" / "memlint" / "corpus").glob("*.py"),
                        key=lambda p: p.stat().st_size)
    folder = scratch / "precommit"
    folder.mkdir(parents=True, exist_ok=True)
    cases: list[tuple[Path, str]] = []
    if candidates:
        script = folder / candidates[0].name
        shutil.copyfile(candidates[0], script)
        lines = script.read_bytes().count(b"\n")
        cases.append((script, f"training script `{script.name}` ({lines} lines)"))
        cases.append((script, "the same, every rule on (`--select ALL`)"))
    # A module of a package: the project model reads its sibling modules too (from the
    # summary store after the first run).
    project = REPO / "tests" / "memlint" / "corpus" / "projects" / "vision_app"
    if project.is_dir():
        package = folder / "vision_app"
        shutil.rmtree(package, ignore_errors=True)
        shutil.copytree(project, package)
        module = package / "vision" / "engine" / "validator.py"
        cases.append((module, "a module of a package (`vision_app/vision/engine/validator.py`, "
                              "siblings read by the project model)"))
    plain = folder / "settings.py"
    plain.write_text('"""Settings."""\n\nBATCH_SIZE = 32\nNAME = "run"\n', encoding="utf-8")
    cases.append((plain, "file no rule applies to (4 lines)"))
    out = [(label, Timing("memlint --force-exclude FILE", label)) for _, label in cases]
    # The floor: the same interpreter importing libcst and nothing else. memlint's own cost is
    # the difference, which holds still when the machine's speed does not.
    floor = Timing("python -c 'import libcst'", "floor: `import libcst` alone, same install")
    python = str(Path(memlint[0]).with_name("python"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for run in range(repeat):
        for (path, label), (_, timing) in zip(cases, out, strict=True):
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"# edit {run}\n")
            flags = ["--select", "ALL"] if "ALL" in label else []
            elapsed, cpu, _code = timed([*memlint, "--force-exclude", *flags,
                                         str(path.relative_to(folder))], folder, None, env=env)
            timing.runs.append(elapsed)
            timing.cpu.append(cpu)
        elapsed, cpu, _code = timed([python, "-c", "import libcst"], folder, None, env=env)
        floor.runs.append(elapsed)
        floor.cpu.append(cpu)
    return [*out, (floor.corpus, floor)]


def warm_cache(corpus: Corpus, scratch: Path, repeat: int) -> tuple[Timing, Timing]:
    cache = scratch / "cache"
    cold = Timing("cold (--no-cache)", corpus.name)
    warm = Timing("warm cache, unchanged tree", corpus.name)
    timed(memlint_command("--exit-zero", "--cache-dir", str(cache), str(corpus.root)),
          corpus.root, None)
    for _ in range(repeat):
        for timing, flags in ((cold, ["--no-cache"]), (warm, ["--cache-dir", str(cache)])):
            elapsed, cpu, _code = timed(memlint_command("--exit-zero", *flags, str(corpus.root)),
                                        corpus.root, None)
            timing.runs.append(elapsed)
            timing.cpu.append(cpu)
    return cold, warm


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", default=DEFAULT_SUBSET,
                        help="glob under src/transformers for the peer comparison "
                             f"(default {DEFAULT_SUBSET!r}; only files mentioning torch)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool (default 3)")
    parser.add_argument("--peers-full", action="store_true",
                        help="also run TorchFix and Fixit on the full tree (once each)")
    parser.add_argument("--peer-timeout", type=float, default=900.0,
                        help="stop a peer's full-tree run after this many seconds")
    parser.add_argument("--no-full", action="store_true", help="skip the full transformers tree")
    parser.add_argument("--no-peers", action="store_true", help="time memlint only")
    parser.add_argument("--cache-on", choices=("first", "subset"), default="first",
                        help="corpus for the cold/warm cache runs: the first one (the full tree "
                             "unless --no-full) or the transformers subset")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not args.no_peers and not (PEERS / "torchfix").exists():
        parser.error(f"{PEERS} has no torchfix; run bench/setup_peers.sh (or pass --no-peers)")

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="memlint-bench-") as tmp:
        scratch = Path(tmp)
        snapshot_memlint(scratch)
        corpora = make_corpora(scratch, args.subset, include_full=not args.no_full)
        results: dict[str, list[Timing]] = {}
        for corpus in corpora:
            tools = tool_commands(corpus.root)
            if args.no_peers:
                tools = {k: v for k, v in tools.items() if k.startswith("memlint")}
            if corpus.name == NOTEBOOKS:  # neither TorchFix nor Fixit reads notebooks
                tools = {k: v for k, v in tools.items() if k.startswith("memlint") or k == RUFF}
            full = corpus.name.endswith("(all)")
            if full and not args.peers_full:
                # ruff takes seconds on the full tree: always timed beside memlint.
                tools = {k: v for k, v in tools.items() if k.startswith("memlint") or k == RUFF}
            repeat = 1 if full and args.peers_full else args.repeat
            results[corpus.name] = compare(corpus, tools, repeat,
                                           args.peer_timeout if full else None)
        precommit = single_file(scratch, max(args.repeat, 15), precommit_install())
        biggest = corpora[0] if args.cache_on == "first" else corpora[-2]
        cold, warm = warm_cache(biggest, scratch, args.repeat)

    report = [
        f"Measured {date.today().isoformat()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; 1-minute load average {load_before:.1f} before "
        f"and {os.getloadavg()[0]:.1f} after the run.",
        "",
        speed_table(corpora, results),
        "",
        "| One file, as pre-commit runs it (non-editable install, file edited before each run) "
        "| Wall s (median; runs) | CPU s |",
        "|---|---|---:|",
        *(f"| {label} | {_seconds(t)} | {t.cpu_median:.2f} |" for label, t in precommit),
        "",
        f"| Result cache on {biggest.name} ({biggest.files:,} files) | Wall s (median; runs) "
        "| CPU s |",
        "|---|---|---:|",
        f"| {cold.tool} | {_seconds(cold)} | {cold.cpu_median:.1f} |",
        f"| {warm.tool} | {_seconds(warm)}, {100 * warm.median / cold.median:.0f}% of cold "
        f"| {warm.cpu_median:.1f} |",
    ]
    text = "\n".join(report)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

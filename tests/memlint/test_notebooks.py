"""Notebooks: read as one program, IPython syntax masked, findings placed in cells, fixed in
place without touching a byte outside the fixed cell sources."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint.cli import main
from memlint.filecheck import Task, lint_task
from memlint.notebook import NotebookError, mask, read_notebook
from memlint.rules import rule_specs
from tests.memlint.cli_support import run_cli, write

NOTEBOOKS = Path(__file__).parent / "notebooks"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")
Label = tuple[int, int, str]


def expected_labels(path: Path) -> set[Label]:
    """``# expect: CODE`` comments in code cells, as (cell number, line in cell, code)."""
    labels: set[Label] = set()
    for number, cell in enumerate(json.loads(path.read_text("utf-8"))["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        for line, text in enumerate("".join(cell["source"]).splitlines(), start=1):
            match = EXPECT.search(text)
            if match:
                labels |= {(number, line, c.strip()) for c in match.group(1).split(",")}
    return labels


def lint(path: Path) -> list[tuple[int | None, int, int, str]]:
    result = lint_task(Task(str(path), str(path)), rule_specs())
    return [(d.cell, d.line, d.column, d.code) for d in result.diagnostics]


LABELLED = ["training.ipynb", "magics.ipynb", "fixable.ipynb"]


@pytest.mark.parametrize("name", LABELLED)
def test_notebook_corpus_matches_labels(name: str) -> None:
    path = NOTEBOOKS / name
    expected = expected_labels(path)
    actual = {(cell or 0, line, code) for cell, line, _, code in lint(path)}
    assert actual - expected == set(), "false positives"
    assert expected - actual == set(), "missed findings"


def test_training_notebook_has_every_core_rule_across_cells() -> None:
    codes = {code for _, _, code in expected_labels(NOTEBOOKS / "training.ipynb")}
    core = {s.code for s in rule_specs() if s.default_enabled} - {"MEM998"}
    assert core <= codes


def test_facts_cross_cells(tmp_path: Path) -> None:
    """The DataLoader of cell 3 is the one cell 5 copies to CUDA: only the joined program
    knows that it lacks pin_memory, and that the list `losses` of cell 2 outlives cell 5's
    loop."""
    found = lint(NOTEBOOKS / "training.ipynb")
    assert (3, 1, 16, "MEM003") in found and (5, 7, 5, "MEM001") in found
    notebook = read_notebook((NOTEBOOKS / "training.ipynb").read_bytes())
    alone = write(tmp_path, "cell3.py", next(c.source for c in notebook.cells if c.number == 3))
    assert "MEM003" not in {code for _, _, _, code in lint(alone)}


@pytest.mark.parametrize(("name", "message"), [
    ("broken.ipynb", "invalid notebook JSON: Expecting ',' delimiter (line 4, column 2)"),
    ("nbformat3.ipynb", "not an nbformat 4 notebook (nbformat: 3)"),
])
def test_an_unreadable_notebook_is_one_mem999(name: str, message: str) -> None:
    result = lint_task(Task(str(NOTEBOOKS / name), name), rule_specs())
    assert [(d.code, d.line, d.cell, d.message) for d in result.diagnostics] == [
        ("MEM999", 1, None, message)]


@pytest.mark.parametrize(("source", "masked"), [
    ("%matplotlib inline\nx = 1\n", "pass  # ipython-escape\nx = 1\n"),
    ("files = !ls -la\n", "files = None  # ipython-escape\n"),
    ("for i in r:\n    %time f(i)\n", "for i in r:\n    pass  # ipython-escape\n"),
    ("?torch.zeros\ntorch.randn??\nmodel.fit?\n", "pass  # ipython-escape\n" * 3),
    ("!!pip list\n", "pass  # ipython-escape\n"),
    # Not escapes: an operator continuing a bracket, a line inside a string, a comment.
    ('msg = ("%d"\n       % n)\n', 'msg = ("%d"\n       % n)\n'),
    ('s = """\n!not shell\n"""\n', 's = """\n!not shell\n"""\n'),
    ("x = (1 +\n     2) \\\n    ! 3\n", "x = (1 +\n     2) \\\n    ! 3\n"),
    ("# what?\nx = 'why?'\n", "# what?\nx = 'why?'\n"),
])
def test_ipython_syntax_is_masked_only_where_a_statement_starts(source: str, masked: str) -> None:
    assert mask(source)[0] == masked


def _notebook(cells: list[str | tuple[str, str]], **metadata: object) -> str:
    out = []
    for item in cells:
        kind, text = item if isinstance(item, tuple) else ("code", item)
        cell: dict[str, object] = {"cell_type": kind, "metadata": {}, "source": text}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    meta = metadata or {"language_info": {"name": "python"}}
    return json.dumps({"cells": out, "metadata": meta, "nbformat": 4, "nbformat_minor": 5},
                      indent=1) + "\n"


def test_cell_magics_that_are_not_python_are_skipped() -> None:
    text = _notebook(["%%bash\nleak() (\n", "%%time\nx = [\n1]\n", "%%writefile a.py\n)\n"])
    notebook = read_notebook(text.encode())
    assert [c.number for c in notebook.cells] == [2]
    assert notebook.skipped_cells == 2


def test_text_json_sarif_and_github_name_the_cell(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "nb.ipynb", _notebook([("markdown", "# title"), "import os\n",
                                           "x = 1\n%time y = 2\nz = 3; leak()\n"]))
    text = run_cli(capsys, tmp_path, "--no-cache", "nb.ipynb")
    assert text.lines[0] == "nb.ipynb:cell 3:3:8: MEM901 leak() called"
    data = json.loads(run_cli(capsys, tmp_path, "--no-cache", "--output-format", "json").out)
    assert [(d["cell"], d["line"], d["column"], d["end_column"]) for d in data] == [
        (3, 3, 8, 14)]
    sarif = json.loads(run_cli(capsys, tmp_path, "--no-cache", "--output-format", "sarif").out)
    (result,) = sarif["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert result["properties"]["cell"] == 3 and result["properties"]["cellLine"] == 3
    # The region is the notebook file's own text: the JSON string holding that cell line.
    file_line = (tmp_path / "nb.ipynb").read_text().splitlines()[region["startLine"] - 1]
    assert file_line[region["startColumn"] - 1:region["endColumn"] - 1] == "leak()"
    github = run_cli(capsys, tmp_path, "--no-cache", "--output-format", "github").out
    assert github.startswith(f"::error file=nb.ipynb,line={region['startLine']},"
                             f"col={region['startColumn']},")
    assert "::MEM901 (cell 3, line 3, column 8) leak() called" in github


def test_noqa_per_line_within_a_cell_and_per_file_ignores(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "nb.ipynb", _notebook(["leak()  # noqa: MEM901\nleak()\n", "leak()\n"]))
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.lines[:2] == ["nb.ipynb:cell 1:2:1: MEM901 leak() called",
                             "nb.ipynb:cell 2:1:1: MEM901 leak() called"]
    write(tmp_path, "pyproject.toml",
          '[tool.memlint]\nper-file-ignores = {"*.ipynb" = ["MEM901"]}\n')
    write(tmp_path, "a.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.lines == ["a.py:1:1: MEM901 leak() called", "Found 1 problem."]


def test_directories_pick_up_notebooks_as_configured(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a.ipynb", "sub/b.ipynb", ".ipynb_checkpoints/a-checkpoint.ipynb",
                 "ignored/c.ipynb", "skip/d.ipynb"):
        write(tmp_path, name, _notebook(["leak()\n"]))
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "ignored/\n")
    write(tmp_path, "pyproject.toml", '[tool.memlint]\nextend-exclude = ["skip"]\n')
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert [line.split(":")[0] for line in run.lines[:-1]] == [
        "a.ipynb", str(Path("sub/b.ipynb"))]
    write(tmp_path, "pyproject.toml", '[tool.memlint]\ninclude = ["*.py", "*.pyi"]\n')
    write(tmp_path, "x.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert run.lines == ["x.py:1:1: MEM901 leak() called", "Found 1 problem."]
    write(tmp_path, "pyproject.toml", '[tool.memlint]\ninclude = ["sub/*.ipynb"]\n')
    run = run_cli(capsys, tmp_path, "--no-cache", ".")
    assert [line.split(":")[0] for line in run.lines[:-1]] == [str(Path("sub/b.ipynb"))]
    # A notebook named on the command line is linted whatever `include` says.
    assert run_cli(capsys, tmp_path, "--no-cache", "a.ipynb").lines[0].startswith("a.ipynb:cell 1")


def test_a_notebook_in_another_language_is_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "r.ipynb", _notebook(["leak()\n"], kernelspec={"language": "R"}))
    run = run_cli(capsys, tmp_path, "--no-cache", "r.ipynb")
    assert run.rc == 0
    assert "r.ipynb: skipped: a R notebook, not Python" in run.err


def test_cache_and_workers_treat_notebooks_like_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(4):
        write(tmp_path, f"n{i}.ipynb", _notebook(["x = 1\n", f"leak()\n{'y = 2' * i}\n"]))
    cache = tmp_path / ".cache"
    first = run_cli(capsys, tmp_path, "--cache-dir", str(cache), "-j", "2", ".")
    again = run_cli(capsys, tmp_path, "--cache-dir", str(cache), "-j", "2", ".")
    assert first.out == again.out and first.lines[0] == "n0.ipynb:cell 2:1:1: MEM901 leak() called"
    assert any('"cell":2' in stored.read_text() for stored in cache.rglob("*.json"))
    write(tmp_path, "n0.ipynb", _notebook(["x = 1\n", "\nleak()\n"]))
    changed = run_cli(capsys, tmp_path, "--cache-dir", str(cache), "-j", "2", ".")
    assert changed.lines[0] == "n0.ipynb:cell 2:2:1: MEM901 leak() called"


def _outside_sources(text: str) -> tuple[str, list[str]]:
    """The notebook text with every cell source value cut out, and those values."""
    notebook = read_notebook(text.encode())
    spans = sorted(notebook.spans.values())
    kept, values, last = [], [], 0
    for start, end in spans:
        kept.append(text[last:start])
        values.append(text[start:end])
        last = end
    kept.append(text[last:])
    return "\x00".join(kept), values


def test_fix_rewrites_only_the_fixed_cell_sources(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fixable.ipynb"
    shutil.copyfile(NOTEBOOKS / "fixable.ipynb", path)
    before = path.read_bytes()
    assert main(["--no-cache", "--fix", "--unsafe-fixes", str(path)]) == 0
    after = path.read_bytes()
    old_rest, old_values = _outside_sources(before.decode())
    new_rest, new_values = _outside_sources(after.decode())
    assert new_rest == old_rest  # metadata, outputs, ids, indentation, final newline
    changed = [i for i, (a, b) in enumerate(zip(old_values, new_values, strict=True)) if a != b]
    assert changed == [2, 3]  # the two cells with fixes
    cells = json.loads(after)["cells"]
    assert "".join(cells[2]["source"]) == (
        "for x, y in loader:\n"
        "    x = x.to(device, non_blocking=True)  # expect: MEM003\n"
        "    optimizer.zero_grad()  # expect: MEM009\n"
        "    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"
        "    losses.append(loss.detach())  # expect: MEM001\n"
        "    %time step()")
    assert after.endswith(b"}\n") and b'\n  "cells": [\n    {' in after  # indent=2 kept
    # A second --fix has nothing left to do and leaves the file byte for byte.
    assert main(["--no-cache", "--fix", "--unsafe-fixes", str(path)]) == 0
    assert path.read_bytes() == after
    capsys.readouterr()


def test_fix_keeps_a_one_string_source_and_crlf(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text = _notebook(["import torch\n", "m = torch.zeros(3).cuda()\n%ls\n"]).replace("\n", "\r\n")
    path = write(tmp_path, "nb.ipynb", "")
    path.write_bytes(text.encode())
    assert main(["--no-cache", "--fix", str(path)]) == 0
    after = path.read_bytes().decode()
    assert after == text.replace('"m = torch.zeros(3).cuda()\\n%ls\\n"',
                                 '"m = torch.zeros(3, device=\\"cuda\\")\\n%ls\\n"')
    capsys.readouterr()


def test_diff_shows_the_cell_and_writes_nothing(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fixable.ipynb"
    shutil.copyfile(NOTEBOOKS / "fixable.ipynb", path)
    run = run_cli(capsys, tmp_path, "--no-cache", "--diff", "--unsafe-fixes", "fixable.ipynb",
                  rules=None)
    assert run.rc == 1
    assert path.read_bytes() == (NOTEBOOKS / "fixable.ipynb").read_bytes()
    assert run.lines[:2] == ["--- a/fixable.ipynb:cell 3", "+++ b/fixable.ipynb:cell 3"]
    assert "+    x = x.to(device, non_blocking=True)  # expect: MEM003" in run.lines
    assert "--- a/fixable.ipynb:cell 4" in run.lines


def test_fix_never_writes_a_broken_notebook(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.ipynb"
    shutil.copyfile(NOTEBOOKS / "broken.ipynb", path)
    run = run_cli(capsys, tmp_path, "--no-cache", "--fix", "--unsafe-fixes", "broken.ipynb",
                  rules=None)
    assert run.rc == 1
    assert run.lines == ["broken.ipynb:1:1: MEM999 invalid notebook JSON: Expecting ',' "
                         "delimiter (line 4, column 2)", "Found 1 problem."]
    assert path.read_bytes() == (NOTEBOOKS / "broken.ipynb").read_bytes()


def test_a_fixed_program_that_lost_its_cells_is_refused() -> None:
    notebook = read_notebook(_notebook(["x = 1\n", "%ls\ny = 2\n"]).encode())
    with pytest.raises(NotebookError, match="across cells"):
        notebook.split(notebook.program.replace("# <<memlint notebook cell 2>>\n", ""))
    with pytest.raises(NotebookError, match="IPython"):
        notebook.split(notebook.program.replace("pass  # ipython-escape", "pass"))


def _bench() -> ModuleType:
    """bench/lint_speed.py, whose script-to-notebook conversion the benchmark times."""
    if "lint_speed" in sys.modules:
        return sys.modules["lint_speed"]
    spec = importlib.util.spec_from_file_location(
        "lint_speed", Path(__file__).parents[2] / "bench" / "lint_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_corpus_scripts_as_notebooks_give_the_same_findings(tmp_path: Path) -> None:
    """Each corpus script, split into cells as bench/lint_speed.py does, yields the script's
    findings, at the same places once cell lines are counted back into script lines."""
    as_notebook = _bench().as_notebook
    corpus = sorted((Path(__file__).parent / "corpus").glob("*.py"))
    for script in corpus:
        notebook = write(tmp_path, script.stem + ".ipynb", as_notebook(script.read_text("utf-8")))
        offsets, total = {}, 0
        for number, cell in enumerate(json.loads(notebook.read_text())["cells"], start=1):
            offsets[number] = total
            total += len(cell["source"])
        as_cells = {(offsets[cell or 0] + line, column, code)
                    for cell, line, column, code in lint(notebook)}
        assert as_cells == {(line, column, code) for _, line, column, code in lint(script)}, (
            script.name)


_LINE = st.text(alphabet=st.sampled_from(list("ab(=)[]'\"#%!?; é\\\t\r\u2603\u2028")),
                max_size=12)
_SOURCE = st.lists(_LINE, max_size=5).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(sources=st.lists(_SOURCE, min_size=1, max_size=4), indent=st.sampled_from([None, 1, 2]),
       as_string=st.booleans(), data=st.data())
def test_any_cells_survive_the_program_and_the_splice(
        sources: list[str], indent: int | None, as_string: bool, data: st.DataObject) -> None:
    """Splitting the program gives back every cell source (masked lines restored), and
    writing new sources changes those values and no other character."""
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": s if as_string else s.splitlines(keepends=True)} for s in sources]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=indent, ensure_ascii=data.draw(st.booleans())) + "\n"
    notebook = read_notebook(text.encode())
    linted = {c.number: c.source for c in notebook.cells}
    assert notebook.split(notebook.program) == linted
    new = {n: data.draw(_SOURCE) for n in linted}
    spliced = notebook.with_sources(new)
    after = json.loads(spliced)
    for number, source in new.items():
        value = after["cells"][number - 1]["source"]
        assert ("".join(value) if isinstance(value, list) else value) == source
        after["cells"][number - 1]["source"] = cells[number - 1]["source"]
    assert after == json.loads(text)
    old_rest, _ = _outside_sources(text)
    new_rest, _ = _outside_sources(spliced)
    assert new_rest == old_rest


def test_a_cell_that_does_not_parse_is_left_out_and_the_rest_is_linted_and_fixed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "nb.ipynb", _notebook([
        "import torch\nm = torch.zeros(3).cuda()\n", "def f(:\n    pass\n",
        "await fetch()\nx = torch.ones(2).cuda()\n"]))
    before = path.read_text()
    run = run_cli(capsys, tmp_path, "--no-cache", "nb.ipynb", rules=None)
    assert [line.split(" ")[:2] for line in run.lines[:-1]] == [
        ["nb.ipynb:cell", "1:2:5:"], ["nb.ipynb:cell", "2:1:7:"], ["nb.ipynb:cell", "3:2:5:"]]
    assert run.lines[1].endswith("MEM999 cannot parse: invalid syntax (cell left out, the "
                                 "others linted)")
    assert run_cli(capsys, tmp_path, "--no-cache", "--fix", "nb.ipynb", rules=None).rc == 1
    fixed = before.replace("torch.zeros(3).cuda()", 'torch.zeros(3, device=\\"cuda\\")')
    assert path.read_text() == fixed.replace("torch.ones(2).cuda()",
                                             'torch.ones(2, device=\\"cuda\\")')

"""Positions rendered per statement must equal libcst's whole-module positions, byte for byte."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from memlint.analysis.tree import TreeIndex
from memlint.astwalk import statement_lines
from memlint.positions import _statement_starts, finding_positions

CORPUS = Path(__file__).parent / "corpus"

SHAPES = {
    "decorated": "# header\n\nimport torch\n\n\n@torch.no_grad()\n# between\n@staticmethod\n"
                 "def f(x):\n    return x.cuda()\n\n\nclass A:\n    y = 1\n",
    "semicolons": "import torch; x = torch.zeros(3)\ny = x.to('cuda'); z = 2\n",
    "continuation": "x = 1 + \\\n    2\nif x:\n    pass\nelse:\n    y = [\n        1,\n    ]\n",
    "footer": "x = 1\n\n# trailing comment\n",
    "form feed": "x = 1\n\x0c\ndef f():\n    return 2\n",
    "strings": 's = """a\nb\nc"""\nt = f"{s!r}"\n',
    "blocks": ("def f(xs):\n    # lead\n    for x in xs:\n        if x:\n            a = 1; b = 2\n"
               "        elif x is None:\n\n            c = [\n                3,\n            ]\n"
               "        else:\n            d = '''\nq'''\n    else:\n        e = 5\n"
               "    while xs:\n        break\n    else:\n        f = 6\n"
               "    try:\n        g = 7\n    except (ValueError, KeyError):  # why\n"
               "        h = 8\n    except Exception:\n        pass\n    else:\n        i = 9\n"
               "    finally:\n        j = 10\n    with open(xs) as fh, open(xs):\n"
               "        k = fh.read() + \\\n            'x'\n    return k\n\n\n"
               "class A:\n    @staticmethod\n    def g():\n        def inner():\n"
               "            return lambda: 1\n        return inner\n"),
    "tabs": "if True:\n\tx = 1\n\tif x:\n\t\ty = 2\n",
    "match": ("def f(p):\n    match p:\n        case [x, y]:\n            z = x + y\n"
              "        case _:\n            z = 0\n    return z\n"),
    "suite": "if True: x = 1\nfor i in []: pass\ndef f(): return 1\n",
}
if sys.version_info >= (3, 11):  # `except*` is newer syntax than the stdlib parser of 3.10
    SHAPES["try star"] = "try:\n    x = 1\nexcept* ValueError:\n    y = 2\n"


def _variants(text: str) -> dict[str, str]:
    return {
        "lf": text,
        "crlf": text.replace("\n", "\r\n"),
        "cr": text.replace("\n", "\r"),
        "no final newline": text.rstrip("\n"),
        "bom": "\ufeff" + text,
    }


def _scanned(source: str) -> tuple[tuple[int, int], ...]:
    """The statements' lines as the scan pass hands them to the lint pass (it parses the
    file's bytes, which the stdlib decodes with its BOM)."""
    return statement_lines(ast.parse(source.encode("utf-8")).body)


def _check(source: str, scanned: bool = False) -> None:
    module = cst.parse_module(source)
    if not module.body:
        return
    tree = TreeIndex(module)
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    starts = _statement_starts(module, source)
    assert starts is not None, "the per-statement path must apply to ordinary files"
    # One node from every top-level statement: every statement is rendered on its own.
    picks = []
    for statement in module.body:
        picks.append(statement)
        picks.extend(tree.walk(statement))
    got = finding_positions(module, source, tree, picks,
                            _scanned(source) if scanned else None)
    for node in picks:
        assert got[node] == full[node], (type(node).__name__, got[node], full[node])


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("variant", ["lf", "crlf", "cr", "no final newline", "bom"])
@pytest.mark.parametrize("scanned", [False, True], ids=["parsed", "scanned"])
def test_statement_positions_match_libcst(shape: str, variant: str, scanned: bool) -> None:
    _check(_variants(SHAPES[shape])[variant], scanned)


def _check_one_by_one(source: str, scanned: bool = False) -> None:
    """Each node alone: a node in a nested simple statement line renders only that line
    (with the scan's lines: after parsing only its top-level statement's lines)."""
    spans = _scanned(source) if scanned else None
    module = cst.parse_module(source)
    tree = TreeIndex(module)
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for line in tree.preorder:
        if type(line) is not cst.SimpleStatementLine or line in module.body:
            continue
        deepest = [line, *tree.walk(line)][-1]
        for node in (line, deepest):
            got = finding_positions(module, source, tree, [node], spans)
            assert got[node] == full[node], (type(node).__name__, got[node], full[node])
            assert got[line] == full[line]
            top = next(a for a in tree.ancestors(line) if a in module.body)
            assert top not in got, "only the line is rendered, not its top-level statement"


@pytest.mark.parametrize("shape", sorted({"blocks", "tabs", "match", "try star", "decorated"}
                                          & SHAPES.keys()))
@pytest.mark.parametrize("variant", ["lf", "crlf", "no final newline", "bom"])
@pytest.mark.parametrize("scanned", [False, True], ids=["parsed", "scanned"])
def test_nested_lines_render_alone_at_libcst_positions(shape: str, variant: str,
                                                        scanned: bool) -> None:
    _check_one_by_one(_variants(SHAPES[shape])[variant], scanned)


@pytest.mark.parametrize("scanned", [False, True], ids=["parsed", "scanned"])
def test_corpus_nested_lines_render_alone_at_libcst_positions(scanned: bool) -> None:
    for path in sorted(CORPUS.rglob("*.py")):
        _check_one_by_one(path.read_text(encoding="utf-8"), scanned)


@pytest.mark.parametrize("scanned", [False, True], ids=["parsed", "scanned"])
def test_corpus_positions_match_libcst(scanned: bool) -> None:
    files = sorted(CORPUS.rglob("*.py"))
    assert len(files) > 20
    for path in files:
        _check(path.read_text(encoding="utf-8"), scanned)


def test_scanned_lines_parse_only_the_statements_with_findings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the scan's lines the file is not parsed again: only the lines of the one
    top-level statement that holds the finding are."""
    source = ("import torch\n\n\ndef unrelated():\n    return [i for i in range(3)]\n\n\n"
              "def train(xs):\n    for x in xs:\n        y = x.cuda()\n        z = y.cuda()\n"
              "    return z\n")
    module = cst.parse_module(source)
    tree = TreeIndex(module)
    lines = [n for n in tree.preorder if type(n) is cst.SimpleStatementLine
             and n not in module.body and "cuda" in module.code_for_node(n)]
    spans = _scanned(source)
    parsed: list[str] = []
    real_parse = ast.parse

    def spy(text: str, *args: object, **kwargs: object) -> ast.Module:
        parsed.append(text)
        return real_parse(text)

    monkeypatch.setattr("memlint.positions.ast.parse", spy)
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    got = finding_positions(module, source, tree, lines, spans)
    assert len(lines) == 2 and all(got[line] == full[line] for line in lines)
    # Once, for both findings in it.
    assert parsed == ["def train(xs):\n    for x in xs:\n        y = x.cuda()\n"
                      "        z = y.cuda()\n    return z\n"]


def test_node_outside_statements_falls_back_to_the_whole_module() -> None:
    source = "# memlint: noqa: MEM002\n\nx = 1\n"
    module = cst.parse_module(source)
    tree = TreeIndex(module)
    comment = next(n for n in tree.preorder if isinstance(n, cst.Comment))
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    got = finding_positions(module, source, tree, [comment])
    assert got[comment] == full[comment]
    assert got[comment].start.line == 1


def test_source_the_stdlib_cannot_parse_renders_down_to_the_last_finding() -> None:
    """Python 3.12's parser refuses 200+ nested brackets that libcst accepts: the module is
    then rendered from the top, only as far as the last statement with a finding."""
    source = "# head\nx = 1\ny = [2]\nz = 3\n"
    module = cst.parse_module(source)
    assert _statement_starts(module, "x = (\n") is None  # the text handed in does not parse
    tree = TreeIndex(module)
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    target = module.body[1]
    got = finding_positions(module, "x = (\n", tree, [target])
    for node in [module.body[0], target, *tree.walk(module.body[0]), *tree.walk(target)]:
        assert got[node] == full[node]
    assert module.body[2] not in got  # never rendered

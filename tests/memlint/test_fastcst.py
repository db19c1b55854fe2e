"""The tree memlint.fastcst builds from the stdlib parser is libcst's tree without layout,
its text and positions are libcst's, and a lint on it reports what a lint on libcst's does."""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from memlint import engine, fastcst
from memlint.analysis import ModuleAnalysis
from memlint.context import FileContext
from memlint.rules import all_rules

HERE = Path(__file__).parent
CORPUS = sorted((HERE / "corpus").glob("*.py"))
OWN_SOURCE = sorted((HERE.parent.parent / "memlint").rglob("*.py"))

# Layout: whitespace, comments, blank lines and the module's formatting defaults.
_LAYOUT = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace,
           cst.Newline, cst.EmptyLine, cst.Comment)
_SKIPPED = frozenset({"header", "footer", "indent", "leading_lines", "lines_after_decorators",
                      "encoding", "default_indent", "default_newline", "has_trailing_newline"})


def difference(real: object, built: object, path: str = "") -> str | None:
    """Where two trees differ, layout aside; None when they do not."""
    if isinstance(real, (list, tuple)) and isinstance(built, (list, tuple)):
        if len(real) != len(built):
            return f"{path}: {len(real)} items != {len(built)}"
        for i, (a, b) in enumerate(zip(real, built, strict=True)):
            found = difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    if type(real) is not type(built):
        return f"{path}: {type(real).__name__} != {type(built).__name__}"
    if isinstance(real, cst.CSTNode):
        if isinstance(real, _LAYOUT):
            return None
        for field in dataclasses.fields(real):
            if field.name in _SKIPPED or field.name.startswith("whitespace"):
                continue
            found = difference(getattr(real, field.name), getattr(built, field.name),
                               f"{path}.{type(real).__name__}.{field.name}")
            if found:
                return found
        return None
    return None if real == built else f"{path}: {real!r} != {built!r}"


SNIPPETS = [
    "x = (a)\ny = ((a, b))\nz = a, b\nw = ()\nv = (a,)\n",
    "f(x)\nf((x))\nf(x,)\nf(x for x in y)\nf((x for x in y))\nf(a, *b, c=1, **d)\n",
    "f(a=(1),)\nf(**{'a': 1}, b=2)\ng(*(a), k=(b))\n(f)(x)\n(a).b\n",
    "x = [1, 2,]\ny = {1, *a}\nz = {'a': 1, **b,}\nt = [*a, *b]\n",
    "a[1]\na[1, 2]\na[(1, 2)]\na[1:2]\na[::2]\na[1:2:]\na[:, None]\na[x,]\n",
    "if a:\n    pass\nelif b:\n    pass\nelse:\n    if c:\n        pass\n",
    "if a: b = 1; c = 2\nwhile x: pass\nelse: y()\nfor i in y: f(i)\n",
    "x = 1; y = 2;\nz = 3  # comment\n",
    "@dec\n@dec2(a)\ndef f(a, /, b, *, c=1, **k) -> int:\n    '''doc'''\n    return a\n",
    "async def f(a, *args, b: int = (2), **kw):\n    async with x as y, z:\n        await y\n"
    "    async for i in z:\n        yield i\n    return [i async for i in z]\n",
    "class A(B, C, metaclass=M):\n    x: int = 1\n    y: str\n\nclass D():\n    pass\n"
    "class E:\n    pass\n",
    "lambda: 1\nlambda a, b=2, *c, d, **e: a\nf = lambda *, k: k\n",
    "s = 'a' 'b'\nt = ('a'\n     \"b\")\nu = f'{x!r:>{w}}' 'y'\nb = rb'\\x' br'y'\n",
    "x = '''a\n# not a comment (\n'''\ny = \"(\" + ')'\n",
    "try:\n    pass\nexcept (A, B) as e:\n    raise C from e\nexcept D:\n    pass\n"
    "else:\n    pass\nfinally:\n    pass\n",
    "with (a as b, c):\n    pass\nwith (a, b) as c:\n    pass\nwith (a):\n    pass\n"
    "with (a)as b, c:\n    pass\n",
    "import a.b.c as d, e\nfrom . import x\nfrom ..a import (b, c,)\nfrom a import *\n",
    "global a, b\ndel a, b\ndel (a)\nassert x, 'm'\nassert (x)\nx += 1\nx @= y\n",
    "y = (yield)\nz = yield from g()\nif (n := len(a)) > 1:\n    pass\n",
    "x = a if b else c\ny = not a and b or c\nz = a < b <= c is not d not in e\n",
    "x = -1 + ~2 ** 3 // 4 % 5 @ m << 1 >> 2 & 3 | 4 ^ 5\ny = 1.5j + 0x1f + 1_000 + 1e-3\n",
    "x = [a for a in b if a if not a for c in d]\ny = {k: v for k, v in z}\n"
    "w = {a for a in b}\n",
    "f(  # comment (\n    a,  # )\n    b,\n)\n",
    "x = (  # comment\n    a\n    + b\n)\n",
    "x = (  # trailing blanks   \n    (a)  # a backslash \\\n)\nf(  # \\\n    (b))\n",
    "def f(\n    a,\n    b,\n):\n    pass\n",
    "x = 1 \\\n    + 2\nif a and \\\n        b: pass\n",
    "print(*a, sep='')\nx = a[...]\ny = ...\n",
]


@pytest.mark.parametrize("source", SNIPPETS)
def test_snippets_build_libcst_tree(source: str) -> None:
    built = fastcst.build(source.encode())
    assert built is not None, source
    assert difference(cst.parse_module(source), built.module) is None


@pytest.mark.parametrize("path", [*CORPUS, *OWN_SOURCE], ids=lambda p: p.name)
def test_real_files_build_libcst_tree(path: Path) -> None:
    source = path.read_bytes()
    built = fastcst.build(source)
    assert built is not None
    assert difference(cst.parse_module(source), built.module) is None


@pytest.mark.parametrize("source", [
    b"match x:\n    case 1:\n        pass\n",  # not rebuilt: libcst parses it
    b"# -*- coding: latin-1 -*-\ns = '\xe9'\n",  # offsets would not be UTF-8
    b"\xef\xbb\xbfx = 1\n",
    b"a = 1\rb = 2\n",
    b"def f(:\n",  # a syntax error is libcst's to report
])
def test_what_only_libcst_builds(source: bytes) -> None:
    assert fastcst.build(source) is None


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Python 3.12 syntax")
@pytest.mark.parametrize("source", [
    'x = f"{d["a"]}" + g("(")\n',  # an f-string nesting its own quotes (PEP 701)
    "def f[T](a: T) -> T:\n    return a\nclass C[T]:\n    pass\n",
    "type Alias = list[int]\n",
])
def test_newer_syntax_is_rebuilt_exactly_or_left_to_libcst(source: str) -> None:
    built = fastcst.build(source.encode())
    assert built is None or difference(cst.parse_module(source), built.module) is None


def test_crlf_and_a_utf8_cookie_are_rebuilt() -> None:
    source = b"# coding: utf-8\r\nx = f(a,\r\n      b)\r\n"
    built = fastcst.build(source)
    assert built is not None
    assert difference(cst.parse_module(source), built.module) is None


def _pairs(real: cst.CSTNode, built: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """The nodes of two trees that differ only in layout, paired."""
    out = [(real, built)]
    for field in dataclasses.fields(real):
        if field.name in _SKIPPED or field.name.startswith("whitespace"):
            continue
        a, b = getattr(real, field.name), getattr(built, field.name)
        if isinstance(a, (list, tuple)):
            for x, y in zip(a, b, strict=True):
                if isinstance(x, cst.CSTNode) and not isinstance(x, _LAYOUT):
                    out += _pairs(x, y)
        elif isinstance(a, cst.CSTNode) and not isinstance(a, _LAYOUT):
            out += _pairs(a, b)
    return out


def _check_text_and_positions(source: bytes) -> int:
    """Compares every text and range the source gives with libcst's; how many ranges."""
    wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    built = fastcst.build(source)
    assert built is not None
    checked = 0
    for real, made in _pairs(wrapper.module, built.module):
        if isinstance(real, cst.BaseExpression) and not isinstance(
                real, (cst.FormattedStringText, cst.FormattedStringExpression)):
            try:
                text = built.text_of(made)
            except fastcst.Unsupported:
                continue  # not an expression of the source, or code libcst renders otherwise
            assert text == wrapper.module.code_for_node(real)
        found = built.range_of(made)
        if found is not None:
            assert found == positions[real], wrapper.module.code_for_node(real)[:80]
            checked += 1
    return checked


@pytest.mark.parametrize("path", [*CORPUS, *OWN_SOURCE[:20]], ids=lambda p: p.name)
def test_text_and_positions_are_libcsts(path: Path) -> None:
    """Every expression's text is ``code_for_node``'s; every call's and statement's range
    is ``PositionProvider``'s (a decorated definition's is not given: libcst decides)."""
    assert _check_text_and_positions(path.read_bytes()) > 0


INDENTED = [
    # Continuation lines inside brackets lose the block's indentation in libcst's text;
    # a string's own lines, and lines after a backslash, do not.
    "def f():\n    x = g(a,\n          b, '''s\n    t''')\n    y = a + \\\n        b\n",
    "class A:\n    def f(self):\n        if x:\n            w = h(\n                # c\n"
    "                q,\n            )\n",
    # An f-string whose replacement field runs over lines: its text is left to libcst.
    'def f(s):\n    run(f"""\n    a {", ".join(x\n        for x in s)}\n    """)\n',
    "def f():\n    a = 1;\n    if b:\n        c(d);  \n",
]


@pytest.mark.parametrize("source", [*SNIPPETS, *INDENTED])
def test_snippet_text_and_positions_are_libcsts(source: str) -> None:
    assert _check_text_and_positions(source.encode()) > 0


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_lint_reports_what_libcsts_tree_gives(path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Findings, positions, messages and fix kinds: identical with and without fastcst."""
    source = path.read_bytes()
    rules = list(all_rules())
    fast = engine.lint_source(str(path), source, rules)
    monkeypatch.setattr(engine, "LIBCST_ONLY", True)
    assert fast == engine.lint_source(str(path), source, rules)


# An assignment whose value ends in a bracket, read again on its right-hand side: the index
# of a tree without layout has no order for the `]` where the binding takes effect.
ENDS_IN_A_TOKEN = """
import torch


def predict(model, data):
    model.eval()
    preds = []
    for batch in data:
        pred = model(batch)
        pred = [p * 2 for p in torch.split(pred, 1)]
        preds.extend(pred)
    return preds
"""


@pytest.mark.parametrize("source", [ENDS_IN_A_TOKEN.encode(), *(p.read_bytes() for p in CORPUS)])
def test_an_index_without_tokens_reports_what_one_with_them_does(
        source: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index of a tree built without layout leaves commas, brackets and operators out;
    the rules find the same on it as on an index that keeps them."""
    rules = list(all_rules())
    bare = engine.lint_source("x.py", source, rules)
    with_tokens = functools.cached_property(
        lambda self: ModuleAnalysis(self.module, self.project, layout=True))
    with_tokens.__set_name__(FileContext, "analysis")
    monkeypatch.setattr(FileContext, "analysis", with_tokens)
    assert bare == engine.lint_source("x.py", source, rules)
    if source.startswith(b"\nimport torch"):
        assert [d.code for d in bare] == ["MEM002", "MEM005"]


def test_a_file_with_findings_is_placed_without_libcst(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The point of the tree: no libcst parse for a file whose findings it can place."""
    source = (HERE / "corpus" / "accum_right_and_wrong.py").read_bytes()
    parsed: list[bytes] = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda b: parsed.append(b) or real_parse(b))
    rules = [r for r in all_rules() if not r.reads_comments]
    found = engine.lint_source("x.py", source, rules)
    assert found and not parsed


def test_rules_that_read_comments_get_libcsts_tree() -> None:
    assert {r.code for r in all_rules() if r.reads_comments} == {"MEM006", "MEM998"}
    source = ast.unparse(ast.parse("x = 1"))  # any file
    assert fastcst.build(source.encode()) is not None


def test_the_fast_constructors_build_what_the_node_classes_build() -> None:
    """``fastcst`` sets a node's slots itself rather than run the dataclass ``__init__``:
    the node must be the one the class builds, by keyword or by position, with libcst's
    defaults, and a default libcst makes afresh per node (a ``Colon``) is made afresh."""
    name = fastcst._new[cst.Name]("x")
    assert name.deep_equals(cst.Name("x")) and type(name) is cst.Name
    attribute = fastcst._new[cst.Attribute](value=name, attr=cst.Name("y"))
    assert attribute.deep_equals(cst.Attribute(value=cst.Name("x"), attr=cst.Name("y")))
    assert cst.Module([cst.SimpleStatementLine([cst.Expr(attribute)])]).code == "x.y\n"
    call = fastcst._new[cst.Call](func=attribute, args=[
        fastcst._new[cst.Arg](value=fastcst._new[cst.Integer]("1"))],
        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    assert call.deep_equals(cst.Call(func=attribute, args=[cst.Arg(cst.Integer("1"))],
                                     lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
    first, second = (fastcst._new[cst.Lambda](params=cst.Parameters(), body=name)
                     for _ in range(2))
    assert first.deep_equals(cst.Lambda(params=cst.Parameters(), body=cst.Name("x")))
    assert first.colon is not second.colon  # made afresh, as the class makes it
    with pytest.raises(TypeError):
        fastcst._new[cst.Attribute](value=name)  # `attr` has no default

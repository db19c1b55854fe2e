"""libcst trees built from CPython's own parser, for a lint that reads no layout.

libcst's parser is most of what a cold lint costs: it builds a node for every space, comma
and parenthesis, about four for each node of the stdlib tree. CPython parses the same file
several times faster, and the rules never read layout: this module builds the libcst nodes
a rule reads (every expression and statement, their parentheses, commas, colons and
operators) from the stdlib tree, with default whitespace and without comments or blank
lines. The source text gives what the stdlib tree drops: the raw text of numbers and
strings, parentheses, trailing commas, semicolons, ``elif`` and one-line bodies; and, for the
engine, what libcst's tree would: a node's code (``code_for_node``) and its position
(``PositionProvider``), so that a file with findings needs no libcst parse either
(:func:`memlint.engine.lint_source`). Any construct this module does not rebuild exactly
raises :class:`Unsupported` and the file takes libcst's parse.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import libcst as cst
from libcst._position import CodePosition, CodeRange

# libcst gives every node its own copy of each whitespace default; spaces and newlines are
# no node any rule or index visits (memlint.analysis.tree.LAYOUT_LEAVES), so one instance
# per class and field serves them all.


class _Constructors(dict[type, Callable[..., Any]]):
    """Per node class, its constructor (:func:`_constructor`), made on first use."""

    def __missing__(self, kind: type) -> Callable[..., Any]:
        made = self[kind] = _constructor(kind)
        return made


_new = _Constructors()

# A field whose default libcst makes afresh for each node (a `Colon`, a `Comma`).
_AFRESH = object()


def _constructor(kind: type) -> Callable[..., Any]:
    """A function that builds a ``kind`` node as its dataclass ``__init__`` does (same
    parameters, in the same order), with the shared whitespace defaults, but sets each slot
    itself and leaves out ``__post_init__``: libcst's validation, which the stdlib parser
    made needless. A tree holds hundreds of thousands of nodes; this builds each in half
    the time. Generated as dataclasses generates ``__init__``."""
    shared = _shared_layout(kind)
    namespace: dict[str, Any] = {"_object": object.__new__, "_kind": kind, "_AFRESH": _AFRESH}
    params: list[str] = []
    body: list[str] = []
    for i, field in enumerate(dataclasses.fields(kind)):
        name = field.name
        namespace[f"_set{i}"] = getattr(kind, name).__set__  # the slot's own setter
        if name in shared:
            namespace[f"_default{i}"] = shared[name]
            params.append(f"{name}=_default{i}")
        elif field.default is not dataclasses.MISSING:
            namespace[f"_default{i}"] = field.default
            params.append(f"{name}=_default{i}")
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{i}"] = field.default_factory
            params.append(f"{name}=_AFRESH")
            body.append(f"    if {name} is _AFRESH:\n        {name} = _factory{i}()")
        else:
            params.append(name)
        body.append(f"    _set{i}(node, {name})")
    source = (f"def build({', '.join(params)}):\n    node = _object(_kind)\n"
              + "\n".join(body) + "\n    return node\n")
    exec(source, namespace)  # text made above from the dataclass's own fields
    built: Callable[..., Any] = namespace["build"]
    return built


def _shared_layout(kind: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in dataclasses.fields(kind):
        if field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
            if type(value) in (cst.SimpleWhitespace, cst.Newline):
                out[field.name] = value
    return out


class Unsupported(Exception):
    """A construct this module does not rebuild: the caller falls back to libcst."""


_BINARY: dict[type[ast.operator], type[cst.BaseBinaryOp]] = {
    ast.Add: cst.Add,
    ast.Sub: cst.Subtract,
    ast.Mult: cst.Multiply,
    ast.Div: cst.Divide,
    ast.FloorDiv: cst.FloorDivide,
    ast.Mod: cst.Modulo,
    ast.Pow: cst.Power,
    ast.LShift: cst.LeftShift,
    ast.RShift: cst.RightShift,
    ast.BitOr: cst.BitOr,
    ast.BitAnd: cst.BitAnd,
    ast.BitXor: cst.BitXor,
    ast.MatMult: cst.MatrixMultiply,
}
_AUGMENTED: dict[type[ast.operator], type[cst.BaseAugOp]] = {
    ast.Add: cst.AddAssign,
    ast.Sub: cst.SubtractAssign,
    ast.Mult: cst.MultiplyAssign,
    ast.Div: cst.DivideAssign,
    ast.FloorDiv: cst.FloorDivideAssign,
    ast.Mod: cst.ModuloAssign,
    ast.Pow: cst.PowerAssign,
    ast.LShift: cst.LeftShiftAssign,
    ast.RShift: cst.RightShiftAssign,
    ast.BitOr: cst.BitOrAssign,
    ast.BitAnd: cst.BitAndAssign,
    ast.BitXor: cst.BitXorAssign,
    ast.MatMult: cst.MatrixMultiplyAssign,
}
_UNARY: dict[type[ast.unaryop], type[cst.BaseUnaryOp]] = {
    ast.UAdd: cst.Plus,
    ast.USub: cst.Minus,
    ast.Invert: cst.BitInvert,
    ast.Not: cst.Not,
}
_COMPARE: dict[type[ast.cmpop], type[cst.BaseCompOp]] = {
    ast.Eq: cst.Equal,
    ast.NotEq: cst.NotEqual,
    ast.Lt: cst.LessThan,
    ast.LtE: cst.LessThanEqual,
    ast.Gt: cst.GreaterThan,
    ast.GtE: cst.GreaterThanEqual,
    ast.In: cst.In,
    ast.NotIn: cst.NotIn,
    ast.Is: cst.Is,
    ast.IsNot: cst.IsNot,
}
_BLANK = frozenset(b" \t\f\r")
_WHITE = frozenset(b" \t\f\r\n")
# What may stand between an expression and a '(' it owns, besides blanks: the '(' itself, a
# line break (a comment may end the line before) or a line continuation.
_OPENING = frozenset(b"(\n\r\\\f")
# One string literal: prefix, then a triple- or single-quoted body (escapes skipped).
_STRING = re.compile(
    rb"[A-Za-z]*(?:'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    rb'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")',
    re.DOTALL,
)
_DEF = re.compile(rb"(?:async(?:[ \t\f]|\\\r?\n)+)?def(?:[ \t\f]|\\\r?\n)+")
_WITH = re.compile(rb"(?:async(?:[ \t\f]|\\\r?\n)+)?with")
_CLASS = re.compile(rb"class(?:[ \t\f]|\\\r?\n)+")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
# What the scan meets: a comment, a string literal (skipped whole) or a parenthesis.
_LEXEMES = re.compile(rb"#[^\n]*|" + _STRING.pattern[len(rb"[A-Za-z]*") :] + rb"|[()]", re.DOTALL)
_GAP = re.compile(rb"(?:[ \t\f\r\n]|\\\r?\n|#[^\n]*)*")


class Built:
    """A tree :func:`build` made, with what its source text gives: a node's code, as
    ``Module.code_for_node`` renders it, and its range, as ``PositionProvider`` gives it."""

    def __init__(self, builder: _Builder, module: cst.Module) -> None:
        self.module = module
        self.text_of = builder.text_of
        self.range_of = builder.range_of


def build(source: bytes, tree: ast.Module | None = None) -> Built | None:
    """The libcst tree of ``source`` without layout; None when only libcst can build it."""
    if source.startswith(b"\xef\xbb\xbf") or (
        b"\r" in source and source.count(b"\r") != source.count(b"\r\n")
    ):
        return None
    if _declares_encoding(source):
        return None
    try:
        if tree is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    tree = ast.parse(source)
                except MemoryError:  # CPython's parser on code nested past its stack
                    return None
        validate = cst.CSTNode.__dict__.get("__post_init__")
        setattr(cst.CSTNode, "__post_init__", _no_validation)  # noqa: B010
        try:
            builder = _Builder(source, tree)
            return Built(builder, builder.module())
        finally:
            setattr(cst.CSTNode, "__post_init__", validate)  # noqa: B010
    except (Unsupported, SyntaxError, ValueError, RecursionError):
        return None


def _no_validation(node: cst.CSTNode) -> None:
    """Stands in for ``CSTNode.__post_init__``: the stdlib parser checked the syntax."""


def _declares_encoding(source: bytes) -> bool:
    """A PEP 263 cookie for anything but UTF-8 on one of the first two lines."""
    for line in source[:400].split(b"\n", 2)[:2]:
        cookie = _COOKIE.match(line)
        if cookie is not None:
            return cookie.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8")
    return False


class _Builder:
    def __init__(self, source: bytes, tree: ast.Module) -> None:
        self.src = source
        self.tree = tree
        starts = [0]
        find = source.find
        at = find(b"\n")
        while at >= 0:
            starts.append(at + 1)
            at = find(b"\n", at + 1)
        self.starts = starts
        self.close_of: dict[int, int] = {}
        self.open_of: dict[int, int] = {}
        self.comment_at_end: dict[int, int] = {}
        self.claimed: set[int] = set()
        # String literals the scan skipped and the string nodes built: equal unless the
        # scan misread one (an f-string nesting its own quotes, Python 3.12's syntax).
        self.lexed_strings = 0
        self.built_strings = 0
        # Where string literals span lines (a node's text keeps their lines as written), and
        # the indentation of the block being built (libcst's text of a node leaves it out).
        self.multiline_strings: list[tuple[int, int, bool]] = []  # (start, end, an f-string)
        self.indent = b""
        # Per expression and statement built (by id, the node itself held so that no id is
        # reused): the stdlib node, how many parentheses around its span the expression owns
        # (-1: the span's own are a call's, around its only generator argument), the
        # indentation of its block, the node, and for a line of statements its last one.
        self.origin: dict[int, tuple[Any, ...]] = {}  # by id(): the tree keeps them
        self._scan()

    # -- the source text ------------------------------------------------------------------

    def _scan(self) -> None:
        """Pair the parentheses and find the comments, outside string literals."""
        src = self.src
        opened: list[int] = []
        close_of = self.close_of
        open_of = self.open_of
        comments = self.comment_at_end
        for match in _LEXEMES.finditer(src):
            at = match.start()
            char = src[at]
            if char == 0x28:  # '('
                opened.append(at)
            elif char == 0x29:  # ')'
                if not opened:
                    raise Unsupported("unbalanced parentheses")
                open_ = opened.pop()
                close_of[open_] = at
                open_of[at] = open_
            elif char == 0x22 or char == 0x27:  # a string literal
                self.lexed_strings += 1
            elif char == 0x23:  # '#'
                end = match.end()
                while end > at + 1 and src[end - 1] in _BLANK:
                    end -= 1
                comments[end] = at
        if opened:
            raise Unsupported("unbalanced parentheses")

    def span(self, node: ast.AST) -> tuple[int, int]:
        n = cast(Any, node)
        return (
            self.starts[n.lineno - 1] + n.col_offset,
            self.starts[n.end_lineno - 1] + n.end_col_offset,
        )

    def before(self, at: int) -> int:
        """The last significant byte before ``at`` (-1: none)."""
        src = self.src
        i = at - 1
        comments = self.comment_at_end
        while i >= 0:
            char = src[i]
            if char in _WHITE:
                i -= 1
                continue
            start = comments.get(i + 1)  # keyed by where its last non-blank byte ends
            if start is not None:
                i = start - 1
            elif char == 0x5C:  # a line continuation
                i -= 1
            else:
                return i
        return -1

    def after(self, at: int) -> int:
        """The first significant byte at or after ``at`` (len: none)."""
        match = _GAP.match(self.src, at)
        assert match is not None
        return match.end()

    def char(self, at: int) -> int:
        return self.src[at] if 0 <= at < len(self.src) else -1

    def parens(self, start: int, end: int) -> int:
        """How many parenthesis pairs enclose exactly ``[start, end)`` and belong to it."""
        return self._enclosing(start, end)[0]

    def _enclosing(self, start: int, end: int) -> tuple[int, int, int]:
        """The parenthesis pairs that enclose exactly ``[start, end)`` and belong to it (no
        call, header or other syntax claimed them): how many, and the span with them."""
        src = self.src
        at = start - 1
        while at >= 0 and (src[at] == 0x20 or src[at] == 0x09):
            at -= 1
        if at < 0 or src[at] not in _OPENING:  # most expressions: no '(' before them
            return 0, start, end
        count = 0
        close_of = self.close_of
        while True:
            open_ = self.before(start)
            if open_ < 0 or src[open_] != 0x28 or open_ in self.claimed:
                return count, start, end
            close = self.after(end)
            if close_of.get(open_) != close:
                return count, start, end
            count += 1
            start, end = open_, close + 1

    def trailing_comma(self, end: int) -> bool:
        return self.char(self.after(end)) == 0x2C

    # -- expressions ----------------------------------------------------------------------

    def expr(self, node: ast.expr) -> Any:
        start, end = self.span(node)
        own = 0
        kind = type(node)
        if (kind is ast.Tuple or kind is ast.GeneratorExp) and (
            self.char(start) == 0x28 and self.close_of.get(start) == end - 1
        ):
            if start in self.claimed:
                own = -1  # a generator that is a call's only argument: the call's
            else:
                own = 1
                self.claimed.add(start)  # its elements do not own it
        built = self._expression(node, start, end)
        outer = self.parens(start, end)
        if own < 0:  # nothing encloses the call's parentheses but the call
            own, outer = 0, -1
        else:
            own += outer
        if own:
            built = built.with_changes(
                lpar=[_new[cst.LeftParen]() for _ in range(own)],
                rpar=[_new[cst.RightParen]() for _ in range(own)],
            )
        self.origin[id(built)] = (node, outer, self.indent, built)
        return built

    def _expression(self, node: Any, start: int, end: int) -> Any:
        kind = type(node)
        if kind is ast.Name:
            return _new[cst.Name](node.id)
        if kind is ast.Attribute:
            return _new[cst.Attribute](
                value=self.expr(node.value), attr=_new[cst.Name](node.attr), dot=_new[cst.Dot]()
            )
        if kind is ast.Call:
            return self._call(node, end)
        if kind is ast.Constant:
            return self._constant(node, start, end)
        if kind is ast.Subscript:
            return _new[cst.Subscript](
                value=self.expr(node.value),
                slice=self._slices(node.slice),
                lbracket=_new[cst.LeftSquareBracket](),
                rbracket=_new[cst.RightSquareBracket](),
            )
        if kind is ast.BinOp:
            return _new[cst.BinaryOperation](
                left=self.expr(node.left),
                operator=_new[_BINARY[type(node.op)]](),
                right=self.expr(node.right),
            )
        if kind is ast.UnaryOp:
            return _new[cst.UnaryOperation](
                operator=_new[_UNARY[type(node.op)]](),
                expression=self.expr(node.operand),
            )
        if kind is ast.BoolOp:
            kind = cst.And if isinstance(node.op, ast.And) else cst.Or
            result = self.expr(node.values[0])
            for value in node.values[1:]:
                result = _new[cst.BooleanOperation](
                    left=result, operator=_new[kind](), right=self.expr(value)
                )
            return result
        if kind is ast.Compare:
            return _new[cst.Comparison](
                left=self.expr(node.left),
                comparisons=[
                    _new[cst.ComparisonTarget](
                        operator=_new[_COMPARE[type(op)]](),
                        comparator=self.expr(c),
                    )
                    for op, c in zip(node.ops, node.comparators, strict=True)
                ],
            )
        if kind is ast.Tuple:
            return _new[cst.Tuple](elements=self._elements(node.elts, end), lpar=(), rpar=())
        if kind is ast.List:
            return _new[cst.List](
                elements=self._elements(node.elts, end - 1),
                lbracket=_new[cst.LeftSquareBracket](),
                rbracket=_new[cst.RightSquareBracket](),
            )
        if kind is ast.Set:
            return _new[cst.Set](
                elements=self._elements(node.elts, end - 1),
                lbrace=_new[cst.LeftCurlyBrace](),
                rbrace=_new[cst.RightCurlyBrace](),
            )
        if kind is ast.Dict:
            return self._dict(node, end)
        if kind is ast.JoinedStr:
            return self._string(start, end)
        if kind is ast.IfExp:
            return _new[cst.IfExp](
                test=self.expr(node.test),
                body=self.expr(node.body),
                orelse=self.expr(node.orelse),
            )
        if kind is ast.Lambda:
            return _new[cst.Lambda](
                params=self._parameters(node.args),
                body=self.expr(node.body),
                colon=_new[cst.Colon](),
            )
        if kind is ast.ListComp:
            return _new[cst.ListComp](
                elt=self.expr(node.elt),
                for_in=self._comprehension(node.generators),
                lbracket=_new[cst.LeftSquareBracket](),
                rbracket=_new[cst.RightSquareBracket](),
            )
        if kind is ast.SetComp:
            return _new[cst.SetComp](
                elt=self.expr(node.elt),
                for_in=self._comprehension(node.generators),
                lbrace=_new[cst.LeftCurlyBrace](),
                rbrace=_new[cst.RightCurlyBrace](),
            )
        if kind is ast.GeneratorExp:
            return _new[cst.GeneratorExp](
                elt=self.expr(node.elt),
                for_in=self._comprehension(node.generators),
                lpar=(),
                rpar=(),
            )
        if kind is ast.DictComp:
            return _new[cst.DictComp](
                key=self.expr(node.key),
                value=self.expr(node.value),
                for_in=self._comprehension(node.generators),
                lbrace=_new[cst.LeftCurlyBrace](),
                rbrace=_new[cst.RightCurlyBrace](),
            )
        if kind is ast.Starred:
            raise Unsupported("a starred expression outside a display")
        if kind is ast.NamedExpr:
            return _new[cst.NamedExpr](target=self.expr(node.target), value=self.expr(node.value))
        if kind is ast.Await:
            return _new[cst.Await](expression=self.expr(node.value))
        if kind is ast.Yield:
            value = node.value
            return _new[cst.Yield](value=None if value is None else self.expr(value))
        if kind is ast.YieldFrom:
            return _new[cst.Yield](value=_new[cst.From](item=self.expr(node.value)))
        if kind is ast.Slice:
            raise Unsupported("a slice outside a subscript")
        raise Unsupported(kind.__name__)

    def _constant(self, node: ast.Constant, start: int, end: int) -> Any:
        value = node.value
        if isinstance(value, (str, bytes)):
            return self._string(start, end)
        if value is None or value is True or value is False:
            return _new[cst.Name](str(value))
        if value is Ellipsis:
            return _new[cst.Ellipsis]()
        text = self.src[start:end].decode()
        if isinstance(value, complex):
            return _new[cst.Imaginary](text)
        if isinstance(value, float):
            return _new[cst.Float](text)
        return _new[cst.Integer](text)

    def _string(self, start: int, end: int) -> Any:
        """A string literal, or the implicit concatenation of several."""
        src = self.src
        parts: list[Any] = []
        at = start
        while at < end:
            match = _STRING.match(src, at)
            if match is None:
                raise Unsupported("a string literal")
            text = match.group().decode()
            prefix = text[
                : len(text)
                - len(text.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
            ]
            if "f" in prefix or "F" in prefix:
                parts.append(_parse_fstring(text))
            else:
                parts.append(_new[cst.SimpleString](text))
            if "\n" in text:
                self.multiline_strings.append((match.start(), match.end(), "f" in prefix.lower()))
            at = self.after(match.end())
        if not parts or (at != end and self.after(end) != at):
            raise Unsupported("a string literal")
        self.built_strings += len(parts)
        result = parts[-1]
        for part in reversed(parts[:-1]):
            result = _new[cst.ConcatenatedString](left=part, right=result)
        return result

    def _call(self, node: ast.Call, end: int) -> Any:
        open_ = self.open_of.get(end - 1)
        if open_ is None:
            raise Unsupported("a call without its parentheses")
        self.claimed.add(open_)
        func = self.expr(node.func)
        return _new[cst.Call](func=func, args=self._arguments(node.args, node.keywords, end - 1))

    def _arguments(
        self, positional: Sequence[ast.expr], keywords: Sequence[ast.keyword], close: int
    ) -> list[cst.Arg]:
        """The arguments of a call or the bases of a class, in source order, up to the
        ``close`` parenthesis."""
        items: list[Any] = list(positional)
        if keywords:
            items += keywords
            if positional:
                items.sort(key=lambda item: (item.lineno, item.col_offset))
        args: list[cst.Arg] = []
        last = len(items) - 1
        for i, item in enumerate(items):
            kind = type(item)
            value = item.value if kind is ast.keyword or kind is ast.Starred else item
            comma = self._comma(i < last, self._extent_end(value), close)
            if kind is ast.keyword:
                if item.arg is None:
                    arg = _new[cst.Arg](value=self.expr(value), star="**", comma=comma)
                else:
                    arg = _new[cst.Arg](
                        value=self.expr(value),
                        keyword=_new[cst.Name](item.arg),
                        equal=_new[cst.AssignEqual](),
                        comma=comma,
                    )
            elif kind is ast.Starred:
                arg = _new[cst.Arg](value=self.expr(value), star="*", comma=comma)
            else:
                arg = _new[cst.Arg](value=self.expr(value), comma=comma)
            args.append(arg)
        return args

    def _comma(self, between: bool, item_end: int, limit: int | None = None) -> Any:
        """The comma after an item: one between items, else a trailing comma if written."""
        if between:
            return _new[cst.Comma]()
        if limit is not None and item_end > limit:
            item_end = limit  # a generator that is the only argument ends at the call's ')'
        return _new[cst.Comma]() if self.trailing_comma(item_end) else cst.MaybeSentinel.DEFAULT

    def _extent_end(self, node: ast.expr) -> int:
        """Where an expression ends, its own parentheses included."""
        return self.extent(node)[1]

    def extent(self, node: ast.expr) -> tuple[int, int]:
        """An expression's span with its own parentheses."""
        _, start, end = self._enclosing(*self.span(node))
        return start, end

    def _elements(self, elts: Sequence[ast.expr], end: int) -> list[Any]:
        out: list[Any] = []
        last = len(elts) - 1
        for i, elt in enumerate(elts):
            if isinstance(elt, ast.Starred):
                comma = self._comma(i < last, self._extent_end(elt.value))
                if self.parens(*self.span(elt)):
                    raise Unsupported("a parenthesised starred element")
                out.append(_new[cst.StarredElement](value=self.expr(elt.value), comma=comma))
            else:
                comma = self._comma(i < last, self._extent_end(elt))
                out.append(_new[cst.Element](value=self.expr(elt), comma=comma))
        return out

    def _dict(self, node: ast.Dict, end: int) -> Any:
        out: list[Any] = []
        last = len(node.values) - 1
        for i, (key, value) in enumerate(zip(node.keys, node.values, strict=True)):
            comma = self._comma(i < last, self._extent_end(value))
            if key is None:
                out.append(_new[cst.StarredDictElement](value=self.expr(value), comma=comma))
            else:
                out.append(
                    _new[cst.DictElement](key=self.expr(key), value=self.expr(value), comma=comma)
                )
        return _new[cst.Dict](
            elements=out,
            lbrace=_new[cst.LeftCurlyBrace](),
            rbrace=_new[cst.RightCurlyBrace](),
        )

    def _slices(self, node: ast.expr) -> list[cst.SubscriptElement]:
        start, end = self.span(node)
        if (
            isinstance(node, ast.Tuple)
            and node.elts
            and not (self.char(start) == 0x28 and self.close_of.get(start) == end - 1)
        ):
            out: list[cst.SubscriptElement] = []
            last = len(node.elts) - 1
            for i, elt in enumerate(node.elts):
                part = self._slice(elt)
                item_end = (
                    self.span(elt)[1] if isinstance(elt, ast.Slice) else self._extent_end(elt)
                )
                comma: Any = (
                    _new[cst.Comma]()
                    if i < last or self.trailing_comma(item_end)
                    else cst.MaybeSentinel.DEFAULT
                )
                out.append(_new[cst.SubscriptElement](slice=part, comma=comma))
            return out
        part = self._slice(node)
        item_end = end if isinstance(node, ast.Slice) else self._extent_end(node)
        comma = _new[cst.Comma]() if self.trailing_comma(item_end) else cst.MaybeSentinel.DEFAULT
        return [_new[cst.SubscriptElement](slice=part, comma=comma)]

    def _slice(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            start, end = self.span(node)
            pieces = [p for p in (node.lower, node.upper, node.step) if p is not None]
            colons = self._colons(start, end, pieces)
            return cst.Slice(
                lower=None if node.lower is None else self.expr(node.lower),
                upper=None if node.upper is None else self.expr(node.upper),
                step=None if node.step is None else self.expr(node.step),
                first_colon=_new[cst.Colon](),
                second_colon=_new[cst.Colon]() if colons > 1 else cst.MaybeSentinel.DEFAULT,
            )
        if isinstance(node, ast.Starred):
            raise Unsupported("a starred subscript")
        return _new[cst.Index](value=self.expr(node))

    def _colons(self, start: int, end: int, pieces: Sequence[ast.expr]) -> int:
        text = bytearray(self.src[start:end])
        for piece in pieces:
            a = self.extent(piece)[0] - start
            b = self._extent_end(piece) - start
            text[a:b] = b" " * (b - a)
        return bytes(text).count(b":")

    def _comprehension(self, generators: Sequence[ast.comprehension]) -> Any:
        result: cst.CompFor | None = None
        for generator in reversed(generators):
            result = cst.CompFor(
                target=self.expr(generator.target),
                iter=self.expr(generator.iter),
                ifs=[_new[cst.CompIf](test=self.expr(test)) for test in generator.ifs],
                inner_for_in=result,
                asynchronous=_new[cst.Asynchronous]() if generator.is_async else None,
            )
        assert result is not None
        return result

    def _parameters(self, args: ast.arguments) -> Any:
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
        defaults += args.defaults
        made: list[tuple[str, Any, int]] = []  # (kind, node, end)

        def param(arg: ast.arg, default: ast.expr | None, star: str) -> tuple[Any, int]:
            annotation = None
            end = self.span(arg)[1]
            if arg.annotation is not None:
                annotation = _new[cst.Annotation](annotation=self.expr(arg.annotation))
            if default is not None:
                end = self._extent_end(default)
                return _new[cst.Param](
                    name=_new[cst.Name](arg.arg),
                    annotation=annotation,
                    equal=_new[cst.AssignEqual](),
                    default=self.expr(default),
                    star=star,
                ), end
            name = _new[cst.Name](arg.arg)
            return _new[cst.Param](name=name, annotation=annotation, star=star), end

        for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            node, end = param(arg, default, "")
            made.append(("posonly" if i < len(args.posonlyargs) else "param", node, end))
            if args.posonlyargs and i == len(args.posonlyargs) - 1:
                made.append(("slash", _new[cst.ParamSlash](), self._after_char(end, 0x2F)))
        if args.vararg is not None:
            node, end = param(args.vararg, None, "*")
            made.append(("star", node, end))
        elif args.kwonlyargs:
            star_at = self._star_before(args.kwonlyargs[0])
            made.append(("bare", _new[cst.ParamStar](), star_at + 1))
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            node, end = param(arg, kw_default, "")
            made.append(("kwonly", node, end))
        if args.kwarg is not None:
            node, end = param(args.kwarg, None, "**")
            made.append(("kwarg", node, end))
        out: dict[str, Any] = {"params": [], "kwonly_params": [], "posonly_params": []}
        for i, (kind, node, end) in enumerate(made):
            comma = i < len(made) - 1 or self.char(self.after(end)) == 0x2C
            if comma:
                node = node.with_changes(comma=_new[cst.Comma]())
            if kind == "posonly":
                out["posonly_params"].append(node)
            elif kind == "param":
                out["params"].append(node)
            elif kind == "slash":
                out["posonly_ind"] = node
            elif kind in ("star", "bare"):
                out["star_arg"] = node
            elif kind == "kwonly":
                out["kwonly_params"].append(node)
            else:
                out["star_kwarg"] = node
        return _new[cst.Parameters](**out)

    def _after_char(self, end: int, char: int) -> int:
        """The end of the ``char`` that follows ``end`` (a comma may sit between)."""
        at = self.after(end)
        if self.char(at) == 0x2C:
            at = self.after(at + 1)
        if self.char(at) != char:
            raise Unsupported("a parameter list")
        return at + 1

    def _star_before(self, arg: ast.arg) -> int:
        at = self.before(self.span(arg)[0])  # the comma after the bare star
        at = self.before(at)
        if self.char(at) != 0x2A:
            raise Unsupported("a parameter list")
        return at

    # -- statements -----------------------------------------------------------------------

    def module(self) -> cst.Module:
        module = cst.Module(body=self._body(self.tree.body))
        if self.built_strings != self.lexed_strings:
            raise Unsupported("string literals the scan read otherwise")
        return module

    def text_of(self, node: cst.CSTNode) -> str:
        """``node``'s source text, as libcst's ``code_for_node`` gives it (expressions only)."""
        origin = self.origin.get(id(node))
        if origin is None or not isinstance(origin[0], ast.expr):
            raise Unsupported(f"the text of a {type(node).__name__}")
        start, end = self.span(origin[0])
        if origin[1] < 0:  # the call's parentheses and the layout inside them are the call's
            start, end = self.after(start + 1), self.before(end - 1) + 1
        for _ in range(origin[1]):
            start = self.before(start)
            end = self.close_of[start] + 1
        text = self.src[start:end]
        if b"\n" in text and origin[2]:
            text = self._unindented(start, end, origin[2])
        return text.decode()

    def _unindented(self, start: int, end: int, indent: bytes) -> bytes:
        """The text as libcst renders a node alone: a line inside brackets that starts with
        the indentation of the block around the node starts without it; a line inside a
        string, or after a backslash, is as written."""
        src = self.src
        out: list[bytes] = []
        at = start
        newline = src.find(b"\n", at, end)
        while newline >= 0:
            out.append(src[at : newline + 1])
            at = newline + 1
            inside = next((f for a, b, f in self.multiline_strings if a <= newline < b), None)
            if inside:
                # An f-string's replacement field may run over lines, rendered as code.
                raise Unsupported("the text of an f-string over several lines")
            continued = src[:newline].rstrip(b"\r").endswith(b"\\")
            if inside is None and not continued and src.startswith(indent, at):
                at += len(indent)
            newline = src.find(b"\n", at, end)
        out.append(src[at:end])
        return b"".join(out)

    def range_of(self, node: cst.CSTNode) -> CodeRange | None:
        """libcst's ``PositionProvider`` range of a node the source gives it for."""
        origin = self.origin.get(id(node))
        if origin is None:
            return None
        found = origin[0]
        if origin[1] < 0 or isinstance(found, (ast.Tuple, ast.GeneratorExp)):
            return None  # libcst leaves out the parentheses that are the span's own ends
        if getattr(found, "decorator_list", None):
            return None  # libcst starts a decorated definition at its first decorator
        n = cast(Any, found)
        start = self._position(n.lineno, n.col_offset)
        if isinstance(found, ast.stmt):
            last = cast(Any, origin[4] if len(origin) > 4 else found)  # a line's last statement
            end = self.starts[last.end_lineno - 1] + last.end_col_offset
            if self.src[end - 1] == 0x3B:  # a block's range ends before its last ';'
                end = self.before(end - 1) + 1
            line = bisect.bisect_right(self.starts, end - 1)
            return CodeRange(start, self._position(line, end - self.starts[line - 1]))
        return CodeRange(start, self._position(n.end_lineno, n.end_col_offset))

    def _position(self, line: int, column: int) -> CodePosition:
        start = self.starts[line - 1]
        return CodePosition(line, len(self.src[start : start + column].decode()))

    def _body(self, statements: Sequence[ast.stmt]) -> list[Any]:
        out: list[Any] = []
        line: list[Any] = []
        for statement in statements:
            if _is_compound(statement):
                if line:
                    raise Unsupported("a compound statement after a semicolon")
                built = self._compound(statement)
                self.origin[id(built)] = (statement, 0, self.indent, built)
                out.append(built)
                continue
            small, more = self._small(statement)
            if not line:
                first = statement
            line.append(small)
            if not more:
                built = _new[cst.SimpleStatementLine](
                    body=line,
                    trailing_whitespace=_new[cst.TrailingWhitespace](),
                )
                self.origin[id(built)] = (first, 0, self.indent, built, statement)
                out.append(built)
                line = []
        if line:
            raise Unsupported("a statement line")
        return out

    def _small(self, statement: ast.stmt) -> tuple[Any, bool]:
        """A small statement, and whether the next one shares its line (a semicolon)."""
        start, end = self.span(statement)
        built = self._small_statement(statement, start, end)
        at = self.after_on_line(end)
        more = False
        if self.char(at) == 0x3B:  # ';'
            built = built.with_changes(semicolon=_new[cst.Semicolon]())
            more = self.char(self.after_on_line(at + 1)) not in (0x0A, 0x0D, 0x23, -1)
        self.origin[id(built)] = (statement, 0, self.indent, built)
        return built, more

    def after_on_line(self, at: int) -> int:
        src = self.src
        while at < len(src) and src[at] in (0x20, 0x09, 0x0C):
            at += 1
        if at < len(src) and src[at] == 0x5C:  # a continuation line
            return self.after_on_line(self.after(at))
        return at

    def _small_statement(self, node: Any, start: int, end: int) -> Any:
        kind = type(node)
        if kind is ast.Expr:
            return _new[cst.Expr](value=self.expr(node.value))
        if kind is ast.Assign:
            return _new[cst.Assign](
                targets=[_new[cst.AssignTarget](target=self.expr(t)) for t in node.targets],
                value=self.expr(node.value),
            )
        if kind is ast.AugAssign:
            return _new[cst.AugAssign](
                target=self.expr(node.target),
                operator=_new[_AUGMENTED[type(node.op)]](),
                value=self.expr(node.value),
            )
        if kind is ast.AnnAssign:
            if node.value is None:
                return _new[cst.AnnAssign](
                    target=self.expr(node.target),
                    annotation=cst.Annotation(self.expr(node.annotation)),
                )
            return _new[cst.AnnAssign](
                target=self.expr(node.target),
                annotation=cst.Annotation(self.expr(node.annotation)),
                value=self.expr(node.value),
                equal=_new[cst.AssignEqual](),
            )
        if kind is ast.Return:
            value = node.value
            return _new[cst.Return](value=None if value is None else self.expr(value))
        if kind is ast.Pass:
            return _new[cst.Pass]()
        if kind is ast.Break:
            return _new[cst.Break]()
        if kind is ast.Continue:
            return _new[cst.Continue]()
        if kind is ast.Raise:
            return _new[cst.Raise](
                exc=None if node.exc is None else self.expr(node.exc),
                cause=None if node.cause is None else cst.From(self.expr(node.cause)),
            )
        if kind is ast.Assert:
            if node.msg is None:
                return _new[cst.Assert](test=self.expr(node.test))
            return _new[cst.Assert](
                test=self.expr(node.test), msg=self.expr(node.msg), comma=_new[cst.Comma]()
            )
        if kind is ast.Delete:
            return self._delete(node, start, end)
        if kind is ast.Import:
            return _new[cst.Import](names=self._aliases(node.names, end))
        if kind is ast.ImportFrom:
            return self._import_from(node, start, end)
        if kind is ast.Global:
            return _new[cst.Global](names=self._name_items(node.names))
        if kind is ast.Nonlocal:
            return _new[cst.Nonlocal](names=self._name_items(node.names))
        raise Unsupported(kind.__name__)

    def _delete(self, node: ast.Delete, start: int, end: int) -> Any:
        if len(node.targets) == 1:
            return _new[cst.Del](target=self.expr(node.targets[0]))
        first = self.span(node.targets[0])[0]
        if self.before(first) != start + 2:  # 'del (a, b)' would hold a parenthesised tuple
            raise Unsupported("a parenthesised del")
        return _new[cst.Del](
            target=_new[cst.Tuple](elements=self._elements(node.targets, end), lpar=(), rpar=()),
        )

    def _name_items(self, names: Sequence[str]) -> list[cst.NameItem]:
        last = len(names) - 1
        return [
            _new[cst.NameItem](
                name=_new[cst.Name](name),
                comma=_new[cst.Comma]() if i < last else cst.MaybeSentinel.DEFAULT,
            )
            for i, name in enumerate(names)
        ]

    def _aliases(self, names: Sequence[ast.alias], end: int) -> list[cst.ImportAlias]:
        out: list[cst.ImportAlias] = []
        last = len(names) - 1
        for i, alias in enumerate(names):
            asname = None if alias.asname is None else _new[cst.AsName](
                name=_new[cst.Name](alias.asname))
            comma: Any = (
                _new[cst.Comma]()
                if i < last or self.trailing_comma(self.span(alias)[1])
                else cst.MaybeSentinel.DEFAULT
            )
            out.append(_new[cst.ImportAlias](name=_dotted(alias.name), asname=asname, comma=comma))
        return out

    def _import_from(self, node: ast.ImportFrom, start: int, end: int) -> Any:
        relative = [_new[cst.Dot]() for _ in range(node.level or 0)]
        module = None if node.module is None else _dotted(node.module)
        if len(node.names) == 1 and node.names[0].name == "*":
            return _new[cst.ImportFrom](
                module=module, names=_new[cst.ImportStar](), relative=relative
            )
        first = self.span(node.names[0])[0]
        opening = self.before(first)
        names = self._aliases(node.names, end)
        if self.char(opening) == 0x28:
            return _new[cst.ImportFrom](
                module=module,
                names=names,
                relative=relative,
                lpar=_new[cst.LeftParen](),
                rpar=_new[cst.RightParen](),
            )
        return _new[cst.ImportFrom](module=module, names=names, relative=relative)

    def _compound(self, node: Any) -> Any:
        kind = type(node)
        if kind is ast.If:
            return self._if(node)
        if kind is ast.For or kind is ast.AsyncFor:
            return _new[cst.For](
                target=self.expr(node.target),
                iter=self.expr(node.iter),
                body=self._suite(node.body),
                orelse=self._else(node.orelse),
                asynchronous=_new[cst.Asynchronous]() if kind is ast.AsyncFor else None,
            )
        if kind is ast.While:
            return _new[cst.While](
                test=self.expr(node.test),
                body=self._suite(node.body),
                orelse=self._else(node.orelse),
            )
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            return self._function(node, kind is ast.AsyncFunctionDef)
        if kind is ast.ClassDef:
            return self._class(node)
        if kind is ast.With or kind is ast.AsyncWith:
            return self._with(node, kind is ast.AsyncWith)
        if kind is ast.Try:
            return self._try(node)
        raise Unsupported(kind.__name__)

    def _suite(self, body: Sequence[ast.stmt]) -> Any:
        first = self.span(body[0])[0]
        decorators = getattr(body[0], "decorator_list", None)
        if decorators:
            first = self.before(self.extent(decorators[0])[0])  # the '@'
        colon = self.before(first)
        if self.char(colon) != 0x3A:
            raise Unsupported("a block")
        if b"\n" in self.src[colon:first]:
            outer = self.indent
            line = self.src.rfind(b"\n", 0, first) + 1
            self.indent = self.src[line:first]
            try:
                return _new[cst.IndentedBlock](
                    body=self._body(body), header=_new[cst.TrailingWhitespace]()
                )
            finally:
                self.indent = outer
        statements = self._body(body)
        if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
            raise Unsupported("a one-line block")
        return _new[cst.SimpleStatementSuite](
            body=statements[0].body,
            trailing_whitespace=_new[cst.TrailingWhitespace](),
        )

    def _else(self, orelse: Sequence[ast.stmt]) -> Any:
        return _new[cst.Else](body=self._suite(orelse)) if orelse else None

    def _if(self, node: ast.If) -> Any:
        orelse: Any = None
        if node.orelse:
            nested = node.orelse[0]
            if (
                len(node.orelse) == 1
                and isinstance(nested, ast.If)
                and self.src.startswith(b"elif", self.span(nested)[0])
            ):
                orelse = self._if(nested)
            else:
                orelse = self._else(node.orelse)
        return _new[cst.If](test=self.expr(node.test), body=self._suite(node.body), orelse=orelse)

    def _decorators(self, decorators: Sequence[ast.expr]) -> list[cst.Decorator]:
        return [_new[cst.Decorator](decorator=self.expr(d)) for d in decorators]

    def _function(self, node: ast.FunctionDef, is_async: bool) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        decorators = self._decorators(node.decorator_list)
        keyword = _DEF.match(self.src, self.span(node)[0])
        if keyword is None:
            raise Unsupported("a function header")
        name_at = keyword.end()
        open_ = self.after(name_at + len(node.name))
        if self.char(open_) != 0x28:
            raise Unsupported("a function header")
        self.claimed.add(open_)
        params = self._parameters(node.args)
        returns = None if node.returns is None else cst.Annotation(self.expr(node.returns))
        return _new[cst.FunctionDef](
            name=_new[cst.Name](node.name),
            params=params,
            body=self._suite(node.body),
            decorators=decorators,
            returns=returns,
            asynchronous=_new[cst.Asynchronous]() if is_async else None,
        )

    def _class(self, node: ast.ClassDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        decorators = self._decorators(node.decorator_list)
        keyword = _CLASS.match(self.src, self.span(node)[0])
        if keyword is None:
            raise Unsupported("a class header")
        name_at = keyword.end()
        open_ = self.after(name_at + len(node.name))
        extra: dict[str, Any] = {}
        bases: list[cst.Arg] = []
        keywords: list[cst.Arg] = []
        if self.char(open_) == 0x28:
            self.claimed.add(open_)
            extra = {"lpar": _new[cst.LeftParen](), "rpar": _new[cst.RightParen]()}
            for arg in self._arguments(node.bases, node.keywords, self.close_of[open_]):
                (keywords if arg.keyword is not None or arg.star == "**" else bases).append(arg)
        return _new[cst.ClassDef](
            name=_new[cst.Name](node.name),
            body=self._suite(node.body),
            bases=bases,
            keywords=keywords,
            decorators=decorators,
            **extra,
        )

    def _with(self, node: ast.With, is_async: bool) -> Any:
        keyword = _WITH.match(self.src, self.span(node)[0])
        if keyword is None:
            raise Unsupported("a with header")
        opening = self.after(keyword.end())
        extra: dict[str, Any] = {}
        if self.char(opening) == 0x28:
            close = self.close_of[opening]
            if self.char(self.after(close + 1)) == 0x3A:  # 'with (a, b):' groups the items
                self.claimed.add(opening)
                extra = {"lpar": _new[cst.LeftParen](), "rpar": _new[cst.RightParen]()}
        items: list[cst.WithItem] = []
        last = len(node.items) - 1
        for i, item in enumerate(node.items):
            asname = None
            end = self._extent_end(item.context_expr)
            if item.optional_vars is not None:
                asname = _new[cst.AsName](name=self.expr(item.optional_vars))
                end = self._extent_end(item.optional_vars)
            built = _new[cst.WithItem](item=self.expr(item.context_expr), asname=asname)
            if i < last or self.trailing_comma(end):
                built = built.with_changes(comma=_new[cst.Comma]())
            items.append(built)
        return _new[cst.With](
            items=items,
            body=self._suite(node.body),
            asynchronous=_new[cst.Asynchronous]() if is_async else None,
            **extra,
        )

    def _try(self, node: ast.Try) -> Any:
        handlers = []
        for handler in node.handlers:
            name = None if handler.name is None else _new[cst.AsName](
                name=_new[cst.Name](handler.name))
            handlers.append(
                cst.ExceptHandler(
                    body=self._suite(handler.body),
                    type=None if handler.type is None else self.expr(handler.type),
                    name=name,
                )
            )
        final = None if not node.finalbody else _new[cst.Finally](body=self._suite(node.finalbody))
        return _new[cst.Try](
            body=self._suite(node.body),
            handlers=handlers,
            orelse=self._else(node.orelse),
            finalbody=final,
        )


def _is_compound(node: ast.stmt) -> bool:
    """A statement with a block (``match`` included, ``try ... except*`` on 3.11+)."""
    fields = node._fields
    return "body" in fields or "cases" in fields


def _dotted(name: str) -> Any:
    parts = name.split(".")
    result: Any = _new[cst.Name](parts[0])
    for part in parts[1:]:
        result = _new[cst.Attribute](value=result, attr=_new[cst.Name](part), dot=_new[cst.Dot]())
    return result


def _parse_fstring(text: str) -> Any:
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError as exc:
        raise Unsupported("an f-string") from exc

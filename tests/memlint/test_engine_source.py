"""The engine hands rules the file's text by decoding its bytes, not by re-rendering the tree."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from memlint.engine import decoded_source

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))

AWKWARD = [
    b"\xef\xbb\xbfx = 1\r\ny = 2\r\n",
    b"# -*- coding: latin-1 -*-\ns = '\xe9'\n",
    b"\xef\xbb\xbf# coding: utf-8\nx = 1\n",
    b"",
    b"x = 1",
    b"a = 1\r\nb = 2\n\rc = 3\n",
    b"def f():\n\tif x:\n\t\treturn '\xc3\xa9'  # tabs and utf-8\n",
]


@pytest.mark.parametrize("source", [*AWKWARD, *(p.read_bytes() for p in CORPUS)])
def test_decoded_source_equals_the_rendered_module(source: bytes) -> None:
    module = cst.parse_module(source)
    assert decoded_source(source, module) == module.code


@pytest.mark.parametrize("source", [*AWKWARD, *(p.read_bytes() for p in CORPUS[:25])])
def test_unvalidated_parse_builds_the_same_tree(source: bytes) -> None:
    """memlint's parse skips libcst's per-node validation: the tree must be the one libcst's
    own (validating) parse builds, and validation must be back on afterwards."""
    from memlint.engine import parse

    fast = parse(source)
    assert fast.deep_equals(cst.parse_module(source))
    assert fast.code == cst.parse_module(source).code
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")


def test_validation_is_restored_after_a_parse_error() -> None:
    from memlint.engine import parse

    with pytest.raises(cst.ParserSyntaxError):
        parse(b"def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")

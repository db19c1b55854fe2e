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

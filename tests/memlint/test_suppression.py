"""Suppression comments: spellings, placement, strings that only look like comments."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from memlint.diagnostics import Diagnostic
from memlint.filecheck import lint_bytes
from memlint.suppression import (
    SuppressionIndex,
    _comments,
    _tokenized_comments,
    index_for,
    parse_suppressions,
)
from tests.memlint.cli_support import TEST_RULES, FlagLeak, run_cli, write


def codes_left(source: str) -> list[tuple[int, str]]:
    result = lint_bytes("t.py", textwrap.dedent(source).encode(), TEST_RULES)
    return [(d.line, d.code) for d in result.diagnostics]


def test_unsuppressed_baseline() -> None:
    assert codes_left("leak()\ndrip()\n") == [(1, "MEM901"), (2, "MEM902")]


@pytest.mark.parametrize("comment", [
    "# noqa",
    "# NOQA",
    "#noqa:MEM901",
    "# noqa: MEM901, MEM902",
    "# noqa: mem901",
    "# type: ignore  # noqa: MEM901",
    "# memlint: ignore[MEM901]",
    "# MEMLINT: IGNORE[mem902, mem901]",
])
def test_line_suppressions(comment: str) -> None:
    assert codes_left(f"leak()  {comment}\nleak()\n") == [(2, "MEM901")]


@pytest.mark.parametrize("comment", ["# noqa: MEM902", "# memlint: ignore[MEM902]",
                                     "# no qa", "# memlint: ignore"])
def test_other_codes_or_malformed_comments_do_not_suppress(comment: str) -> None:
    assert codes_left(f"leak()  {comment}\n") == [(1, "MEM901")]


def test_statement_first_line_covers_a_multiline_statement() -> None:
    source = """\
    result = compute(  # noqa: MEM901
        1,
        leak(),
    )
    other = compute(
        leak(),  # noqa: MEM901
    )
    last = compute(
        leak(),
    )  # noqa: MEM901
    """
    assert codes_left(source) == [(9, "MEM901")]


def test_noqa_inside_a_string_does_not_count() -> None:
    source = '''\
    leak("# noqa")
    doc = """
    # memlint: noqa
    """
    x = leak(); y = "# noqa: MEM901"
    '''
    assert codes_left(source) == [(1, "MEM901"), (5, "MEM901")]


def test_file_level_noqa_on_its_own_line() -> None:
    assert codes_left("import torch\n# memlint: noqa\nleak()\n") == []
    assert codes_left("leak()  # memlint: noqa\nleak()\n") == [(1, "MEM901"), (2, "MEM901")]
    # With codes, only those codes are off for the file.
    src = "# memlint: noqa: MEM902\nleak()\ndrip()\n"
    result = lint_bytes("t.py", src.encode(), TEST_RULES)
    assert [d.code for d in result.diagnostics] == ["MEM901"]


def test_parse_errors_cannot_be_silenced_by_line_comments() -> None:
    assert [c for _, c in codes_left("def f(:  # noqa\n")] == ["MEM999"]


def test_index_records_which_comment_silenced_what() -> None:
    text = "leak()  # noqa: MEM901, MEM902\nx = 1  # noqa\nleak()  # memlint: ignore[MEM901]\n"
    index = index_for(text)
    assert [(c.line, c.kind, c.codes) for c in index.comments] == [
        (1, "noqa", frozenset({"MEM901", "MEM902"})),
        (2, "noqa", None),
        (3, "ignore", frozenset({"MEM901"})),
    ]
    diags = [Diagnostic("t.py", line, 1, line, 7, "MEM901", "test-leak", "m") for line in (1, 3)]
    assert index.apply(diags) == []
    unused = [(c.line, codes) for c, codes in index.unused()]
    assert unused == [(1, frozenset({"MEM902"})), (2, None)]
    first = index.comments[0]
    assert (first.column, first.end_column) == (9, 9 + len("# noqa: MEM901, MEM902"))


def test_files_without_directives_skip_tokenizing() -> None:
    assert index_for("x = 1\n").comments == []
    assert isinstance(index_for(""), SuppressionIndex)
    # A file tokenize rejects still yields the directives before the error.
    assert [c.line for c in parse_suppressions("x = 1  # noqa\ns = '''\n")] == [1]


def test_cli_respects_suppressions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "a.py", "leak()  # noqa: MEM901\n")
    assert run_cli(capsys, tmp_path, "--no-cache").rc == 0


def test_text_inside_a_newer_f_string_is_no_comment() -> None:
    """``f"{d["# noqa"]}"`` is one string (Python 3.12 syntax); the tokenizer of 3.11 takes
    its rest for a comment. Only real comments count, on every Python memlint runs on."""
    source = 'x = f"{d["# noqa"]}"\ny = 1  # noqa: MEM001\n# memlint: noqa: MEM002\n'
    assert [(s.line, s.kind, s.codes) for s in parse_suppressions(source)] == [
        (2, "noqa", frozenset({"MEM001"})), (3, "file", frozenset({"MEM002"}))]
    result = lint_bytes("t.py", b'leak(f"{d["# noqa"]}")\n', [FlagLeak])
    assert [d.code for d in result.diagnostics] == ["MEM901"]


def test_comments_of_a_cr_only_file_are_found_line_by_line() -> None:
    source = "# memlint: noqa: MEM002\rx = 1  # noqa: MEM001\ry = 2\r"
    assert [(s.line, s.kind, s.codes) for s in parse_suppressions(source)] == [
        (1, "file", frozenset({"MEM002"})), (2, "noqa", frozenset({"MEM001"}))]


_REPO = Path(__file__).resolve().parents[2]


def test_comments_are_the_ones_tokenize_finds_on_real_files() -> None:
    """The regular expression that reads comments past strings agrees with tokenize on every
    Python file of this repository (the rule examples, the corpus, memlint itself)."""
    files = [p for top in ("memlint", "tests", "examples", "bench")
             for p in sorted((_REPO / top).rglob("*.py")) if ".work" not in p.parts]
    assert len(files) > 200
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert list(_comments(text)) == list(_tokenized_comments(text)), path


@pytest.mark.parametrize("source", [
    "s = '# no'  # noqa\n",
    's = """\n# inside\n"""  # noqa: MEM001\n',
    "x = (1,\n     # noqa alone in brackets\n     2)\n",
    "t = r'\\'# x'  # real\n",
    "u = b'#' if a else rb\"#\"  # memlint: ignore[MEM001]\n",
    "v = 1if'#'else 2  # noqa\n",
    "w = 'a\\\n# still the string'  # noqa\n",
    "\tx = 1\t# noqa\n",
])
def test_comments_past_tricky_strings_are_tokenize_s(source: str) -> None:
    assert list(_comments(source)) == list(_tokenized_comments(source))

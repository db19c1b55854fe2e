"""The text prefilter: split patterns match exactly where the whole pattern does."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint.prefilter import literal_prefix, search, split_alternatives
from memlint.project.summary import _PROJECT_FACTS
from memlint.rules.index import RULES

PATTERNS = [r.trigger_pattern for r in RULES if r.trigger_pattern is not None] + [
    _PROJECT_FACTS]


@pytest.mark.parametrize(("pattern", "parts"), [
    (rb"ab|cd", [rb"ab", rb"cd"]),
    (rb"(?:zeros|ones)\(x\)", [rb"zeros\(x\)", rb"ones\(x\)"]),
    # A quantified group is no choice between prefixes: kept whole.
    (rb"(?:a|b)+c", [rb"(?:a|b)+c"]),
    (rb"(?:a|b)?c|d", [rb"(?:a|b)?c", rb"d"]),
    # Bars inside classes, escapes and inner groups are not top-level alternatives.
    (rb"[|(]x|\|y|(a|b)z", [rb"[|(]x", rb"\|y", rb"(a|b)z"]),
    (rb"[]|]q|r", [rb"[]|]q", rb"r"]),
    # Inline global flags apply to every alternative: nothing is split.
    (rb"(?i)ab|cd", [rb"(?i)ab|cd"]),
    # Unbalanced brackets: left to the regular expression engine as they are.
    (rb"a)|b", [rb"a)|b"]),
    (rb"[ab|c", [rb"[ab|c"]),
])
def test_split_alternatives(pattern: bytes, parts: list[bytes]) -> None:
    assert split_alternatives(pattern) == parts


@pytest.mark.parametrize(("pattern", "prefix"), [
    (rb"zeros\(x", b"zeros(x"),
    (rb"rand\w*\(", b"rand"),  # \w is a class, not a literal
    (rb"\.eval\(", b".eval("),
    (rb"ab?c", b"a"),  # b may be absent
    (rb"ab*", b"a"),
    (rb"ab{2}", b"a"),
    (rb"def _?(?:eval|test)", b"def "),
    (rb"x\\y", b"x\\y"),  # an escaped backslash is a literal one
    (rb"\bfoo", b""),
    (rb"(?i)oom", b""),
    (rb"(?:a|b)c", b""),
    (rb"[ab]c", b""),
])
def test_literal_prefix(pattern: bytes, prefix: bytes) -> None:
    assert literal_prefix(pattern) == prefix
    assert all(m.group().startswith(prefix) for m in re.finditer(
        pattern, b"zeros(x rand( randn( .eval( abc ac abbb aab def eval x\\y foo oom bc"))


def test_every_rule_pattern_opens_with_literals_once_split() -> None:
    """The point of splitting: each part starts with a literal the engine can skip to. A
    pattern in any case (``(?i)``) has none to skip to; it is searched only in the few
    files that hold one of its rule's triggers."""
    for pattern in PATTERNS:
        if pattern.startswith(b"(?i)"):
            continue
        for part in split_alternatives(pattern):
            assert re.match(rb"(?:\\.|\w)", part), part


def _pieces(pattern: bytes) -> list[bytes]:
    return [w for w in re.findall(rb"[A-Za-z_]+", pattern) if len(w) > 1]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_split_search_agrees_with_the_whole_pattern(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    words = [
        *_pieces(pattern), b"(", b")", b".", b"\n", b" ", b":", b"def ", b"torch.", b".to(",
        b".cuda(", b", ", b"return ", b"x", b"device", b"=False"]
    text = b"".join(data.draw(st.lists(st.sampled_from(words), max_size=40)))
    assert search(pattern, text) == (re.search(pattern, text) is not None)


def test_the_oom_pattern_needs_the_word_in_any_case() -> None:
    spec = next(r for r in RULES if r.code == "MEM006")
    assert spec.trigger_pattern is not None
    for text in (b"except RuntimeError:  # OOM", b"if 'out of memory' in str(e):",
                 b"# CUDA Out Of Memory", b"except torch.cuda.OutOfMemoryError:"):
        assert search(spec.trigger_pattern, text), text
    for text in (b"model = BloomModel(config)", b"zoom = 2", b"room for memory"):
        assert not search(spec.trigger_pattern, text), text


@pytest.mark.parametrize("text", [
    b"model.eval()", b"def predict(self, x):", b"x = torch.zeros(3, 4).float().to(device)",
    b"torch.randn(2).cuda()", b"return torch.no_grad()", b"with torch.no_grad():\n    return x",
    b"nothing to see", b"torch.zeros(3).to(torch.float16)",
])
def test_split_search_on_real_shapes(text: bytes) -> None:
    for pattern in PATTERNS:
        assert search(pattern, text) == (re.search(pattern, text) is not None)


@pytest.mark.parametrize("text", [
    b"x = FloatTensor(3)", b"Tensor(a) and BoolTensor(1)", b"FloatTensor(a)", b"Tensor(",
    b"LongTensor(7)", b"",
])
def test_a_text_inside_another_guards_it(text: bytes) -> None:
    """``Tensor(`` is searched for before ``FloatTensor(``, and its absence skips the
    longer one; its presence must not stop the longer one's own pattern from matching."""
    pattern = rb"(?:FloatTensor|Tensor|BoolTensor|LongTensor)\(\d"
    assert search(pattern, text) == (re.search(pattern, text) is not None)


@pytest.mark.parametrize("text", [
    b"def f(): pass\n" * 12 + b"def predict(self, x):",
    b"def f(): pass\n" * 3 + b"def predict(self, x):" + b"def g(): pass\n" * 12,
    b"zeros(a) " * 11 + b"x = torch.zeros(3).cuda()",
    b"zeros(a) " * 11,
    b"def f(): pass\n" * 20,
])
def test_a_literal_opening_found_many_times(text: bytes) -> None:
    """Parts are tried where their literal opening occurs, one place at a time for the
    first few and by the parts' own search after: a match past those first few places, or
    none at all, is judged as the whole pattern judges it."""
    for pattern in PATTERNS:
        assert search(pattern, text) == (re.search(pattern, text) is not None)

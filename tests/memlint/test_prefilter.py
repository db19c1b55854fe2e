"""The text prefilter: split patterns match exactly where the whole pattern does."""

from __future__ import annotations

import ast
import keyword
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint import prefilter
from memlint.gates import code_facts
from memlint.prefilter import (
    _clusters,
    applicable_rules,
    literal_prefix,
    search,
    split_alternatives,
)
from memlint.project.summary import _PROJECT_FACTS
from memlint.rules.index import RULES
from memlint.vocabulary import LOADER_TEXT

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
    pattern in any case (``(?i)``) is split as the lowered text is searched."""
    for pattern in PATTERNS:
        if pattern.startswith(b"(?i)"):
            pattern = pattern[4:]
            assert pattern == pattern.lower()
        for part in split_alternatives(pattern):
            assert re.match(rb"(?:\\.|\w)", part), part


def _pieces(pattern: bytes) -> list[bytes]:
    return [w for w in re.findall(rb"[A-Za-z_]+", pattern) if len(w) > 1]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_split_search_agrees_with_the_whole_pattern(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    pieces = _pieces(pattern)  # in other cases too: a `(?i)` pattern searches lowered text
    words = [
        *pieces, *(p.upper() for p in pieces), *(p.capitalize() for p in pieces),
        b"(", b")", b".", b"\n", b" ", b":", b"def ", b"torch.", b".to(",
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


def test_the_unused_noqa_rule_needs_a_directive_naming_a_memlint_code() -> None:
    """MEM998 reads a file only where a suppression comment names a MEM code after its
    directive, in any case: not for "MEMORY" beside a ``# noqa: F401``."""
    from memlint.prefilter import applicable_rules

    spec = next(r for r in RULES if r.code == "MEM998")
    for text in (b"x = f()  # noqa: MEM001", b"x = f()  # NOQA:E501,mem010 why",
                 b"# memlint: noqa: MEM002\n", b"y = g()  # memlint: ignore[MEM013]",
                 b"z = h()  # NoQA: Mem005"):
        assert applicable_rules(text, [spec]) == [spec], text
    for text in (b"MEMORY = 1\nimport os  # noqa: F401", b"# noqa\nMEM001 = 'code'",
                 b"x = 1  # noqa: E501\ny = 'MEM001'"):
        assert applicable_rules(text, [spec]) == [], text


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


_CASED = st.sampled_from(["loader", "Loader", "LOADER", "dl", "DL", "Dl", "batch_idx", "batchIdx",
                          "batch_i", "i_batch", "iBatch", "bidx", "b_idx", "batch_nb", "batching",
                          "dlpack"])


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"[A-Za-z_]{0,6}", fullmatch=True), _CASED,
       st.from_regex(r"[A-Za-z0-9_]{0,6}", fullmatch=True),
       st.sampled_from(["x = {}\n", "for {}, (x, y) in enumerate(data):\n    pass\n",
                        "for ({}, batch) in enumerate(data):\n    pass\n",
                        "for {} in range(n):\n    pass\n", "f({})\n", "a.{}.b\n"]))
def test_mem003_text_admits_every_file_its_gate_passes(
        before: str, word: str, after: str, shape: str) -> None:
    """MEM003's pattern must hold wherever its code gate finds a loader name or a loop that
    draws batches by its header (a name the gate reads, in any code around it); it may hold
    elsewhere too."""
    name = before + word + after
    if not name.isidentifier() or keyword.iskeyword(name):
        return
    code = shape.format(name).encode()
    if "fact:loader-name" in code_facts(ast.parse(code), code):
        assert search(LOADER_TEXT, code), code


def test_mem003_text_leaves_words_that_are_no_loader_names() -> None:
    for text in (b"continuous_batching = True", b"torch.from_dlpack(x)",
                 b"dist.batch_isend_irecv(ops)", b"batch_number = 0",
                 b"for batch_idx in range(batch_size):", b"x = hidden[batch_index]"):
        assert not search(LOADER_TEXT, text), text
    for text in (b"for batch_idx, (x, y) in enumerate(data):", b"self.val_dl = dl",
                 b"train_loader = DataLoader(ds)", b"for b_idx, batch in enumerate(it):",
                 b"for (batch_idx, batch) in enumerate(data):"):
        assert search(LOADER_TEXT, text), text


def test_a_pattern_in_any_case_is_searched_on_lowered_text_only_when_that_is_the_same() -> None:
    """``(?i)`` patterns are searched on the lowered text; one that says ``\\W`` or turns the
    flag off for a part is searched as it is, so that the answer stays re.search's."""
    for pattern, text in ((rb"(?i)a\Wb", b"A b"), (rb"(?i)x(?-i:Y)", b"xy"),
                          (rb"(?i)x(?-i:Y)", b"XY"), (rb"(?i)oom\b", b"OOM!")):
        assert search(pattern, text) == (re.search(pattern, text) is not None), pattern


_TRIGGER_WORDS = st.lists(st.from_regex(r"[ab_(]{1,6}", fullmatch=True), min_size=1,
                          max_size=8, unique=True)


@settings(max_examples=300, deadline=None)
@given(_TRIGGER_WORDS, st.from_regex(r"[ab_( ]{0,40}", fullmatch=True))
def test_a_group_split_into_guarded_clusters_matches_where_a_word_does(
        words: list[str], text: str) -> None:
    # A guard shared by several words stands for them where it is absent.
    triggers = tuple(words)
    data = text.encode()
    rule = type("R", (), {"triggers": triggers, "requires": (), "trigger_pattern": None})()
    expected = any(w.encode() in data for w in words)
    assert bool(applicable_rules(data, [rule])) == expected


def test_words_that_share_a_text_are_scanned_for_it_first() -> None:
    clusters = _clusters((b"batch_i", b"i_batch", b"ibatch", b"loader", b"Loader", b"x"))
    assert clusters == ((b"batch", (b"batch_i", b"i_batch", b"ibatch")),
                        (b"oader", (b"loader", b"Loader")), (b"x", (b"x",)))


_MEM010_TEXT = next(r for r in RULES if r.code == "MEM010").trigger_pattern or b""
_PLACING = ("device=", "out=", "pin_memory=", "generator=", "**")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["zeros", "arange", "randn", "eye", "FloatTensor"]),
       st.lists(st.sampled_from(["n", "(b, t)", "*shape", "f(device=d)", "dtype=torch.long",
                                 "device=d", "device = 'cuda'", "out=buf", "pin_memory=True",
                                 "generator=g", "requires_grad=True", "**opts", "2**k",
                                 "n ** 2"]), max_size=3),
       st.sampled_from([".cuda()", ".to(device)", ".float().to(x.device)", ".type_as(x)"]))
def test_mem010_text_leaves_factories_that_place_their_result(
        factory: str, args: list[str], move: str) -> None:
    """A factory given a keyword that places its result (or ``**options``) is no finding,
    and the text pattern passes it by; any other factory moved after it is admitted, as is
    whatever the code gate passes."""
    args.sort(key=lambda a: ("=" in a.split("(")[0], a.startswith("**")))  # valid order
    code = f"y = torch.{factory}({', '.join(args)}){move}\n".encode()
    placed = any(a.replace(" ", "").startswith(_PLACING) for a in args)
    assert search(_MEM010_TEXT, code) == (not placed), code
    if "fact:factory-move" in code_facts(ast.parse(code), code):
        assert search(_MEM010_TEXT, code), code


def test_a_pattern_rules_share_is_searched_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """MEM005 and MEM016 share their pattern: a file both rules' words admit is searched for
    it once, and both rules get its answer."""
    shared = {r.code: r for r in RULES if r.code in ("MEM005", "MEM016")}
    assert shared["MEM005"].trigger_pattern == shared["MEM016"].trigger_pattern
    calls: list[bytes] = []

    def counted(pattern: bytes, data: bytes) -> bool:
        calls.append(pattern)
        return search(pattern, data)

    monkeypatch.setattr(prefilter, "search", counted)
    code = b"def evaluate(model, loader):\n    out = []\n    for x in loader:\n" \
           b"        out.append(model(x.to('cuda')))\n"
    assert {r.code for r in applicable_rules(code, shared.values())} == {"MEM005", "MEM016"}
    assert calls == [shared["MEM005"].trigger_pattern]
    assert applicable_rules(code.replace(b"evaluate", b"fit").replace(b"loader", b"data"),
                            shared.values()) == []


def test_a_word_rules_share_is_looked_for_once_per_file() -> None:
    """``backward(`` and ``step(`` are words of several training rules: a file is scanned
    for each word once, whatever the number of rules that ask, and every rule gets the
    same answer as when asked alone."""
    asked: Counter[bytes] = Counter()

    class Counted(bytes):
        def __contains__(self, word: object) -> bool:
            asked[bytes(word)] += 1  # type: ignore[arg-type]  # the prefilter asks bytes
            return super().__contains__(word)  # type: ignore[operator]

    source = b"for x, y in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"
    together = applicable_rules(Counted(source), RULES)
    assert asked[b"backward("] == 1 and asked[b"step("] == 1
    assert [r.code for r in together] == [r.code for r in RULES
                                          if applicable_rules(source, [r])]
    assert {"MEM001", "MEM004"} <= {r.code for r in together}

"""Bodies left out of the parse for function-local rules: the same findings, in the same
places, as a parse of the whole file."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from memlint.filecheck import lint_bytes, scan_bytes
from memlint.pruning import blank_ranges, blanked
from memlint.rules.index import RULES

CORPUS = Path(__file__).parent / "corpus"
LOCAL = [spec for spec in RULES if spec.function_local]


def _blank(source: str) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    data = textwrap.dedent(source).encode()
    return data, blank_ranges(ast.parse(data), data, LOCAL)


def test_mem010_is_function_local() -> None:
    assert {spec.code for spec in LOCAL} >= {"MEM010"}


def test_only_bodies_that_cannot_matter_are_blanked() -> None:
    source, ranges = _blank('''
        import torch

        def build(n):
            return torch.zeros(n).cuda()

        def log(step):
            """Nothing a rule looks at."""
            print(step)
            return step

        def lazy():
            import numpy as np
            return np.zeros(3)

        def short(x): return x
    ''')
    lines = source.decode().splitlines()
    assert [lines[first - 1].strip() for first, _ in ranges] == ['"""Nothing a rule looks at."""']
    text = blanked(source, ranges)
    after = text.decode().splitlines()
    assert len(after) == len(lines)
    first, last = ranges[0]
    assert after[first - 1] == "    ..."
    assert all(not line for line in after[first:last])
    # Every other line is byte for byte the same, so every position is.
    assert [a for n, a in enumerate(after, 1) if not first <= n <= last] == [
        b for n, b in enumerate(lines, 1) if not first <= n <= last]
    ast.parse(text)


def test_a_function_binding_a_name_kept_code_moves_to_is_kept() -> None:
    # `device = "cpu"` in pick() makes `.to(device)` a host move: MEM010 stays silent. A
    # blanked pick() would turn the move into a copy to the GPU and report it.
    source, ranges = _blank('''
        import torch

        def pick():
            device = "cpu"
            return device

        def build(n, device):
            return torch.zeros(n).to(device)
    ''')
    assert ranges == ()
    found = lint_bytes("t.py", source, LOCAL, blank=ranges)
    assert found.diagnostics == []


def test_crlf_endings_are_kept() -> None:
    source = (b"import torch\r\n\r\ndef f(step):\r\n    print(step)\r\n    return step\r\n"
              b"\r\ndef g(n):\r\n    return torch.zeros(n).cuda()\r\n")
    ranges = blank_ranges(ast.parse(source), source, LOCAL)
    assert ranges == ((4, 5),)
    assert blanked(source, ranges) == (
        b"import torch\r\n\r\ndef f(step):\r\n    ...\r\n\r\n"
        b"\r\ndef g(n):\r\n    return torch.zeros(n).cuda()\r\n")


def test_a_body_opening_with_a_decorated_function_is_blanked_from_its_decorator() -> None:
    source, ranges = _blank('''
        import torch

        def test_wrapped():
            @skip_init
            def inner():
                return 1

            assert inner() == 1

        def build(n):
            return torch.zeros(n).cuda()
    ''')
    assert ranges == ((5, 9),)
    assert blanked(source, ranges).decode().splitlines()[4] == "    ..."
    ast.parse(blanked(source, ranges))


def test_a_file_that_ends_inside_a_blanked_body_still_parses() -> None:
    source = b"import torch\n\ndef f(step):\n    print(step)\n    return step"
    ranges = blank_ranges(ast.parse(source), source, LOCAL)
    assert ranges == ((4, 5),)
    assert blanked(source, ranges) == b"import torch\n\ndef f(step):\n    ...\n"


def test_the_whole_file_judges_when_the_blanked_one_does_not_parse() -> None:
    # Ranges come from the stdlib tree, so this cannot happen unless libcst reads the blanked
    # text differently; blanking a `def` line stands in for that. No MEM999 comes of it.
    source = b"import torch\n\ndef build(n):\n    return torch.zeros(n).cuda()\n"
    whole = lint_bytes("t.py", source, LOCAL)
    broken = lint_bytes("t.py", source, LOCAL, blank=((3, 3),))
    assert [d.code for d in whole.diagnostics] == ["MEM010"]
    assert broken.diagnostics == whole.diagnostics


def _admitted() -> list[Path]:
    """Corpus files some function-local rule passes the gates of."""
    return [path for path in sorted(CORPUS.glob("*.py"))
            if scan_bytes(path.name, path.read_bytes(), LOCAL, frozenset(),
                          summary_known=True).active]


ADMITTED = _admitted()


def test_the_corpus_exercises_blanking() -> None:
    blanks = [scan_bytes(p.name, p.read_bytes(), LOCAL, frozenset(), summary_known=True).blank
              for p in ADMITTED]
    assert sum(map(bool, blanks)) >= 3


@pytest.mark.parametrize("path", ADMITTED, ids=lambda p: p.name)
def test_findings_are_those_of_the_whole_parse(path: Path) -> None:
    """Corpus files linted for the function-local rules the scan admits: the same
    diagnostics with and without the bodies the scan says may be blanked."""
    source = path.read_bytes()
    scan = scan_bytes(path.name, source, LOCAL, frozenset(), summary_known=True)
    whole = lint_bytes(path.name, source, LOCAL, active_codes=scan.active)
    pruned = lint_bytes(path.name, source, LOCAL, active_codes=scan.active, blank=scan.blank)
    assert whole.diagnostics
    assert pruned.diagnostics == whole.diagnostics

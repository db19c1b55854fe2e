"""Fuzzing: the linter never raises, and ``--fix`` output always parses and is a fixed point.

Two sources of programs:

- hypothesmith generates arbitrary valid Python (from the grammar, and from libcst nodes),
  which shakes out crashes on syntax nobody thought of;
- a torch-flavoured generator composes training-script fragments (loops, losses,
  ``.to()``, ``zero_grad``, checkpoint, AMP, ``torch.load``, suppression comments) in random
  nestings, so that rules actually fire and fixes actually run.

CI runs a few examples of each. ``tox -e fuzz`` sets ``MEMLINT_FUZZ_EXAMPLES`` and runs the
``slow`` variants with that many examples each.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Callable

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memlint.engine import lint_source
from memlint.filecheck import lint_bytes
from memlint.fixer import fix_source
from memlint.rules import all_rules

RULES = all_rules()
SLOW_EXAMPLES = int(os.environ.get("MEMLINT_FUZZ_EXAMPLES", "0"))
slow = pytest.mark.skipif(SLOW_EXAMPLES <= 0, reason="set MEMLINT_FUZZ_EXAMPLES (tox -e fuzz)")


def fuzz_settings(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=examples < 50,  # CI runs the same examples every time
        suppress_health_check=list(HealthCheck),
        database=None,
    )


def check_program(source: bytes) -> None:
    diagnostics = lint_source("fuzz.py", source, RULES)
    for d in diagnostics:
        assert d.code != "MEM997", f"internal error: {d.message}\n{source.decode(errors='replace')}"
        assert d.line >= 1 and d.column >= 1
    fixed = fix_source("fuzz.py", source, RULES, unsafe=True)
    if not fixed.changed:
        return
    cst.parse_module(fixed.fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            ast.parse(source)
        except SyntaxError:
            pass
        else:
            ast.parse(fixed.fixed)
    again = fix_source("fuzz.py", fixed.fixed, RULES, unsafe=True)
    assert again.fixed == fixed.fixed, "a second --fix changed the file"


# --------------------------------------------------------------------------- torch snippets

NAMES = st.sampled_from(["x", "y", "batch", "inputs", "out", "h", "loss", "total", "preds"])
DEVICES = st.sampled_from(['"cuda"', '"cuda:0"', "device", '"cpu"', "x.device", "torch.float16"])
SIMPLE = [
    "loss = criterion(model(x), y)",
    "loss = F.cross_entropy(model(x), y)",
    "outputs = model(**batch)",
    "loss = outputs.loss",
    "loss.backward()",
    "loss.backward(retain_graph=True)",
    "scaler.scale(loss).backward()",
    "optimizer.step()",
    "scaler.step(optimizer)",
    "scaler.update()",
    "optimizer.zero_grad()",
    "optimizer.zero_grad(set_to_none=False)",
    "losses.append(loss)",
    "losses.append(loss.item())",
    "total += loss",
    "total = total + loss.detach()",
    "self.history.append(loss)",
    "running_loss += loss.item()",
    "print(loss)",
    "print(f'{loss:.3f}')",
    "preds.extend(out.argmax(1).cpu().tolist())",
    "x = x.to(device)",
    "x, y = x.to(device), y.cuda()",
    "mask = torch.zeros(n, n).cuda()",
    "noise = torch.randn(b, d).to(device)",
    "ones = t.ones(3, dtype=torch.float32).to(device=device)",
    "h = checkpoint(block, h)",
    "h = cp.checkpoint(block, h, use_reentrant=False)",
    "h = torch.utils.checkpoint.checkpoint(\n    block,\n    h,\n)",
    "state = torch.load(path)",
    "state = torch.load(\n    path,  # where\n)",
    "state = torch.load(\n    path  # where\n)",
    "optimizer.zero_grad(\n    set_to_none=False,  # keep them\n)",
    "model.zero_grad(False)  # why",
    "mask = torch.zeros(\n    n,  # rows\n    n  # cols\n).cuda()",
    "hist[len(hist)] = loss, out",
    "state = torch.load(path, map_location='cpu')",
    "torch.cuda.empty_cache()",
    "scaler = torch.cuda.amp.GradScaler()",
    "scaler = GradScaler(init_scale=2.0 ** 10, enabled=True)",
    "out, hidden = model(x, hidden)",
    "hidden = hidden.detach()",
    "del out, loss",
    "model.eval()",
    "model.train()",
    "if torch.isnan(loss):\n    break",
    "if step % 10 == 0:\n    print(loss.item())",
    "try:\n    out = model(x)\nexcept torch.OutOfMemoryError:\n    out = model(x[:1])",
    "pass",
]
WITHS = [
    "with torch.no_grad():",
    "with torch.inference_mode():",
    "with torch.cuda.amp.autocast():",
    "with torch.cuda.amp.autocast(True, torch.bfloat16):",
    "with autocast(dtype=torch.float16):",
    "with torch.amp.autocast('cuda'):",
    "with torch.set_grad_enabled(phase == 'train'):",
]
LOOPS = [
    "for x, y in loader:",
    "for step, (x, y) in enumerate(train_loader):",
    "for batch in tqdm(val_loader):",
    "for epoch in range(epochs):",
    "while step < max_steps:",
]
DEFS = [
    "def train(model, loader, optimizer):",
    "def evaluate(model, val_loader):",
    "@torch.no_grad()\ndef predict(model, x):",
    "def forward(self, x):",
]
IMPORTS = [
    "import torch",
    "import torch as t",
    "import torch.nn.functional as F",
    "import torch.utils.checkpoint as cp",
    "from torch.utils.checkpoint import checkpoint",
    "from torch.cuda.amp import GradScaler, autocast",
    "from torch.cuda import amp",
]
COMMENTS = [
    "", "", "", "  # noqa: MEM001", "  # noqa: MEM015, MEM005", "  # memlint: ignore[MEM013]",
    "  # noqa", "  # a comment",
]


def _indent(block: str, level: int) -> list[str]:
    return ["    " * level + line for line in block.split("\n")]


@st.composite
def statements(draw: st.DrawFn, level: int, depth: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["simple", "simple", "simple", "with", "loop", "def"]))
        if kind == "simple" or depth == 0:
            text = draw(st.sampled_from(SIMPLE))
            name = draw(NAMES)
            text = text.replace("x.device", f"{name}.device")
            if text.endswith(".to(device)") and "randn" in text:
                text = text[: -len("device)")] + draw(DEVICES) + ")"
            block = _indent(text, level)
            block[0] += draw(st.sampled_from(COMMENTS))
            lines += block
            continue
        header = draw(st.sampled_from({"with": WITHS, "loop": LOOPS, "def": DEFS}[kind]))
        lines += _indent(header, level)
        lines += draw(statements(level + 1, depth - 1))
    return lines


@st.composite
def torch_programs(draw: st.DrawFn) -> bytes:
    imports = draw(st.lists(st.sampled_from(IMPORTS), min_size=0, max_size=5, unique=True))
    body = draw(statements(0, 3))
    text = "\n".join([*imports, "", *body]) + "\n"
    if draw(st.booleans()):
        text = "# memlint: noqa: MEM002\n" + text
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return text.replace("\n", newline).encode()


@st.composite
def mutated_programs(draw: st.DrawFn) -> bytes:
    """A torch program with what real files have and generated ones lack: comments at line
    ends, blank lines, trailing spaces, form feeds before an indentation, and any of the
    three line endings (a CR-only file included)."""
    lines = draw(torch_programs()).decode().replace("\r\n", "\n").split("\n")
    out: list[str] = []
    for line in lines:
        kind = draw(st.sampled_from(["keep"] * 6 + ["comment", "blank", "trailing", "ff"]))
        if kind == "comment" and line.strip() and not line.rstrip().endswith("\\"):
            line += "  # note, " + draw(st.sampled_from(["x", "MEM001", "é", "(", "'"]))
        elif kind == "blank":
            out.append("")
        elif kind == "trailing" and line.strip():
            line += " \t "
        elif kind == "ff":
            line = "\x0c" + line
        out.append(line)
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return newline.join(out).encode()


def _standing(source: bytes) -> list[tuple[str, int]]:
    """What a lint run reports (noqa comments applied), one entry per finding."""
    return [(d.code, d.line) for d in lint_bytes("fuzz.py", source, RULES).diagnostics]


def _compiles(source: bytes) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            ast.parse(source)
        except SyntaxError:
            return False
    return True


def _line_of(text: str, offset: int) -> int:
    return len(re.findall(r"\r\n|\r|\n", text[:offset])) + 1


def check_lint_fix_lint(source: bytes) -> None:
    """lint -> fix -> lint: the fixed file parses (and compiles when the original did), bytes
    outside the fixed spans are unchanged (each pass's edits, applied to its input, give its
    output, and lie in a statement a fixable finding stood in), a second fix changes
    nothing, and the number of findings drops by exactly the number of fixes applied."""
    before = lint_bytes("fuzz.py", source, RULES).diagnostics
    fixed = fix_source("fuzz.py", source, RULES, unsafe=True)
    if not fixed.changed:
        assert fixed.applied == 0
        return
    cst.parse_module(fixed.fixed)
    if _compiles(source):
        assert _compiles(fixed.fixed), fixed.fixed.decode(errors="replace")
    current = source
    for edits in fixed.passes:
        text = current.decode(fixed.encoding)
        fixable: set[int] = set()
        for d in lint_bytes("fuzz.py", current, RULES).diagnostics:
            if d.fix is not None:
                fixable.update(range(min(d.line, d.statement_line or d.line), d.end_line + 1))
        pieces, cursor = [], 0
        for start, end, new in edits:
            assert cursor <= start <= end
            body = text[start:end].rstrip("\r\n")  # a removed line ends on its newline
            first, last = _line_of(text, start), _line_of(text, start + len(body))
            assert set(range(first, last + 1)) <= fixable, (first, last, sorted(fixable))
            pieces += [text[cursor:start], new]
            cursor = end
        current = ("".join(pieces) + text[cursor:]).encode(fixed.encoding)
    assert current == fixed.fixed, "a byte outside the fixed spans changed"
    again = fix_source("fuzz.py", fixed.fixed, RULES, unsafe=True)
    assert again.fixed == fixed.fixed, "a second --fix changed the file"
    after = _standing(fixed.fixed)
    assert len(before) - len(after) == fixed.applied, (
        [(d.code, d.line) for d in before], after, fixed.applied)


# --------------------------------------------------------------------------- tests

def _valid(source: str) -> bytes:
    try:
        return source.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not a file anyone can save
        assume(False)
        raise


@fuzz_settings(15)
@given(hypothesmith.from_grammar())
def test_grammar_programs(source: str) -> None:
    check_program(_valid(source))


@fuzz_settings(150)
@given(torch_programs())
def test_torch_programs(source: bytes) -> None:
    check_program(source)


@slow
@pytest.mark.slow
@fuzz_settings(max(SLOW_EXAMPLES, 1))
@given(hypothesmith.from_grammar())
def test_grammar_programs_many(source: str) -> None:
    check_program(_valid(source))


@slow
@pytest.mark.slow
@fuzz_settings(max(SLOW_EXAMPLES // 10, 1))
@given(hypothesmith.from_node())
def test_node_programs_many(source: str) -> None:
    check_program(_valid(source))


@slow
@pytest.mark.slow
@fuzz_settings(max(SLOW_EXAMPLES, 1))
@given(torch_programs())
def test_torch_programs_many(source: bytes) -> None:
    check_program(source)


@fuzz_settings(40)
@given(mutated_programs())
def test_lint_fix_lint(source: bytes) -> None:
    check_lint_fix_lint(source)


@slow
@pytest.mark.slow
@fuzz_settings(max(SLOW_EXAMPLES, 1))
@given(mutated_programs())
def test_lint_fix_lint_many(source: bytes) -> None:
    check_lint_fix_lint(source)

"""The fixer: every rule's expected fixes, idempotence, and how files on disk are rewritten."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from memlint.cli import main
from memlint.diagnostics import FixSafety
from memlint.engine import lint_source
from memlint.filecheck import lint_bytes
from memlint.fixer import (
    FileChangedError,
    fix_file,
    fix_source,
    unified_diff,
    write_if_unchanged,
)
from memlint.rules import all_rules
from memlint.rules.base import Fix, Invalid, Rule
from memlint.rules.mem014_load_without_map_location import LoadWithoutMapLocation
from memlint.rules.mem015_deprecated_amp_api import DeprecatedAmpApi
from memlint.rules.mem998_unused_noqa import UnusedNoqa, rewrite_comment

INVALID = [
    pytest.param(rule, case, id=f"{rule.code}-invalid-{i}")
    for rule in all_rules()
    for i, case in enumerate(rule.invalid)
]


@pytest.mark.parametrize(("rule", "case"), INVALID)
def test_invalid_example_fix_matches_expectation(rule: type[Rule], case: Invalid) -> None:
    source = textwrap.dedent(case.source).encode()
    result = fix_source("example.py", source, [rule], unsafe=True)
    if case.fixed is None:
        assert not result.changed, unified_diff(result)
        return
    assert result.fixed.decode() == textwrap.dedent(case.fixed), unified_diff(result)
    again = fix_source("example.py", result.fixed, [rule], unsafe=True)
    assert not again.changed, "a second --fix must change nothing"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_fix_safety_matches_what_the_rule_declares(rule: type[Rule]) -> None:
    """No declared fix: none offered. Declared unsafe: nothing offered as safe."""
    offered: set[FixSafety] = set()
    for case in rule.invalid:
        diags = lint_source("example.py", textwrap.dedent(case.source).encode(), [rule])
        offered |= {d.fix for d in diags if d.fix is not None}
    if rule.fix_safety is None:
        assert offered == set()
    else:
        assert offered, f"{rule.code} declares a fix but no invalid example offers one"
        if rule.fix_safety is FixSafety.UNSAFE:
            assert offered == {FixSafety.UNSAFE}


AMP = b"import torch\nscaler = torch.cuda.amp.GradScaler()  # keep me\n"
LOAD = b"import torch\nstate = torch.load(path)\n"


def test_safe_fixes_apply_by_default_and_unsafe_only_when_asked() -> None:
    source = AMP + b"state = torch.load(path)\n"
    rules = [DeprecatedAmpApi, LoadWithoutMapLocation]
    safe = fix_source("t.py", source, rules)
    assert b'torch.amp.GradScaler("cuda")  # keep me' in safe.fixed
    assert b"torch.load(path)\n" in safe.fixed
    assert [d.code for d in safe.remaining] == ["MEM014"]
    assert safe.remaining[0].fix is FixSafety.UNSAFE

    unsafe = fix_source("t.py", source, rules, unsafe=True)
    assert b'torch.load(path, map_location="cpu")' in unsafe.fixed
    assert unsafe.remaining == []
    assert unsafe.applied == 2


def test_crlf_line_endings_are_kept() -> None:
    source = AMP.replace(b"\n", b"\r\n") + b"x = 1\r\n"
    result = fix_source("t.py", source, [DeprecatedAmpApi])
    assert result.fixed == (
        b'import torch\r\nscaler = torch.amp.GradScaler("cuda")  # keep me\r\nx = 1\r\n'
    )


def test_latin1_file_with_coding_cookie_stays_latin1() -> None:
    text = (
        "# -*- coding: latin-1 -*-\nimport torch\nname = 'déjà vu'\n"
        "s = torch.cuda.amp.GradScaler()\n"
    )
    result = fix_source("t.py", text.encode("latin-1"), [DeprecatedAmpApi])
    assert result.fixed == text.replace(
        "torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'
    ).encode("latin-1")


def test_file_without_fixable_findings_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "clean.py"
    path.write_bytes(b"import torch\nx = torch.zeros(3)\n")
    before = path.stat().st_mtime_ns
    result = fix_file(path, all_rules())
    assert not result.changed
    assert path.stat().st_mtime_ns == before


def test_fix_file_writes_atomically_and_keeps_permissions(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(AMP)
    os.chmod(path, 0o754)
    result = fix_file(path, [DeprecatedAmpApi])
    assert result.changed and result.remaining == []
    assert path.read_bytes() == result.fixed
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"], "temp file left behind"


def test_fix_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(AMP)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    fix_file(link, [DeprecatedAmpApi])
    assert link.is_symlink()
    assert b"torch.amp.GradScaler" in real.read_bytes()


def test_file_changed_since_read_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(AMP)
    stale = path.read_bytes()
    path.write_bytes(AMP + b"# edited meanwhile\n")
    with pytest.raises(FileChangedError):
        fix_file(path, [DeprecatedAmpApi], source=stale)
    assert path.read_bytes() == AMP + b"# edited meanwhile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_write_if_unchanged_refuses_a_different_original(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\n")
    with pytest.raises(FileChangedError):
        write_if_unchanged(path, b"x = 0\n", b"x = 2\n")
    assert path.read_bytes() == b"x = 1\n"


def test_diff_mode_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(AMP)
    result = fix_file(path, [DeprecatedAmpApi], write=False)
    assert path.read_bytes() == AMP
    diff = unified_diff(result).decode()
    assert diff.startswith(f"--- a/{path}\n+++ b/{path}\n")
    assert '-scaler = torch.cuda.amp.GradScaler()  # keep me' in diff
    assert '+scaler = torch.amp.GradScaler("cuda")  # keep me' in diff


def test_unparsable_file_is_reported_and_not_fixed() -> None:
    source = b"import torch\nscaler = torch.cuda.amp.GradScaler(\n"
    result = fix_source("t.py", source, [DeprecatedAmpApi])
    assert not result.changed
    assert [d.code for d in result.remaining] == ["MEM999"]


def test_suppressed_findings_are_not_fixed() -> None:
    source = b"import torch\nscaler = torch.cuda.amp.GradScaler()  # noqa: MEM015\n"
    result = fix_source("t.py", source, [DeprecatedAmpApi])
    assert not result.changed
    assert result.remaining == []


def test_unused_codes_are_removed_and_used_ones_kept() -> None:
    source = (
        b"import torch\n"
        b"scaler = torch.cuda.amp.GradScaler()  # noqa: MEM015, MEM014  # legacy API on purpose\n"
        b"x = 1  # noqa: MEM001\n"
        b"y = 2  # noqa\n"
        b"z = 3  # noqa: E501\n"
    )
    rules = [DeprecatedAmpApi, LoadWithoutMapLocation, UnusedNoqa]
    before = fix_source("t.py", source, rules, unsafe=False)
    assert before.fixed == (
        b"import torch\n"
        b"scaler = torch.cuda.amp.GradScaler()  # noqa: MEM015  # legacy API on purpose\n"
        b"x = 1\n"
        b"y = 2  # noqa\n"
        b"z = 3  # noqa: E501\n"
    )
    assert before.remaining == []
    again = fix_source("t.py", before.fixed, rules)
    assert not again.changed


@pytest.mark.parametrize(
    ("comment", "unused", "expected"),
    [
        ("# noqa: MEM001", {"MEM001"}, None),
        ("# noqa: MEM001, MEM002", {"MEM002"}, "# noqa: MEM001"),
        ("# noqa:MEM001,E501", {"MEM001"}, "# noqa:E501"),
        ("# memlint: ignore[MEM001, MEM013]", {"MEM013"}, "# memlint: ignore[MEM001]"),
        ("# memlint: ignore[MEM013]  # flaky", {"MEM013"}, "# flaky"),
        ("# why: legacy  # noqa: MEM001", {"MEM001"}, "# why: legacy"),
        ("# memlint: noqa: MEM002", {"MEM002"}, None),
    ],
)
def test_rewrite_comment(comment: str, unused: set[str], expected: str | None) -> None:
    assert rewrite_comment(comment, frozenset(unused)) == expected


def test_lint_run_reports_only_the_unused_codes() -> None:
    source = (
        b"import torch\n"
        b"s = torch.cuda.amp.GradScaler()  # noqa: MEM015, MEM012\n"
        b"t = 1  # memlint: ignore[MEM001]\n"
        b"u = 2  # noqa\n"
    )
    result = lint_bytes("t.py", source, [DeprecatedAmpApi, UnusedNoqa])
    assert [(d.line, d.code, d.message, d.fix) for d in result.diagnostics] == [
        (2, "MEM998", "unused suppression for MEM012", FixSafety.SAFE),
        (3, "MEM998", "unused suppression for MEM001", FixSafety.SAFE),
    ]


def _cli(tmp_path: Path, *args: str) -> int:
    return main(["--isolated", "--no-cache", "--select", "MEM014,MEM015", *args, str(tmp_path)])


def test_cli_diff_prints_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(AMP + LOAD.split(b"\n", 1)[1])
    assert _cli(tmp_path, "--diff") == 1
    out = capsys.readouterr().out
    assert '+scaler = torch.amp.GradScaler("cuda")  # keep me' in out
    assert "map_location" not in out, "unsafe fixes need --unsafe-fixes"
    assert path.read_bytes() == AMP + b"state = torch.load(path)\n"


def test_cli_fix_exit_status_follows_what_remains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(AMP + b"state = torch.load(path)\n")
    assert _cli(tmp_path, "--fix") == 1  # the unsafe MEM014 fix was not applied
    out = capsys.readouterr().out
    assert "MEM014" in out and "MEM015" not in out
    assert b'torch.amp.GradScaler("cuda")' in path.read_bytes()

    assert _cli(tmp_path, "--fix", "--unsafe-fixes") == 0
    assert path.read_bytes().endswith(b'torch.load(path, map_location="cpu")\n')
    fixed = path.read_bytes()
    assert _cli(tmp_path, "--fix", "--unsafe-fixes") == 0
    assert path.read_bytes() == fixed


def test_cli_diff_on_clean_tree_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ok.py").write_bytes(b"import torch\nx = torch.load(p, map_location='cpu')\n")
    assert _cli(tmp_path, "--diff") == 0
    assert capsys.readouterr().out == ""


class _BreaksCode(Rule):
    """A deliberately broken fix: turns an assignment target into a call."""

    code = "MEM900"
    name = "breaks-code"
    message = "rename"
    fix_safety = FixSafety.SAFE

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "target":
            broken = cst.Call(func=cst.Name("f"))
            self.report(node, fix=Fix(FixSafety.SAFE, {node: broken}))


def test_fix_that_breaks_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"target = 1\n")
    result = fix_file(path, [_BreaksCode])
    assert not result.changed
    assert [(d.code, d.fix_problem) for d in result.failed] == [
        ("MEM900", "the fixed code would not parse")]
    assert path.read_bytes() == b"target = 1\n"
    assert [(d.code, d.fix_problem) for d in result.remaining] == [
        ("MEM900", "the fixed code would not parse")]


# -- what --fix keeps of the user's file --------------------------------------------------

def _fixable(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n", encoding="utf-8")
    return path


def _fix(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from memlint.cli import main

    capsys.readouterr()
    main(["--no-cache", "--isolated", "--fix", str(path)])
    return capsys.readouterr().err


def test_fix_leaves_a_read_only_file_alone(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _fixable(tmp_path)
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        err = _fix(path, capsys)
        assert path.read_bytes() == before
        assert "not writable" in err
    finally:
        path.chmod(0o644)


def test_fix_keeps_hard_links(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _fixable(tmp_path)
    other = tmp_path / "linked.py"
    os.link(path, other)
    inode = path.stat().st_ino
    _fix(path, capsys)
    assert b"torch.amp.GradScaler" in path.read_bytes()
    assert other.read_bytes() == path.read_bytes()
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="changing a file's owner needs root")
def test_fix_keeps_the_owner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _fixable(tmp_path)
    os.chown(path, 4321, 4321)
    _fix(path, capsys)
    assert b"torch.amp.GradScaler" in path.read_bytes()
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321)


# -- fixes keep every comment, and leave no dangling comma or blank line ------------------

ZERO_GRAD = "import torch\ndef f(opt, loader, model):\n    for x in loader:\n{call}\n"


@pytest.mark.parametrize(("call", "fixed"), [
    ("        opt.zero_grad(\n            set_to_none=False,  # keep grads allocated\n        )",
     "        opt.zero_grad(\n            # keep grads allocated\n        )"),
    ("        opt.zero_grad(set_to_none=False  # why\n        )",
     "        opt.zero_grad(  # why\n        )"),
    ("        opt.zero_grad(\n            # reason\n            set_to_none=False\n        )",
     "        opt.zero_grad(\n            # reason\n        )"),
    ("        opt.zero_grad(\n            set_to_none=False,\n        )",
     "        opt.zero_grad()"),
])
def test_mem009_fix_keeps_comments(call: str, fixed: str) -> None:
    result = fix_source("t.py", ZERO_GRAD.format(call=call).encode(), all_rules(), unsafe=True)
    assert result.fixed.decode() == ZERO_GRAD.format(call=fixed)


@pytest.mark.parametrize(("source", "fixed"), [
    ("state = torch.load(\n    path  # the checkpoint\n)\n",
     'state = torch.load(\n    path,  # the checkpoint\n    map_location="cpu"\n)\n'),
    ("state = torch.load(\n    path,  # the checkpoint\n)\n",
     'state = torch.load(\n    path,  # the checkpoint\n    map_location="cpu",\n)\n'),
    ("mask = torch.zeros(\n    n,  # rows\n    n  # cols\n).cuda()\n",
     'mask = torch.zeros(\n    n,  # rows\n    n,  # cols\n    device="cuda"\n)\n'),
    ("mask = torch.zeros(\n    n,\n    n,  # cols\n).cuda()\n",
     'mask = torch.zeros(\n    n,\n    n,  # cols\n    device="cuda",\n)\n'),
])
def test_appended_arguments_keep_comments_with_their_argument(source: str, fixed: str) -> None:
    result = fix_source("t.py", ("import torch\n" + source).encode(), all_rules(), unsafe=True)
    assert result.fixed.decode() == "import torch\n" + fixed


# -- fixes are edits of the file's own text ----------------------------------------------

@pytest.mark.parametrize(("source", "fixed"), [
    # A form feed in one line's indentation stays on that line, and nowhere else.
    (b"import torch\ndef f():\n    a = 1\n\x0c    state = torch.load(p)\n    b = 2\n",
     b'import torch\ndef f():\n    a = 1\n\x0c    state = torch.load(p, map_location="cpu")\n'
     b"    b = 2\n"),
    (b"import torch\ndef f():\n\x0c    a = torch.load(p)\n    b = torch.load(\n        q)\n",
     b'import torch\ndef f():\n\x0c    a = torch.load(p, map_location="cpu")\n'
     b'    b = torch.load(\n        q,\n        map_location="cpu")\n'),
    # A file with old-Mac line endings keeps its final CR.
    (b"import torch\rstate = torch.load(p)\rx = 1\r",
     b'import torch\rstate = torch.load(p, map_location="cpu")\rx = 1\r'),
    # A UTF-8 byte order mark stays.
    (b"\xef\xbb\xbfimport torch\nstate = torch.load(p)\n",
     b'\xef\xbb\xbfimport torch\nstate = torch.load(p, map_location="cpu")\n'),
])
def test_bytes_outside_the_fixed_code_never_change(source: bytes, fixed: bytes) -> None:
    result = fix_source("t.py", source, all_rules(), unsafe=True)
    assert result.fixed == fixed


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 accepts nested quotes")
def test_a_fix_that_would_not_compile_costs_no_other_fix() -> None:
    source = (b'import torch\nprint(f"{torch.zeros(3).cuda()}")\n'
              b"state = torch.load(p)\n")
    result = fix_source("t.py", source, all_rules(), unsafe=True)
    assert result.fixed == (b'import torch\nprint(f"{torch.zeros(3).cuda()}")\n'
                            b'state = torch.load(p, map_location="cpu")\n')
    assert [(d.code, d.line, d.fix_problem) for d in result.failed] == [
        ("MEM010", 2, "the fixed code would not compile under Python "
                      f"{sys.version_info.major}.{sys.version_info.minor}")]


def test_cli_marks_a_fix_that_could_not_be_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"target = 1\n")
    capsys.readouterr()
    assert main(["--isolated", "--no-cache", "--fix", "--output-format", "json", str(path)],
                rules=[_BreaksCode]) == 1
    captured = capsys.readouterr()
    [finding] = json.loads(captured.out)
    assert finding["fix"] == {"applicability": "safe", "applied": False,
                              "problem": "the fixed code would not parse"}
    assert main(["--isolated", "--no-cache", "--fix", str(path)], rules=[_BreaksCode]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(
        "MEM900 rename (fix not applied: the fixed code would not parse)")


def test_diff_of_a_latin1_file_is_in_latin1(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[bytes]) -> None:
    """As git prints it: the diff carries the file's own bytes, so `patch` applies it."""
    path = tmp_path / "train.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nimport torch\nname = 'déjà'  # é\n"
                     "state = torch.load(p)  # café\n".encode("latin-1"))
    result = fix_file(path, [LoadWithoutMapLocation], unsafe=True, write=False)
    diff = unified_diff(result)
    assert "-state = torch.load(p)  # café\n".encode("latin-1") in diff
    assert '+state = torch.load(p, map_location="cpu")  # café\n'.encode("latin-1") in diff
    assert "é".encode() not in diff


def test_one_finding_is_one_fix() -> None:
    """`hist[len(hist)] = loss, out` keeps two graphs in one store: one finding, whose one
    fix detaches both (the report and the fix agree)."""
    from memlint.rules.mem001_loss_kept_with_graph import LossKeptWithGraph

    source = (b"import torch\nhist = []\nfor x, y in loader:\n    out = model(x)\n"
              b"    loss = criterion(out, y)\n    loss.backward()\n"
              b"    hist[len(hist)] = loss, out\n")
    found = lint_source("t.py", source, [LossKeptWithGraph])
    assert [(d.code, d.message.split(" still")[0]) for d in found] == [
        ("MEM001", "`loss`, `out`")]
    result = fix_source("t.py", source, [LossKeptWithGraph], unsafe=True)
    assert result.applied == len(found) == 1
    assert result.fixed.endswith(b"    hist[len(hist)] = loss.detach(), out.detach()\n")


@pytest.mark.parametrize(("source", "index", "expected"), [
    ("f(a, b, c)", 1, "f(a, c)"),
    ("f(a, b)", 1, "f(a)"),
    ("f(a, b,)", 1, "f(a,)"),
    ("f(a, b)", 0, "f(b)"),
    ("f( a )", 0, "f()"),
    ("f(\n    a,\n    b,  # bee\n)", 1, "f(\n    a,\n    # bee\n)"),
    ("f(\n    a,  # ay\n    b\n)", 1, "f(\n    a  # ay\n)"),
    ("f(a,  # ay\n  b,\n  c)", 1, "f(a,  # ay\n  c)"),
])
def test_remove_arg_keeps_comments_and_valid_commas(source: str, index: int,
                                                    expected: str) -> None:
    from memlint.edits import remove_arg

    module = cst.parse_module(source + "\n")
    statement = module.body[0]
    assert isinstance(statement, cst.SimpleStatementLine)
    expr = statement.body[0]
    assert isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)
    call = expr.value
    assert module.code_for_node(remove_arg(call, call.args[index])) == expected


def test_the_main_process_never_parses_while_fixing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixes are computed in the workers: code nested deeply enough to crash the parser
    costs that file's worker, never the main process (and the other files' fixes)."""
    parent = os.getpid()
    real = cst.parse_module

    def workers_only(*args: object, **kwargs: object) -> cst.Module:
        if os.getpid() == parent:
            raise RuntimeError("the main process parsed a file")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cst, "parse_module", workers_only)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_bytes(AMP)
    assert main(["--isolated", "--no-cache", "-j", "2", "--fix", str(tmp_path)]) == 0
    assert "internal error" not in capsys.readouterr().err
    for name in ("a.py", "b.py"):
        assert b'torch.amp.GradScaler("cuda")' in (tmp_path / name).read_bytes()

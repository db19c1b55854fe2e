"""The code gates (memlint.gates) and the fast stdlib walk under them.

A gate drops a rule before libcst parses a file, so a gate narrower than its rule loses
findings silently. Every gate is checked here against every place its rule is known to
report: the rule's own invalid examples, the labelled corpus and the corpus projects.
"""

from __future__ import annotations

import ast
import json
import shutil
import textwrap
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memlint.astwalk import walk
from memlint.cli import main
from memlint.engine import lint_source
from memlint.filecheck import FileResult, Task, scan_bytes
from memlint.gates import code_facts, gated
from memlint.pool import Pool
from memlint.rules import all_rules
from memlint.rules.index import RULES
from memlint.rules.spec import RuleSpec
from memlint.runner import _BATCH_RULES, _EVALUATION_RULES
from tests.memlint.test_corpus import CORPUS, EXPECT

GATED = [rule for rule in all_rules() if rule.code_gate]
SOURCES = sorted(CORPUS.rglob("*.py"))


def _passes(code: str, source: str) -> bool:
    spec = next(s for s in RULES if s.code == code)
    return bool(gated([spec], code_facts(ast.parse(source))))


def test_the_training_and_except_rules_are_gated() -> None:
    assert {r.code for r in GATED} >= {"MEM001", "MEM004", "MEM005", "MEM006", "MEM007",
                                       "MEM008", "MEM009", "MEM011", "MEM012", "MEM013",
                                       "MEM014", "MEM016"}
    for spec in RULES:  # the generated index carries the classes' gates
        assert spec.code_gate == spec.load().code_gate


@pytest.mark.parametrize("rule", GATED, ids=lambda r: r.code)
def test_gate_admits_every_invalid_example(rule: type) -> None:
    for case in rule.invalid:  # type: ignore[attr-defined]
        assert _passes(rule.code, textwrap.dedent(case.source)), case.source  # type: ignore[attr-defined]


def test_gate_admits_every_labelled_corpus_finding() -> None:
    """Inference code that only the rest of a project reveals (a function its callers run
    after ``.eval()``) gets MEM002 from the project model whatever its gate says, and a
    per-batch hook that a base class in another module feeds gets MEM003: those findings are
    checked end to end (tests/memlint/test_corpus.py, tests/memlint/test_project_corpus.py,
    and the test below)."""
    checked = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        codes = {c.strip() for m in EXPECT.finditer(text) for c in m.group(1).split(",")}
        for rule in GATED:
            if (rule.code in _EVALUATION_RULES | _BATCH_RULES
                    and "projects" in path.relative_to(CORPUS).parts):
                continue
            if rule.code in codes:
                assert _passes(rule.code, text), (path, rule.code)
                checked += 1
    assert checked >= 20  # the corpus really exercises the gates


def test_words_in_docstrings_and_comments_do_not_pass_a_gate() -> None:
    source = textwrap.dedent('''
        """Train with `loss.backward()` then `optimizer.step()`; on OutOfMemory retry."""

        def forward(x):  # the caller runs loss.backward()
            return x * 2
    ''').encode()
    result = scan_bytes("lib.py", source, RULES, frozenset(), summary_known=False)
    assert result.active == ()  # admitted by the text, dropped by the gates: nothing to lint
    # ... and summarised as a file no rule applies to: only when the project model asks
    assert result.diagnostics == [] and result.summary is None
    code = source.replace(b"return x * 2", b"x.sum().backward()\n    return x")
    active = scan_bytes("lib.py", code, RULES, frozenset(), summary_known=False).active
    assert active is not None and "MEM001" in active and "MEM006" not in active


def test_a_file_that_does_not_parse_keeps_its_rules_and_its_error() -> None:
    source = b'"""loss.backward()"""\ndef f(:\n    pass\n'
    result = scan_bytes("bad.py", source, RULES, frozenset(), summary_known=False)
    assert result.active is not None and "MEM001" in result.active  # libcst has the last word


def test_gate_tokens_are_calls_and_node_types() -> None:
    facts = code_facts(ast.parse("f(x).backward()\nstep()\ntry:\n    pass\nexcept E:\n    pass\n"))
    assert {"call:backward", "call:step", "call:f", "node:Try"} <= facts
    spec = RuleSpec("X001", "x", "m", "X", True, None, (), code_gate=("call:zero_grad",))
    assert gated([spec], facts) == []
    assert gated([spec], facts | {"call:zero_grad"}) == [spec]


@pytest.mark.parametrize("path", SOURCES[:40], ids=lambda p: p.name)
def test_fast_walk_visits_what_ast_walk_does(path: Path) -> None:
    tree = ast.parse(path.read_bytes())
    slow = Counter(id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context))
    assert Counter(id(n) for n in walk(tree)) == slow


def test_fast_walk_prunes_nested_scopes() -> None:
    tree = ast.parse("a(1)\ndef f():\n    b(2)\nc = lambda: d(3)\n")
    names = {n.func.id for n in walk(tree, frozenset({ast.FunctionDef, ast.Lambda}))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert names == {"a"}


@pytest.mark.parametrize("path", SOURCES[:10], ids=lambda p: p.name)
def test_fast_walk_of_some_kinds_keeps_their_order(path: Path) -> None:
    tree = ast.parse(path.read_bytes())
    kinds = frozenset({ast.Call, ast.Lambda})
    stop = frozenset({ast.Lambda})
    every = [n for n in walk(tree, stop) if type(n) in kinds]
    assert every and list(walk(tree, stop, kinds)) == every


def _findings(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
              *args: str) -> set[tuple[str, int, str]]:
    monkeypatch.chdir(root)
    capsys.readouterr()
    assert main([*args, "--isolated", "--select", "ALL", "--output-format", "json", "."]) in (0, 1)
    return {(Path(d["path"]).as_posix(), d["line"], d["code"])
            for d in json.loads(capsys.readouterr().out)}


def test_gated_out_file_still_gets_the_rules_the_project_adds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """viz.py's MEM002 comes from the project (the training loop calls it as a side job).
    With `loss.backward()` in its docstring the text admits MEM001, the gate drops it, and
    the file must still be linted for the rule the project model adds, cold and warm."""
    root = tmp_path / "vision_app"
    shutil.copytree(CORPUS / "projects" / "vision_app", root)
    before = _findings(root, monkeypatch, capsys, "--no-cache")
    viz = root / "vision" / "viz.py"
    viz.write_text(viz.read_text(encoding="utf-8").replace(
        "training loop every", "training loop (after `loss.backward()`) every"), encoding="utf-8")
    scanned = scan_bytes("viz.py", viz.read_bytes(), RULES, frozenset(), summary_known=False)
    assert scanned.active == ()
    assert ("vision/viz.py", 9, "MEM002") in before
    assert _findings(root, monkeypatch, capsys, "--no-cache") == before
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert _findings(root, monkeypatch, capsys, *cache) == before
    assert _findings(root, monkeypatch, capsys, *cache) == before  # from the cache


def test_mem003_runs_where_the_code_or_a_helper_elsewhere_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A loader loop in a file that copies nothing itself: MEM003 can only report at the
    call of a copy helper the project model finds in another module. With one, the file is
    linted for it and the helper call reported; without, the lint leaves MEM003 out, cold and
    warm, and the cache still lists it among the file's rules (asked again when the project
    changes)."""
    root = tmp_path / "proj"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "helpers.py").write_text(
        "def to_device(batch, device):\n    return batch.to(device)\n")
    (root / "app" / "loop.py").write_text(textwrap.dedent("""
        from app.helpers import to_device

        def fit(model, opt, loader, device):
            for batch in loader:
                loss = model(to_device(batch, device))
                loss.backward()
                opt.step()
                opt.zero_grad()
        """))
    (root / "app" / "plain.py").write_text(textwrap.dedent("""
        def fit(model, opt, loader):
            for batch in loader:
                assert type(batch) is list  # `type(x)` is no copy, `x.type(t)` may be
                loss = model(batch)
                loss.backward()
                opt.step()
                opt.zero_grad()
        """))
    for name, copies in (("helpers.py", True), ("loop.py", False), ("plain.py", False)):
        scanned = scan_bytes(name, (root / "app" / name).read_bytes(), RULES, frozenset(),
                             summary_known=False)
        assert scanned.copies is (copies if scanned.active else None), name
    linted: dict[str, tuple[str, ...]] = {}
    run = Pool.run

    def spy(self: Pool, tasks: Sequence[Task], *args: Any, **kwargs: Any) -> Iterator[FileResult]:
        linted.update((Path(t.display).name, t.active or ()) for t in tasks if t.phase == "lint")
        return run(self, tasks, *args, **kwargs)

    monkeypatch.setattr(Pool, "run", spy)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    found = _findings(root, monkeypatch, capsys, *cache)
    assert ("app/loop.py", 6, "MEM003") in found  # the helper call, copying each batch
    assert "MEM003" in linted["loop.py"] and "MEM003" not in linted["plain.py"]
    assert "MEM001" in linted["plain.py"]
    assert _findings(root, monkeypatch, capsys, *cache) == found  # from the cache
    # The helper stops copying: loop.py's call copies nothing any more. The cached run lints
    # the file again for its rules (its view changed) and finds nothing; a cold run leaves
    # MEM003 out of loop.py's lint too.
    (root / "app" / "helpers.py").write_text(
        "def to_device(batch, device):\n    return batch\n")
    assert ("app/loop.py", 6, "MEM003") not in _findings(root, monkeypatch, capsys, *cache)
    linted.clear()
    assert ("app/loop.py", 6, "MEM003") not in _findings(root, monkeypatch, capsys,
                                                          "--no-cache")
    assert "MEM003" not in linted["loop.py"] and "MEM001" in linted["loop.py"]


def _facts(source: str) -> set[str]:
    return {t for t in code_facts(ast.parse(textwrap.dedent(source))) if t.startswith("fact:")}


def test_a_loader_name_counts_in_code_only() -> None:
    assert "fact:loader-name" not in _facts('''
        """Iterate a DataLoader (`for x in train_loader`)."""
        def downloader(url):  # see the loader docs
            return fetch(url, "dataloader")
    ''')
    for code in ("for x in train_loader: pass", "from torch.utils.data import DataLoader",
                 "def fit(model, dl): pass", "self.val_loader = build()", "f(loader=x)"):
        assert "fact:loader-name" in _facts(code), code


def test_an_evaluation_collection_needs_a_loop_in_evaluation_code() -> None:
    in_loop = """
        def {name}(model, batches):
            {switch}
            outs = []
            for x in batches:
                outs.append(model(x))
            return outs
    """
    assert "fact:eval-collection" in _facts(in_loop.format(name="predict_all", switch=""))
    assert "fact:eval-collection" in _facts(in_loop.format(name="run", switch="model.eval()"))
    plain = _facts(in_loop.format(name="forward", switch=""))
    assert "fact:eval-collection" not in plain and "fact:loader-collection" not in plain
    # Not in a loop, or the switch in another function: nothing to collect per batch.
    assert "fact:eval-collection" not in _facts("""
        def evaluate(model, x):
            outs = []
            outs.append(model(x))
        def other(model):
            model.eval()
        def run(model, xs):
            for x in xs:
                outs.append(model(x))
    """)
    # Beside a loader name any loop's collection (or a comprehension) may be one.
    assert "fact:loader-collection" in _facts("""
        def run(model, loader):
            return [model(x) for x in loader]
    """)


def test_a_graph_needs_a_module_or_a_loss_somewhere_in_the_code() -> None:
    """MEM005 keeps what carries a graph, and the graph analysis starts every graph at a
    module or loss call, a loss output or entry, a backward pass, or an instance of a
    module class: a tokenizer's `encode_batch` collects per item and has none of them."""
    tokenizer = """
        def encode_batch(texts):
            ids = []
            for text in texts:
                ids.append(tokenize(text))
            return ids
    """
    assert "fact:eval-collection" in _facts(tokenizer)
    assert "fact:graph-source" not in _facts(tokenizer)
    assert not _passes("MEM005", textwrap.dedent(tokenizer))
    for source in ("y = self.text_encoder(x)", "y = m.forward(x)", "y = criterion(p, t)",
                   "y = F.cross_entropy(p, t)", "y = out.loss", "y = out['val_loss']",
                   "loss.backward()", "class Head(nn.Module):\n    pass"):
        facts = _facts(tokenizer + "\n" + textwrap.indent(source, " " * 8))
        assert "fact:graph-source" in facts, source
        assert _passes("MEM005", textwrap.dedent(tokenizer + "\n" + textwrap.indent(
            source, " " * 8))), source
    # Helpers that build or fetch a model run none (`get_model()`), nor do classes.
    for source in ("m = get_model()", "m = MyModel()", "m = prepare_model(m)"):
        assert "fact:graph-source" not in _facts(tokenizer + "\n" + textwrap.indent(
            source, " " * 8)), source


def test_evaluation_without_a_forward_call_is_not_parsed_for_mem002() -> None:
    """MEM002 reports at a forward pass; a file whose evaluation code calls nothing named
    like a module, an inference method or `self(x)` has none to report."""
    metrics = """
        def evaluate(preds, labels):
            scores = []
            for p, y in zip(preds, labels):
                scores.append(accuracy(p, y))
            return scores
    """
    assert "fact:eval-function" in _facts(metrics)
    assert "fact:forward-call" not in _facts(metrics)
    assert not _passes("MEM002", textwrap.dedent(metrics))
    for call in ("model(x)", "self.net.predict(x)", "m.forward(x)", "self(x)",
                 "text_encoder(ids)", "self.forward()"):
        source = metrics + "\n" + textwrap.indent(f"y = {call}", " " * 8)
        assert "fact:forward-call" in _facts(source), call
        assert _passes("MEM002", textwrap.dedent(source)), call
    # A forward takes inputs (a model running itself over inputs it holds aside); building
    # a model is no forward.
    for call in ("model()", "get_model(cfg)", "Model(cfg)", "m.forward()"):
        source = metrics + "\n" + textwrap.indent(f"y = {call}", " " * 8)
        assert "fact:forward-call" not in _facts(source), call
    # Instances of the file's own modules may have any name.
    assert "fact:forward-call" in _facts(metrics + "\n        class Head(nn.Module):\n"
                                                   "            pass\n")


def test_a_step_trains_when_an_optimizer_or_a_scaler_takes_it() -> None:
    """MEM001 and MEM007 report in training code, which runs backward or an optimizer step
    (memlint.analysis.loops): a scheduler's, a sampler's or an environment's `step()` is
    none, so a file with only those is not parsed for them."""
    for receiver in ("optimizer", "self.opt", "opts[0]", "self.g_optim", "scaler"):
        facts = _facts(f"for x in xs:\n    {receiver}.step()\n")
        assert "fact:optimizer-step" in facts, receiver
        assert _passes("MEM001", f"for x in xs:\n    {receiver}.step()\n")
    for receiver in ("scheduler", "env", "self.sampler", "get_opt()"):
        source = f"hidden = None\nfor x in xs:\n    {receiver}.step()\n"
        assert "fact:optimizer-step" not in _facts(source), receiver
        assert not _passes("MEM001", source) and not _passes("MEM007", source), receiver
        assert _passes("MEM001", source + "loss.backward()\n")


def test_a_model_class_holds_no_evaluation_code_by_name_or_switch() -> None:
    """A method of a class that defines ``forward`` (or whose same-file base does) is model
    code: ``encode``/``predict`` there, even with ``.eval()``, collects nothing MEM005 or
    MEM016 reports, so the gate does not count it."""
    methods = """
        class {name}({base}):
            {forward}
            def encode(self, chunks):
                self.net.eval()
                out = []
                for c in chunks:
                    out.append(self.net(c))
                return out
    """
    model = methods.format(name="Codec", base="nn.Module",
                           forward="def forward(self, x): return x")
    assert "fact:eval-collection" not in _facts(model)
    subclass = model + methods.format(name="Small", base="Codec", forward="pass")
    assert "fact:eval-collection" not in _facts(subclass)
    # Neither defines forward in this file: its base may be anything, so it still counts.
    assert "fact:eval-collection" in _facts(methods.format(name="Codec", base="Base",
                                                           forward="pass"))
    # The rule agrees (MEM016 asks the same analysis): nothing in the model class, a
    # finding in the plain one.
    plain = "import torch\n" + textwrap.dedent(methods.format(name="Codec", base="object",
                                                              forward="pass"))
    rule = [r for r in all_rules() if r.code == "MEM005"]
    in_model = "import torch\n" + textwrap.dedent(model)
    assert lint_source("m.py", in_model.encode(), rule, prefiltered=True) == []
    assert len(lint_source("m.py", plain.encode(), rule, prefiltered=True)) == 1


def test_an_evaluation_method_that_runs_itself_passes_whatever_its_base() -> None:
    """``predict_structure`` running ``self(g)`` in a model whose ``nn.Module`` base sits in
    another module (matgl's ``MatGLModel``): MEM002 may report it, so the gate keeps it; a
    method running other models, or a helper not named for evaluation, adds nothing."""
    method = """
        from ._core import MatGLModel
        class Net(MatGLModel):
            def forward(self, g):
                return self.head(g)
            def {name}(self, g):
                return {call}.detach()
    """
    assert _passes("MEM002", textwrap.dedent(method.format(name="predict_structure",
                                                           call="self(g)")))
    assert _passes("MEM002", textwrap.dedent(method.format(name="predict_structure",
                                                           call="self.forward(g)")))
    assert not _passes("MEM002", textwrap.dedent(method.format(name="predict_structure",
                                                               call="self.head(g)")))
    assert not _passes("MEM002", textwrap.dedent(method.format(name="relax",
                                                               call="self(g)")))


def test_evaluation_functions_and_switches() -> None:
    assert "fact:eval-function" in _facts("def validate_epoch(model, data):\n    pass\n")
    assert "fact:eval-function" not in _facts("def validation_step(self, batch):\n    pass\n")
    method = """
        class Runner:
            def predict(self, data):
                for x in data:
                    self.model(x)
    """
    assert "fact:eval-function" not in _facts(method)  # a method needs a loader to loop over
    assert "fact:eval-function" in _facts(method.replace("data", "loader"))
    # A method of that name also counts in a class that switches a model to eval.
    assert "fact:eval-function" in _facts("""
        class Predictor:
            def __init__(self, model):
                self.model = model.eval()
            def predict(self, x):
                return self.model(x)
    """)


def test_a_models_predict_api_counts_unless_the_model_runs_it_itself() -> None:
    """``predict()`` on an ``nn.Module`` is an API its users call (MEM002 reads it as
    evaluation code), unless the class calls ``self.predict(...)`` itself: a head its
    ``forward`` runs. Another class's own call does not count for it."""
    api = """
        import torch.nn as nn
        class Head(nn.Module):
            def forward(self, x):
                return self.proj(x)
            def predict(self, x):
                return self.proj(x).argmax(-1)
    """
    assert "fact:eval-function" in _facts(api)
    head = api.replace("return self.proj(x)\n", "return self.predict(x)\n", 1)
    assert "fact:eval-function" not in _facts(head)
    assert "fact:eval-function" in _facts(head + """
        class Other(nn.Module):
            def predict(self, x):
                return self.net(x)
    """)
    assert "fact:eval-function" in _facts(api + """
        class User:
            def run(self, x):
                return self.predict(x)
    """)


def test_an_eval_switch_opens_a_block_with_statements_after_it() -> None:
    assert "fact:eval-block" in _facts("model.eval()\nfor x in xs:\n    model(x)\n")
    assert "fact:eval-block" in _facts("m.train(mode=False)\nrun(m)\n")
    assert "fact:eval-block" not in _facts("m.train(True)\nm.eval(x)\nf()\n")
    assert "fact:eval-block" not in _facts("def freeze(m):\n    m.eval()\n")  # nothing after
    # In a model's own __init__/forward only a plain-name call after it can be inference.
    machinery = """
        class Net:
            def __init__(self):
                self.eval()
                {after}
    """
    assert "fact:eval-block" not in _facts(machinery.format(after="self.post_init()"))
    assert "fact:eval-block" in _facts(machinery.format(after="decode(self)"))


def test_a_factory_move_in_code() -> None:
    for code in ("torch.zeros(n).cuda()", "torch.arange(t).view(1, t).long().to(x.device)",
                 "from torch import ones as o\no(3).to(device=d)", "torch.randn(n).to(x)",
                 "torch.zeros(n).to(x.device, torch.half)"):
        assert "fact:factory-move" in _facts(code), code
    for code in ('"""torch.zeros(n).cuda()"""', "torch.zeros(n, device=d).to(torch.half)",
                 "torch.zeros(n).to(dtype=torch.half)", "torch.ones(n, **kw).cuda()",
                 "torch.empty(n, pin_memory=True).cuda()", "x.float().to(d)",
                 "torch.zeros(n).to(x.dtype)", "torch.arange(n).to(torch.float16)",
                 "torch.ones(n).to(compute_type)", "torch.ones(n).to(device=self.half)"):
        assert "fact:factory-move" not in _facts(code), code


def test_a_torch_load_that_leaves_the_device_to_the_file() -> None:
    """MEM014's gate: its text pattern also admits ``hf_hub_download(x)``, ``json.load(f)``
    and loads whose location sits in a nested call; the code decides."""
    for code in ("import torch\nstate = torch.load(path)",
                 "import torch as th\nth.load(path, weights_only=True)",
                 "from torch import load\nload(path)",
                 "def f():\n    return tl(p)\nfrom torch import load as tl"):
        assert "fact:unplaced-load" in _facts(code), code
        assert _passes("MEM014", code), code
    for code in ("import torch, json\njson.load(f)\nhf_hub_download(repo)",
                 "import torch\ntorch.load(p, map_location=device)",
                 "import torch\ntorch.load(p, device)",
                 "import torch\ntorch.load(*args)\ntorch.load(p, **options)",
                 "import torch\nx = 'torch.load(p)'",
                 "import torch\nself.torch.load(p)"):
        assert "fact:unplaced-load" not in _facts(code), code
        assert not _passes("MEM014", code), code


def test_a_call_counts_under_the_name_it_was_imported_as() -> None:
    """``call:NAME`` holds for ``ck(...)`` after ``from m import NAME as ck``, as the rules
    resolve callees through the imports; passing the function on is no call of it."""
    facts = code_facts(ast.parse(
        "from torch.utils.checkpoint import checkpoint as ck\ny = ck(block, x)\n"))
    assert {"call:ck", "call:checkpoint"} <= facts
    for code, source in (
            ("MEM011", "import torch\nwith torch.no_grad():\n"
                       "    y = torch.utils.checkpoint.checkpoint(f, x)"),
            ("MEM011", "from torch.utils.checkpoint import checkpoint_sequential as cs\n"
                       "cs(m, 2, x)"),
            ("MEM012", "import torch\nfor b in loader:\n    torch.cuda.empty_cache()"),
            ("MEM009", "opt.zero_grad(set_to_none=False)")):
        assert _passes(code, source), source
    for code, source in (
            ("MEM011", "import functools\nfrom torch.utils.checkpoint import checkpoint\n"
                       "run = functools.partial(checkpoint, use_reentrant=False)"),
            ("MEM012", "import torch\n# torch.cuda.empty_cache() every step was slow\n"
                       "release = 'empty_cache'"),
            ("MEM009", "def f(set_to_none=True):\n    return 'zero_grad(set_to_none=False)'")):
        assert not _passes(code, source), source


def test_an_oom_handler_by_its_type_or_its_words() -> None:
    def facts(code: str, with_source: bool = True) -> set[str]:
        text = textwrap.dedent(code)
        return set(code_facts(ast.parse(text), text.encode() if with_source else None))

    typed = "try:\n    f()\nexcept torch.cuda.OutOfMemoryError:\n    g()\n"
    assert "fact:oom-handler" in facts(typed)
    said = textwrap.dedent("""
        try:
            f()
        except (ValueError, RuntimeError) as e:
            g()
            {words}
        h()
    """)
    assert "fact:oom-handler" in facts(said.format(words='log("CUDA out of memory")'))
    assert "fact:oom-handler" in facts(said.format(words="# OOM: retry smaller"))
    # A trailing comment at the block's indentation belongs to the handler.
    assert "fact:oom-handler" in facts(said.format(words="pass\n    # out of memory"))
    assert "fact:oom-handler" not in facts(said.format(words="pass"))
    assert "fact:oom-handler" in facts(said.format(words="pass"), with_source=False)
    # Words outside the handler say nothing about it.
    assert "fact:oom-handler" not in facts('"""Handles out of memory."""\n'
                                           + said.format(words="pass"))


def test_another_frameworks_module_passes_no_gate() -> None:
    def facts(source: str) -> frozenset[str]:
        return code_facts(ast.parse(textwrap.dedent(source)))

    jax_only = facts("""
        import jax.numpy as jnp
        from optax import adam
        for batch in loader:
            loss.backward(); opt.step(); print(loss.item())
    """)
    assert "fact:foreign-framework" in jax_only
    assert gated(GATED, jax_only) == []
    # torch beside it (interop, or a torch import inside a function): checked as usual
    mixed = facts("""
        import warp as wp
        def train():
            import torch
    """)
    assert "fact:foreign-framework" not in mixed
    assert "fact:foreign-framework" not in facts("from .jax import Agent\nimport numpy")


def test_another_frameworks_module_gets_no_finding_in_process() -> None:
    from memlint.engine import lint_source
    from memlint.rules import all_rules as every_rule

    source = textwrap.dedent("""
        import jax
        for batch in batches:
            loss = criterion(model(batch), batch)
            loss.backward()
            optimizer.step()
    """).encode()
    assert lint_source("agent.py", source, every_rule()) == []
    torch_source = source.replace(b"import jax", b"import torch")
    assert [d.code for d in lint_source("agent.py", torch_source, every_rule())] == ["MEM004"]


SKIPPING = [rule for rule in all_rules() if rule.skips_test_code]


def test_the_rules_that_leave_test_code_alone() -> None:
    assert {r.code for r in SKIPPING} == {"MEM002", "MEM003", "MEM005", "MEM016"}
    assert all(spec.skips_test_code == spec.load().skips_test_code for spec in RULES)


@pytest.mark.parametrize("rule", SKIPPING, ids=lambda r: r.code)
@pytest.mark.parametrize("where", ["tests/test_model.py", "pkg/tests/helpers.py",
                                   "conftest.py", "testing_utils.py"])
def test_a_rule_that_skips_test_code_is_neither_parsed_for_nor_run_there(
        rule: type, where: str) -> None:
    """An invalid example that the rule flags elsewhere: in test code the scan gives it no
    rule (so libcst never parses the file for it) and the engine runs none."""
    source = textwrap.dedent(rule.invalid[0].source).encode()
    spec = RuleSpec.of(rule)
    assert lint_source("pkg/model.py", source, [rule]), "the example must be flagged"
    assert not scan_bytes(where, source, [spec], frozenset(), True).active
    assert lint_source(where, source, [rule]) == []


def test_a_scan_may_leave_the_syntax_check_of_a_file_no_rule_applies_to() -> None:
    """The runner defers the syntax check of files the scan finishes without a parse (they
    are checked in batches while the project model is built); a file the scan parses anyway
    (a package's ``__init__``) is judged there."""
    for defer in (False, True):
        plain = scan_bytes("lib.py", b"def f(:\n", RULES, frozenset(), summary_known=False,
                           defer_check=defer)
        assert plain.unchecked is defer
        assert [d.code for d in plain.diagnostics] == ([] if defer else ["MEM999"])
        package = scan_bytes("pkg/__init__.py", b"def f(:\n", RULES, frozenset(),
                             summary_known=False, defer_check=defer)
        assert not package.unchecked
        assert [d.code for d in package.diagnostics] == ["MEM999"]


def _codes(code: str, source: str) -> list[str]:
    """What the rule itself reports, its gate bypassed."""
    rule = next(r for r in all_rules() if r.code == code)
    return [d.code for d in lint_source("m.py", textwrap.dedent(source).encode(), [rule],
                                        prefiltered=True)]


def test_mem016_needs_a_call_it_can_take_for_a_model() -> None:
    """MEM016 reports a model's output, and only ``is_model_forward`` makes one: evaluation
    code that collects per batch but calls nothing named like a model (a tokenizer's loop
    over a loader) is not parsed for it; each shape the analysis takes for a model is."""
    collecting = """
        def evaluate(loader):
            ids = []
            for text in loader:
                ids.append(tokenize(text.to("cuda")))
            return ids
    """
    assert "fact:eval-collection" in _facts(collecting)
    assert "fact:model-call" not in _facts(collecting)
    assert not _passes("MEM016", textwrap.dedent(collecting))
    for extra in ("y = model(x)", "y = model()", "y = m.forward()", "y = self.encoder(x)",
                  "bm.eval()\n        y = bm(x)", "class Head(nn.Module):\n            pass"):
        source = collecting + "\n        " + extra + "\n"
        assert "fact:model-call" in _facts(source), extra
        assert _passes("MEM016", textwrap.dedent(source)), extra
    finding = textwrap.dedent("""
        import torch
        def evaluate(model, loader):
            preds = []
            with torch.no_grad():
                for x in loader:
                    preds.append(model(x.cuda()))
            return preds
    """)
    assert _codes("MEM016", finding) == ["MEM016"]
    assert _codes("MEM016", finding.replace("model(x.cuda())", "tokenize(x.cuda())")) == []


def test_mem012_needs_empty_cache_in_a_loop_or_a_per_batch_hook() -> None:
    """MEM012 reports ``empty_cache()`` where it runs every step: in a loop of its own
    function or in a framework's ``training_step``. A call at a phase change, outside any
    loop, is no finding, and the file is not parsed for the rule."""
    once = """
        import torch
        def train(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                model(x).backward()
                opt.step()
            torch.cuda.empty_cache()
    """
    assert "fact:looped-empty-cache" not in _facts(once)
    assert not _passes("MEM012", textwrap.dedent(once))
    looped = once.replace("opt.step()\n", "opt.step()\n                torch.cuda.empty_cache()\n")
    hook = """
        from torch.cuda import empty_cache as free
        class Net(LightningModule):
            def training_step(self, batch, batch_idx):
                free()
                return self(batch).sum()
    """
    for source in (looped, hook):
        assert "fact:looped-empty-cache" in _facts(source), source
        assert _passes("MEM012", textwrap.dedent(source)), source
        assert _codes("MEM012", source) == ["MEM012"], source
    assert _codes("MEM012", once) == []


def test_mem013_needs_a_training_step_not_any_step() -> None:
    """A hot loop is a training step: a backward pass or an optimizer's (or a scaler's)
    step. A loop that steps a scheduler or an environment and reads ``.item()`` is no
    training loop, and the file is not parsed for MEM013."""
    stepping = """
        def rollout(env, policy, n):
            total = 0.0
            for _ in range(n):
                reward = env.step(policy(obs)).item()
                scheduler.step()
                total += reward
            return total
    """
    assert not _passes("MEM013", textwrap.dedent(stepping))
    assert _codes("MEM013", stepping) == []
    training = stepping.replace("scheduler.step()", "optimizer.step()")
    assert "fact:optimizer-step" in _facts(training)
    assert _passes("MEM013", textwrap.dedent(training))
    assert _codes("MEM013", training) == ["MEM013"]

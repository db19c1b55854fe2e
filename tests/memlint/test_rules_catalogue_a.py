"""Behaviour of MEM005-MEM010 beyond each rule's own examples: fix safety, fix text, and the
near misses that decide precision on real code."""

from __future__ import annotations

import textwrap

import pytest

from memlint.diagnostics import Diagnostic, FixSafety
from memlint.engine import lint_source
from memlint.fixer import fix_source
from memlint.rules import rules_by_code


def lint(code: str, source: str, path: str = "example.py") -> list[Diagnostic]:
    rule = rules_by_code()[code]
    return lint_source(path, textwrap.dedent(source).encode(), [rule])


def fixed(code: str, source: str, *, unsafe: bool) -> str:
    rule = rules_by_code()[code]
    result = fix_source("example.py", textwrap.dedent(source).encode(), [rule], unsafe=unsafe)
    return result.fixed.decode()


# --- MEM010 factory-then-move ------------------------------------------------------------

@pytest.mark.parametrize(
    ("line", "safety"),
    [
        ("torch.zeros(3).cuda()", FixSafety.SAFE),
        ("torch.full((2, 2), 7.0).to(device)", FixSafety.SAFE),
        ("torch.arange(2).to('cuda:0')", FixSafety.SAFE),
        ("torch.randn(3).cuda()", FixSafety.UNSAFE),
        ("torch.randperm(n).to(device)", FixSafety.UNSAFE),
        ("torch.zeros(3, requires_grad=True).cuda()", FixSafety.UNSAFE),
        ("torch.ones(3).to(device, torch.float16)", None),
        ("torch.ones(3).to(device, copy=True)", None),
        ("torch.ones(3).cuda(gpu_index)", None),
        ("torch.zeros(3).to(other)", None),  # to another tensor's device and dtype
    ],
)
def test_factory_fix_safety(line: str, safety: FixSafety | None) -> None:
    diags = lint("MEM010", f"import torch\nx = {line}\n")
    assert [d.fix for d in diags] == [safety]


@pytest.mark.parametrize(
    "line",
    [
        "torch.zeros(3).to(torch.float16)",
        "torch.zeros(3).to(dtype=torch.float16)",
        "torch.zeros(3).to('cpu')",
        "torch.zeros(3).cpu()",
        "torch.zeros(3, out=buf).cuda()",
        "torch.zeros(3, device='cpu').cuda()",
        "torch.randn(3, generator=g).to(device)",
        "torch.empty(3, pin_memory=True).cuda(non_blocking=True)",
        "torch.ones_like(x).cuda()",
        "torch.from_numpy(a).cuda()",
        "torch.zeros(*shape, **opts).cuda()",
        "np.zeros(3).to(device)",
    ],
)
def test_factory_near_misses_are_silent(line: str) -> None:
    assert lint("MEM010", f"import torch\nimport numpy as np\nx = {line}\n") == []


def test_factory_on_a_cpu_only_device_name_is_silent() -> None:
    source = """
        import torch
        device = "cpu"
        x = torch.zeros(3).to(device)
    """
    assert lint("MEM010", source) == []


def test_factory_fix_keeps_an_aliased_import_and_a_multiline_call() -> None:
    source = """
        import torch as t
        mask = t.ones(
            n,
            n,
        ).cuda(1)
    """
    assert fixed("MEM010", source, unsafe=False) == textwrap.dedent("""
        import torch as t
        mask = t.ones(
            n,
            n,
            device="cuda:1",
        )
    """)


def test_random_factory_is_fixed_only_with_unsafe_fixes() -> None:
    source = "import torch\nz = torch.randn(4, 8).to(device)\n"
    assert fixed("MEM010", source, unsafe=False) == source
    assert fixed("MEM010", source, unsafe=True) == (
        "import torch\nz = torch.randn(4, 8, device=device)\n"
    )


# --- MEM009 zero-grad-not-none -----------------------------------------------------------

def test_zero_grad_fix_is_unsafe_only() -> None:
    source = "opt.zero_grad(set_to_none=False)\n"
    assert fixed("MEM009", source, unsafe=False) == source
    assert fixed("MEM009", source, unsafe=True) == "opt.zero_grad()\n"


def test_zero_grad_silent_when_the_loop_reads_grad_before_it() -> None:
    source = """
        for x in loader:
            model(x).sum().backward()
            for p in model.parameters():
                p.grad.mul_(0.5)
            opt.step()
            opt.zero_grad(set_to_none=False)
    """
    assert lint("MEM009", source) == []


def test_zero_grad_reported_when_grad_is_read_only_in_another_function() -> None:
    source = """
        def clip(model):
            for p in model.parameters():
                p.grad.clamp_(-1, 1)

        def train(opt, model, loader):
            for x in loader:
                opt.zero_grad(set_to_none=False)
                model(x).sum().backward()
                opt.step()
    """
    assert [d.line for d in lint("MEM009", source)] == [8]


# --- MEM006 oom-retry-in-except ----------------------------------------------------------

def test_oom_handler_in_a_tuple_of_types_is_recognised() -> None:
    source = """
        import torch
        try:
            out = model(x)
        except (ValueError, torch.cuda.OutOfMemoryError):
            out = model(x[:1])
    """
    assert [d.line for d in lint("MEM006", source)] == [6]


@pytest.mark.parametrize(
    "handler",
    [
        "    raise\n",
        "    logger.exception('oom')\n    failed = True\n",
        "    torch.cuda.empty_cache()\n",
        "    del out\n    gc.collect()\n    torch.cuda.empty_cache()\n",
        "    optimizer.zero_grad(set_to_none=True)\n",
    ],
)
def test_oom_handlers_that_only_clean_up_are_silent(handler: str) -> None:
    source = (
        "import gc\nimport torch\ntry:\n    out = model(x)\n"
        "except torch.OutOfMemoryError:\n" + handler
    )
    assert lint("MEM006", source) == []


def test_runtime_error_handler_without_an_oom_signal_is_silent() -> None:
    source = """
        try:
            y = model(x)
        except RuntimeError as err:
            logger.warning("shape mismatch: %s", err)
            y = model(x.transpose(0, 1))
    """
    assert lint("MEM006", source) == []


def test_retry_in_a_nested_function_of_the_handler_is_not_a_call_there() -> None:
    source = """
        import torch
        try:
            y = model(x)
        except torch.OutOfMemoryError:
            def later():
                return model(x[:1])
            retry_queue.append(later)
    """
    assert lint("MEM006", source) == []


# --- MEM007 recurrent-state-not-detached -------------------------------------------------

def test_state_swap_outside_training_is_silent() -> None:
    source = """
        import jax
        key = jax.random.PRNGKey(0)
        for step in range(100):
            key, sub = jax.random.split(key)
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
    """
    assert lint("MEM007", source) == []


def test_state_carried_in_a_loop_without_training_is_silent() -> None:
    source = """
        hidden = model.init_hidden(1)
        for token in prompt:
            out, hidden = model(token, hidden)
    """
    assert lint("MEM007", source) == []


def test_state_carried_under_unknown_grad_mode_is_silent() -> None:
    source = """
        import torch
        hidden = model.init_hidden(1)
        for x, y in loader:
            with torch.set_grad_enabled(phase == "train"):
                out, hidden = model(x, hidden)
                loss = criterion(out, y)
            loss.backward()
            opt.step()
    """
    assert lint("MEM007", source) == []


# --- MEM008 retain-graph-in-loop ---------------------------------------------------------

def test_retain_graph_outside_a_loop_is_silent() -> None:
    source = """
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        aux.backward()
    """
    assert lint("MEM008", source) == []


def test_retain_graph_from_a_variable_is_silent() -> None:
    source = """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=keep)
            opt.step()
    """
    assert lint("MEM008", source) == []


# --- MEM005 eval-outputs-retained --------------------------------------------------------

def test_eval_outputs_in_a_pytest_test_function_are_silent() -> None:
    source = """
        def test_outputs_have_batch_dimension(model):
            outs = []
            for x in inputs:
                outs.append(model(x))
            assert all(o.shape[0] == 1 for o in outs)
    """
    assert lint("MEM005", source, path="tests/test_model.py") == []


def test_eval_outputs_returned_to_a_training_caller_are_silent() -> None:
    source = """
        def predict_all(model, loader):
            model.eval()
            outs = []
            for x in loader:
                outs.append(model(x))
            return torch.cat(outs)

        def fit(model, loader, opt):
            loss = predict_all(model, loader).mean()
            loss.backward()
            opt.step()
    """
    assert lint("MEM005", source) == []


def test_eval_outputs_under_a_no_grad_caller_are_silent() -> None:
    source = """
        import torch

        def evaluate(model, loader):
            outs = []
            for x in loader:
                outs.append(model(x))
            return outs

        def main(model, loader):
            with torch.no_grad():
                return evaluate(model, loader)
    """
    assert lint("MEM005", source) == []


def test_eval_outputs_in_a_loader_loop_without_eval_name_are_reported() -> None:
    source = """
        def dump_features(backbone, val_loader):
            feats = []
            for images, _ in val_loader:
                feats.append(backbone(images))
            return feats
    """
    assert [d.line for d in lint("MEM005", source)] == [5]


# --- MEM002 eval-without-no-grad: `test_epoch` is evaluation code outside a test module ---

TEST_EPOCH = """
    import torch
    def test_epoch(model, loader):
        model.eval()
        for x, y in loader:
            print(model(x).argmax(-1).eq(y).sum().item())
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("train.py", True),
    ("src/mnist/engine.py", True),
    ("tests/test_training.py", False),
    ("test_training.py", False),
    ("training_test.py", False),
    # Test support modules: forwards there are smoke checks on toy models (11 false alarms
    # in the ecosystem check came from helpers in tests/ folders).
    ("pkg/tests/helpers.py", False),
    ("pkg/testing_common.py", False),
    ("conftest.py", False),
])
def test_test_epoch_counts_as_evaluation_only_outside_test_modules(path: str,
                                                                    flagged: bool) -> None:
    assert [d.line for d in lint("MEM002", TEST_EPOCH, path)] == ([6] if flagged else [])


@pytest.mark.parametrize(("line", "flagged"), [
    # a Bernoulli mask drawn on the host: the threshold's name does not matter
    ("(torch.rand(x.shape[0], *x.shape[2:]) < gamma).to(x)", True),
    ("(torch.rand(b, n) > self.mask_ratio).to(device)", True),
    ("(torch.randn(b, n) < p).cuda()", True),
    ("(torch.rand(b, n) < 0.5).to(device)", True),
    # `rand_like` draws on its argument's device; a call as threshold may be anything
    ("(torch.rand_like(x) < gamma).to(device)", False),
    ("(torch.rand(b, n) < probs(x)).to(device)", False),
])
def test_bernoulli_mask_then_move(line: str, flagged: bool) -> None:
    found = lint("MEM010", f"import torch\ndef f(self, x, b, n, p, gamma, device):\n"
                 f"    mask = {line}\n    return mask\n")
    assert [d.line for d in found] == ([3] if flagged else [])
    assert all(d.fix is None for d in found)


# --- MEM015 deprecated-amp-api ------------------------------------------------------------

@pytest.mark.parametrize(("source", "lines"), [
    # bound to a name the file calls: reported at the binding, once
    ("import torch\nautocast = torch.cuda.amp.autocast if fp16 else nullcontext\n"
     "with autocast():\n    pass\n", [2]),
    ("from torch.cuda.amp import GradScaler\nmake = GradScaler\nscaler = make()\n", [2]),
    # never called through the name: a type alias or an unused binding warns nothing
    ("import torch\nScaler = torch.cuda.amp.GradScaler\n", []),
    # the fallback arm of the new API
    ("import torch\nac = torch.amp.autocast if new else torch.cuda.amp.autocast\n"
     "with ac('cuda'):\n    pass\n", []),
    ("import torch\ntry:\n    ac = torch.amp.autocast\nexcept AttributeError:\n"
     "    ac = torch.cuda.amp.autocast\nwith ac('cuda'):\n    pass\n", []),
])
def test_deprecated_amp_bound_to_a_name(source: str, lines: list[int]) -> None:
    assert [d.line for d in lint("MEM015", source)] == lines


@pytest.mark.parametrize(("condition", "flagged"), [
    # a probe of the installed PyTorch: the branch only old releases take
    ("not hasattr(torch.amp, 'GradScaler')", False),
    ("not hasattr(torch, 'amp')", False),
    ("is_torch_version('<', '2.3')", False),
    # hasattr on the trainer or its arguments is a feature switch that new PyTorch takes too
    ("hasattr(self, 'use_amp') and self.use_amp", True),
    ("(hasattr(self, 'use_amp') and self.use_amp) or getattr(args, 'fp16', False)", True),
    ("hasattr(args, 'amp')", True),
])
def test_deprecated_amp_under_hasattr(condition: str, flagged: bool) -> None:
    source = (f"import torch\ndef step(self, args, model, x):\n    if {condition}:\n"
              "        with torch.cuda.amp.autocast():\n            return model(x)\n"
              "    return model(x)\n")
    assert [d.line for d in lint("MEM015", source)] == ([4] if flagged else [])


@pytest.mark.parametrize(("line", "flagged"), [
    ("torch.FloatTensor(1).cuda()", True),
    ("torch.LongTensor(x.size(0)).to(device)", True),
    ("torch.Tensor(len(batch)).to(device)", True),
    ("torch.FloatTensor(x.shape[0]).to(device)", True),
    # one argument that may be data: a list, an array, a name
    ("torch.FloatTensor(values).to(device)", False),
    ("torch.LongTensor([1, 2]).cuda()", False),
    ("torch.FloatTensor(x.numpy()).cuda()", False),
    # a whole shape may be a tuple, which is data: torch.Tensor((3,)) holds the number 3
    ("torch.Tensor(env.action_space.shape).to(device)", False),
    # but `x.size()` is a torch.Size (numpy's `size` is no method), which the constructor
    # takes for a shape, also extended by a tuple: torch.Tensor(x.size()) has x's shape
    ("torch.Tensor(x.size()).to(device)", True),
    ("torch.FloatTensor(x.size() + (n,)).cuda()", True),
])
def test_legacy_constructor_given_one_size(line: str, flagged: bool) -> None:
    assert bool(lint("MEM010", f"import torch\nt = {line}\n")) is flagged


# --- MEM002: a network named for its job (`attack_model`) is a network, not an attack -----

ATTACK_MODEL_EVAL = """
    import torch
    from torch.utils.data import DataLoader
    class MembershipInference:
        def infer(self, features):
            self.{name}.eval()
            test_set = self._get_attack_dataset_no_label(features)
            preds = []
            for batch, _ in DataLoader(test_set, batch_size=64):
                preds.append(self.{name}(batch).detach().numpy())
            return preds
"""


@pytest.mark.parametrize(("name", "lines"), [
    # the attack's own classifier, fed a dataset its getter built: the forward is evaluation
    ("attack_model", [10]),
    ("attack_classifier", [10]),
    ("clf_model", [10]),
    ("attack", []),  # an attack object: `attack(...)` may take input gradients
])
def test_network_named_for_an_attack_is_still_evaluated(name: str, lines: list[int]) -> None:
    assert [d.line for d in lint("MEM002", ATTACK_MODEL_EVAL.format(name=name))] == lines

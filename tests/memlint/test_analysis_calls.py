"""Call classification: backward, optimizer steps, zero_grad, losses, model forwards."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from memlint.analysis import ModuleAnalysis
from memlint.analysis.calls import (
    backward_value,
    is_backward_call,
    is_grad_clearing_assign,
    is_grad_clearing_call,
    is_optimizer_step,
    step_optimizer,
)
from memlint.vocabulary import forward_by_name


def _expr(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("loss.backward()", "loss"),
        ("(a + b).backward()", "(a + b)"),
        ("scaler.scale(loss).backward()", "loss"),
        ("accelerator.backward(loss)", "loss"),
        ("self.manual_backward(loss)", "loss"),
        ("model_engine.backward(loss)", "loss"),
        ("torch.autograd.backward(total)", "total"),
    ],
)
def test_backward_calls_and_the_value_they_consume(code: str, value: str) -> None:
    call = _expr(code)
    assert is_backward_call(call)
    consumed = backward_value(call)
    assert consumed is not None
    assert cst.Module([]).code_for_node(consumed) == value


@pytest.mark.parametrize(
    ("code", "optimizer"),
    [
        ("optimizer.step()", "optimizer"),
        ("self.opt.step()", "self.opt"),
        ("optimizerD.step()", "optimizerD"),
        ("opt_g.step()", "opt_g"),
        ("d_optim.step()", "d_optim"),
        ("scaler.step(optimizer)", "optimizer"),
        ("optimizers[0].step()", "optimizers"),
    ],
)
def test_optimizer_steps(code: str, optimizer: str) -> None:
    call = _expr(code)
    assert is_optimizer_step(call)
    assert step_optimizer(call) == optimizer


@pytest.mark.parametrize(
    "code",
    ["scheduler.step()", "lr_scheduler.step()", "model_engine.step()", "env.step(action)",
     "accelerator.step()", "step()"],
)
def test_non_optimizer_steps(code: str) -> None:
    assert not is_optimizer_step(_expr(code))


def test_grad_clearing_forms() -> None:
    assert is_grad_clearing_call(_expr("model.zero_grad(set_to_none=True)"))
    assert is_grad_clearing_call(_expr("p.grad.zero_()"))
    assert not is_grad_clearing_call(_expr("p.zero_()"))
    stmt = cst.parse_statement("p.grad = None")
    assert isinstance(stmt, cst.SimpleStatementLine)
    assert is_grad_clearing_assign(stmt.body[0])
    other = cst.parse_statement("p.data = None")
    assert isinstance(other, cst.SimpleStatementLine)
    assert not is_grad_clearing_assign(other.body[0])


def _classified(source: str) -> tuple[ModuleAnalysis, dict[str, cst.Call]]:
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    calls: dict[str, cst.Call] = {}
    for group in analysis.tree.calls_by_name.values():
        for call in group:
            calls.setdefault(module.code_for_node(call), call)
    return analysis, calls


def test_loss_calls_by_name_import_and_bound_instance() -> None:
    analysis, calls = _classified("""
        import torch.nn as nn
        import torch.nn.functional as F
        from sklearn.metrics import log_loss

        bce = nn.BCELoss().to(device)
        class M:
            def __init__(self):
                self.crit = nn.CrossEntropyLoss()
        F.cross_entropy(a, b)
        F.relu(a)
        criterion(a, b)
        self.compute_loss(a)
        bce(a, b)
        self.crit(a, b)
        log_loss(a, b)
        self.log_loss(a)
        get_loss_scale()
        nn.MSELoss()
        FocalLoss(gamma=2)
        D_loss_fn(real, fake)
        G_criterion(fake)
    """)
    is_loss = analysis.calls.is_loss_call
    for code in ("F.cross_entropy(a, b)", "criterion(a, b)", "self.compute_loss(a)",
                 "bce(a, b)", "self.crit(a, b)", "D_loss_fn(real, fake)", "G_criterion(fake)"):
        assert is_loss(calls[code]), code
    for code in ("F.relu(a)", "log_loss(a, b)", "self.log_loss(a)", "get_loss_scale()",
                 "nn.MSELoss()", "FocalLoss(gamma=2)"):
        assert not is_loss(calls[code]), code


def test_model_forwards_are_recognised_by_name_and_by_class() -> None:
    analysis, calls = _classified("""
        import torch.nn as nn

        class Tiny(nn.Module):
            pass

        clf = Tiny().cuda()
        model(x)
        self.model(x)
        netG(z)
        self.encoder(x)
        m.forward(x)
        clf(x)
        model.generate(x)
        get_model()
        Net()
        f(x)
    """)
    forward = analysis.calls.is_model_forward
    for code in ("model(x)", "self.model(x)", "netG(z)", "self.encoder(x)", "m.forward(x)",
                 "clf(x)"):
        assert forward(calls[code]), code
    for code in ("model.generate(x)", "get_model()", "Net()", "f(x)"):
        assert not forward(calls[code]), code
    assert forward(calls["model.generate(x)"], include_generate=True)


def test_calls_that_ask_about_set_or_feed_a_model_are_no_forwards() -> None:
    """A name ending in ``model`` is a forward unless it says it does something else with
    the model: asks about it, sets, places, converts or prepares input for it (Hugging
    Face's `is_peft_model`, `set_decoder`, `dispatch_model`, `_batch_prepare_for_model`)."""
    written = ("is_peft_model(m)", "self._is_peft_model(m)", "has_model(x)",
               "self.set_decoder(dec)", "dispatch_model(m, device_map=dm)",
               "self.preprocess_model(m)", "quantizer.postprocess_model(m)",
               "convert_model(m)", "register_model(m)", "self._batch_prepare_for_model(ids)",
               "tok.prepare_for_model(ids)", "model(x)", "self.text_model(ids)",
               "ref_model(x)", "self.model.text_decoder(x)")
    analysis, calls = _classified("\n".join(written) + "\n")
    forward = analysis.calls.is_model_forward
    for code in written[:11]:
        assert not forward(calls[code]), code
        assert not forward_by_name(code.split("(")[0].rpartition(".")[2]), code
    for code in written[11:]:
        assert forward(calls[code]), code


@pytest.mark.parametrize("import_line", [
    "from transformers import pipeline",
    "from transformers import pipeline as make_pipe",
    "import transformers",
])
def test_a_name_bound_only_to_a_pipeline_is_no_forward(import_line: str) -> None:
    """``classifier = pipeline(...)`` then ``classifier(texts)``: the pipeline runs the
    network under no-grad itself, however the factory was imported; a model beside it is
    still a forward, and so is the same name in a file that builds no pipeline."""
    factory = {"from transformers import pipeline": "pipeline",
               "from transformers import pipeline as make_pipe": "make_pipe",
               "import transformers": "transformers.pipeline"}[import_line]
    source = textwrap.dedent(f"""
        {import_line}
        def run(texts, model, x):
            model = {factory}("text-classification")
            labels = model(texts)
            return labels
        def other(model, x):
            return model(x)
    """)
    analysis = ModuleAnalysis(cst.parse_module(source))
    held, plain = analysis.tree.calls_by_name["model"]
    assert not analysis.calls.is_model_forward(held)
    assert analysis.calls.is_model_forward(plain)
    without = ModuleAnalysis(cst.parse_module(
        "def run(texts, model):\n    model = build('x')\n    return model(texts)\n"))
    assert without.calls.is_model_forward(without.tree.calls_by_name["model"][0])

"""Grad mode at a point: context managers, decorators, and same-file callers."""

from __future__ import annotations

import textwrap

import libcst as cst

from memlint.analysis import ModuleAnalysis


def _analysis(source: str) -> ModuleAnalysis:
    return ModuleAnalysis(cst.parse_module(textwrap.dedent(source)))


def _call(analysis: ModuleAnalysis, callee: str, nth: int = 0) -> cst.Call:
    return analysis.tree.calls_by_name[callee][nth]


def test_context_managers_and_decorators_switch_grad_off() -> None:
    a = _analysis("""
        import torch as t
        from torch import inference_mode

        with t.no_grad():
            a()

        @inference_mode()
        def infer():
            b()

        @t.no_grad
        def bare():
            c()

        with t.set_grad_enabled(False):
            d()

        e()
    """)
    for name in ("a", "b", "c", "d"):
        assert a.grad.no_grad_at(_call(a, name)), name
        assert a.grad.grad_mode_at(_call(a, name)) == "off"
    assert a.grad.grad_mode_at(_call(a, "e")) == "on"


def test_nearest_switch_wins_and_runtime_flags_are_unknown() -> None:
    a = _analysis("""
        import torch

        with torch.no_grad():
            with torch.enable_grad():
                a()
        with torch.set_grad_enabled(phase == "train"):
            b()
        with torch.inference_mode(False):
            c()
        with torch.inference_mode(mode):
            d()
    """)
    assert a.grad.grad_mode_at(_call(a, "a")) == "on"
    assert a.grad.grad_mode_at(_call(a, "b")) == "unknown"
    assert not a.grad.no_grad_at(_call(a, "b"))
    assert a.grad.grad_mode_at(_call(a, "c")) == "on"
    assert a.grad.grad_mode_at(_call(a, "d")) == "unknown"


def test_same_file_callers_decide_a_functions_mode() -> None:
    a = _analysis("""
        import torch

        def forward_only(x):
            return model(x)

        def mixed(x):
            return model(x)

        def uncalled(x):
            return model(x)

        with torch.no_grad():
            forward_only(1)
            mixed(1)
        with torch.no_grad():
            forward_only(2)
        mixed(2)
    """)
    calls = a.tree.calls_by_name["model"]
    assert a.grad.grad_mode_at(calls[0]) == "off"
    assert a.grad.grad_mode_at(calls[1]) == "on"
    assert a.grad.grad_mode_at(calls[2]) == "on"


def test_callers_propagate_through_a_chain_and_survive_recursion() -> None:
    a = _analysis("""
        import torch

        def inner(x):
            if x:
                return inner(x - 1)
            return model(x)

        def outer(x):
            return inner(x)

        @torch.no_grad()
        def evaluate(x):
            return outer(x)

        def ping(x):
            return pong(x)

        def pong(x):
            net(x)
            return ping(x)
    """)
    assert a.grad.no_grad_at(_call(a, "model"))
    # A cycle with no outside caller is neither proven off nor crashes.
    assert not a.grad.no_grad_at(_call(a, "net"))


def test_unknown_caller_modes_make_the_function_unknown() -> None:
    a = _analysis("""
        import torch

        def step(x):
            return model(x)

        with torch.no_grad():
            step(1)
        with torch.set_grad_enabled(training):
            step(2)
    """)
    assert a.grad.grad_mode_at(_call(a, "model")) == "unknown"


def test_a_frameworks_evaluation_hooks_run_with_grad_off() -> None:
    """Lightning calls ``validation_step``, ``test_step`` and ``predict_step`` under no-grad:
    a helper only they call runs there too. A hook the file calls itself takes its callers'
    mode, and a plain function named like one is no hook."""
    a = _analysis("""
        import lightning as L
        class Model(L.LightningModule):
            def _predict_patches(self, patches):
                return [self.forward(p) for p in patches]
            def validation_step(self, batch, batch_idx):
                return self._predict_patches(batch)
            def test_step(self, batch, batch_idx):
                return self._predict_patches(batch)
            def predict_step(self, batch, batch_idx):
                return hooked(batch)
        class Looper:
            def validation_step(self, batch):
                return looped(batch)
            def run(self, loader):
                for batch in loader:
                    self.validation_step(batch)
        def test_step(batch):
            return plain(batch)
    """)
    assert a.grad.grad_mode_at(_call(a, "forward")) == "off"
    assert a.grad.grad_mode_at(_call(a, "hooked")) == "off"
    assert a.grad.grad_mode_at(_call(a, "looped")) == "on"  # its own caller decides
    assert a.grad.grad_mode_at(_call(a, "plain")) == "on"

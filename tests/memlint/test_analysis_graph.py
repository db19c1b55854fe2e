"""Graph-carrying inference on realistic training snippets."""

from __future__ import annotations

import textwrap

import libcst as cst

from memlint.analysis import ModuleAnalysis


def _states(source: str) -> dict[str, bool | None]:
    """Graph state of the argument of every `keep(...)` call, keyed by its source text."""
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    out: dict[str, bool | None] = {}
    for call in analysis.tree.calls_by_name["keep"]:
        arg = call.args[0].value
        out[module.code_for_node(arg)] = analysis.graph.graph_state(arg)
    return out


def test_losses_forwards_and_arithmetic_carry_a_graph() -> None:
    states = _states("""
        import torch
        import torch.nn.functional as F
        criterion = torch.nn.CrossEntropyLoss()
        for x, y in loader:
            out = model(x)
            loss = criterion(out, y)
            reg = F.mse_loss(out, y)
            total = loss + 0.1 * reg
            keep(out)
            keep(total)
            keep(loss.mean())
            keep(torch.stack([loss, reg]))
            keep(outputs.loss)
            keep(batch_out["loss"])
    """)
    assert set(states.values()) == {True}, states


def test_detached_converted_and_host_values_do_not() -> None:
    states = _states("""
        import torch
        for x, y in loader:
            loss = criterion(model(x), y)
            keep(loss.item())
            keep(loss.detach())
            keep(float(loss))
            keep(loss.tolist())
            keep(loss.cpu().numpy())
            keep(loss.data)
            keep(3.5)
            keep(loss > 1)
            keep(torch.zeros(3))
    """)
    assert set(states.values()) == {False}, states


def test_latest_binding_wins_and_no_grad_stops_the_graph() -> None:
    states = _states("""
        import torch
        loss = criterion(model(x), y)
        loss.backward()
        loss = loss.detach()
        keep(loss)
        with torch.no_grad():
            val = criterion(model(x), y)
        keep(val)
        acc = 0
        keep(acc)
    """)
    assert states == {"loss": False, "val": False, "acc": False}


def test_values_flow_through_parameters_returns_and_self_attributes() -> None:
    states = _states("""
        class Trainer:
            def step(self, batch):
                loss = self.criterion(self.model(batch), batch.y)
                loss.backward()
                self.last = loss
                return loss

            def quiet_step(self, batch):
                loss = self.criterion(self.model(batch), batch.y)
                loss.backward()
                return loss.detach()

            def record(self, value):
                keep(value)

            def report(self):
                keep(self.last)

            def fit(self, loader):
                for batch in loader:
                    keep(self.step(batch))
                    keep(self.quiet_step(batch))
                    self.record(self.step(batch))
    """)
    assert states == {
        "value": True,
        "self.last": True,
        "self.step(batch)": True,
        "self.quiet_step(batch)": False,
    }


def test_backward_receiver_and_appended_lists_carry_a_graph() -> None:
    states = _states("""
        for batch in loader:
            loss = opaque_library_call(batch)
            loss.backward()
            keep(loss)
            parts = []
            parts.append(criterion(model(batch), batch.y))
            keep(parts)
            keep(unknown_value)
    """)
    assert states == {"loss": True, "parts": True, "unknown_value": None}


def test_accumulator_backpropagated_later_is_found() -> None:
    module = cst.parse_module(textwrap.dedent("""
        def chunked(chunks):
            total = 0
            for chunk in chunks:
                total = total + loss_fn(model(chunk))
            final = total / len(chunks)
            final.backward()
            other = 0
            for chunk in chunks:
                other += loss_fn(model(chunk))
            return other
    """))
    analysis = ModuleAnalysis(module)
    func = analysis.tree.functions_by_name["chunked"][0]
    assert analysis.graph.flows_into_backward("total", [func])
    assert not analysis.graph.flows_into_backward("other", [func])


def test_self_referential_chains_terminate() -> None:
    body = "\n".join(f"    h = h + layer{i}(h)" for i in range(400))
    source = f"def deep(h):\n{body}\n    keep(h)\n"
    states = _states(source)
    assert states["h"] in (True, None)

"""Graph-carrying inference on realistic training snippets."""

from __future__ import annotations

import textwrap

import libcst as cst

from memlint.analysis import ModuleAnalysis
from memlint.project.view import ModuleView, ReturnFact


def _state_list(source: str) -> list[tuple[str, bool | None]]:
    """Graph state of the argument of every `keep(...)` call, in source order."""
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    return [
        (module.code_for_node(call.args[0].value), analysis.graph.graph_state(call.args[0].value))
        for call in analysis.tree.calls_by_name["keep"]
    ]


def _states(source: str) -> dict[str, bool | None]:
    """Graph state of the argument of every `keep(...)` call, keyed by its source text."""
    return dict(_state_list(source))


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


def test_unpacked_names_take_the_same_file_callees_position() -> None:
    states = _states("""
        import torch
        import torch.nn.functional as F

        class DetectionLoss:
            def __init__(self):
                self.bce = torch.nn.BCEWithLogitsLoss()

            def __call__(self, pred, target):
                box = self.bce(pred[..., :4], target[..., :4])
                obj = self.bce(pred[..., 4], target[..., 4])
                return box + obj, torch.stack((box, obj)).detach()

        class Wrapped:
            def __call__(self, pred, target):
                return self.impl(pred, target)

        def split_loss(out, y):
            loss = F.cross_entropy(out, y)
            return loss, loss.item(), out

        class Trainer:
            def __init__(self):
                self.criterion = DetectionLoss()

            def _loss(self, out, y):
                return self.criterion(out, y)

            def step(self, x, y):
                out = self.model(x)
                total, parts = self._loss(out, y)
                keep(total)
                keep(parts)

        criterion = DetectionLoss()
        wrapped_criterion = Wrapped()
        for x, y in loader:
            out = model(x)
            loss, loss_items = criterion(out, y)
            keep(loss)
            keep(loss_items)
            ce, ce_value, logits = split_loss(out, y)
            keep(ce)
            keep(ce_value)
            keep(logits)
            w_loss, w_items = wrapped_criterion(out, y)
            keep(w_items)
            opaque, extra = other_criterion(out, y)
            keep(extra)
            main, ntokens = model.forward_loss(x)
            keep(ntokens)
    """)
    assert states == {
        "loss": True,
        "loss_items": False,
        "total": True,
        "parts": False,
        "ce": True,
        "ce_value": False,
        "logits": True,
        # A same-file callee decides even when its returns do not tell (no name heuristic);
        # a callee from elsewhere leaves the call as a whole (or a count-like name) to decide.
        "w_items": None,
        "extra": True,
        "ntokens": None,
    }


def test_comprehension_elements_decide_not_the_tensors_iterated() -> None:
    states = _states("""
        for x, y in loader:
            outputs = model(x)
            o = outputs[0].item()
            keep(sum(len(o) for o in outputs))
            keep(sum([o.numel() for o in outputs]))
            keep(sum(o.shape[0] for o in outputs))
            keep([o for o in outputs])
            keep([o.detach() for o in outputs])
            keep([t for chunk in outputs for t in chunk])
            keep(o)
    """)
    assert states == {
        "sum(len(o) for o in outputs)": False,
        "sum([o.numel() for o in outputs])": False,
        "sum(o.shape[0] for o in outputs)": False,
        "[o for o in outputs]": True,
        "[o.detach() for o in outputs]": False,
        "[t for chunk in outputs for t in chunk]": True,
        "o": False,
    }


def test_outputs_handed_to_a_backpropagating_helper_flow_into_backward() -> None:
    module = cst.parse_module(textwrap.dedent("""
        import torch

        def backward_step(input_tensor, output_tensor, grad):
            torch.autograd.backward(output_tensor, grad_tensors=grad)

        def schedule(model, batches, grads):
            inputs, outputs, logged = [], [], []
            for x, g in zip(batches, grads):
                out = model(x)
                inputs.append(x)
                outputs.append(out)
                logged.append(out)
                backward_step(inputs.pop(0), outputs.pop(0), g)

        class Engine:
            def _backward(self, output, grad):
                torch.autograd.backward(tensors=(output,), grad_tensors=(grad,))

            def _log(self, output):
                print(output)

            def run(self, batches, grads):
                stash, shown = [], []
                for x, g in zip(batches, grads):
                    stash.append(self.module(x))
                    shown.append(self.module(x))
                    self._backward(stash.pop(0), g)
                    self._log(shown[-1])
    """))
    analysis = ModuleAnalysis(module)
    graph = analysis.graph
    schedule = analysis.tree.functions_by_name["schedule"][0]
    run = analysis.tree.functions_by_name["run"][0]
    assert graph.flows_into_backward("outputs", [schedule])
    assert not graph.flows_into_backward("inputs", [schedule])
    assert not graph.flows_into_backward("logged", [schedule])
    assert graph.flows_into_backward("stash", [run])
    assert not graph.flows_into_backward("shown", [run])


def test_callee_defs_resolve_functions_methods_and_same_file_instances() -> None:
    module = cst.parse_module(textwrap.dedent("""
        class Averager:
            def add(self, v):
                self.total += v.data.sum()

        class Loss:
            def __call__(self, pred, y):
                return pred - y

        def helper(x):
            return x

        class Trainer:
            def __init__(self):
                self.meter = Averager()
                self.crit = Loss()

            def _step(self, x):
                return x

            def fit(self, x, y):
                self.meter.add(x)
                self.crit(x, y)
                self._step(x)

        def make_loss():
            def loss_fn(x):
                return x
            return loss_fn

        def optimise(loss_fn, x):
            return loss_fn(x)

        avg = Averager()
        seen = set()
        avg.add(1)
        seen.add(2)
        helper(3)
        unknown(4)
    """))
    analysis = ModuleAnalysis(module)
    resolved = {
        module.code_for_node(call): [d.name.value for d in analysis.graph.callee_defs(call)]
        for name in ("add", "crit", "_step", "helper", "unknown", "loss_fn")
        for call in analysis.tree.calls_by_name[name]
    }
    assert resolved == {
        "self.meter.add(x)": ["add"],
        "avg.add(1)": ["add"],
        "seen.add(2)": [],
        "self.crit(x, y)": ["__call__"],
        "self._step(x)": ["_step"],
        "helper(3)": ["helper"],
        "unknown(4)": [],
        # A parameter is whatever the caller hands in, not the same-named nested function.
        "loss_fn(x)": [],
    }


def test_counts_loaded_values_and_detached_chains_carry_no_graph() -> None:
    states = _states("""
        import json
        import yaml

        class Elbo:
            def loss_and_grads(self, traces):
                elbo = 0.0
                for trace in traces:
                    particle = compute_elbo(trace)
                    keep(particle.item() / self.num_particles)
                    (particle / self.num_particles).backward()

        def resume(path):
            with open(path) as f:
                state = yaml.safe_load(f)
            keep(state["avg_train_loss"])
            keep(json.loads(path)["loss"])

        for x, y in loader:
            loss = criterion(model(x), y)
            keep(loss.detach().clone().mean())
            keep(loss.detach().cpu())
            keep(loss.clone().mean())
    """)
    # The count divides the backpropagated loss; that makes it no graph-carrying value.
    assert states.pop("particle.item() / self.num_particles") is not True
    assert states == {
        'state["avg_train_loss"]': False,
        'json.loads(path)["loss"]': False,
        "loss.detach().clone().mean()": False,
        "loss.detach().cpu()": False,
        "loss.clone().mean()": True,
    }


def test_a_loop_that_detaches_every_entry_clears_the_dict() -> None:
    states = _state_list("""
        def microbatch_losses(self, batch, n, total):
            losses = self.criterion(self.model(batch), batch.y)
            losses["total"] = sum(losses.values())
            losses["total"].backward()
            keep(losses)
            for k, value in losses.items():
                losses[k] = value.detach().mean() * (n / total)
            keep(losses)
            losses["extra"] = self.criterion(self.model(batch), batch.y)
            keep(losses)

        def scaled(self, batch):
            parts = self.criterion(self.model(batch), batch.y)
            for k, value in parts.items():
                parts[k] = value * 2
            keep(parts)
    """)
    assert states == [("losses", True), ("losses", False), ("losses", True), ("parts", True)]


def test_unpacked_names_from_another_module_use_the_project_model() -> None:
    module = cst.parse_module(textwrap.dedent("""
        from utils.loss import ComputeLoss

        criterion = ComputeLoss(model)
        for imgs, targets in loader:
            loss, loss_items = criterion(model(imgs), targets)
            keep(loss)
            keep(loss_items)
    """))
    view = ModuleView(
        module="train",
        imports={"ComputeLoss": "utils.loss.ComputeLoss"},
        returns={"utils.loss.ComputeLoss": ReturnFact(detached=(False, True), is_tuple=True)},
    )
    analysis = ModuleAnalysis(module, project=view)
    states = {
        module.code_for_node(call.args[0].value): analysis.graph.graph_state(call.args[0].value)
        for call in analysis.tree.calls_by_name["keep"]
    }
    assert states == {"loss": True, "loss_items": False}


def test_indices_of_a_reduction_carry_no_graph_its_values_do() -> None:
    states = _state_list("""
        import torch as T
        out = model(x)
        _, predicted = T.max(out, 1)
        values, _ = out.max(dim=1)
        keep(predicted)
        keep(out.topk(5, dim=1)[1])
        keep(out.max(1).indices)
        keep(T.sort(out)[1])
        keep(values)
        keep(out.max(1)[0])
        keep(T.max(out, other)[1])
        keep(out.max()[1])
        keep(out.median()[1])
    """)
    assert states == [
        ("predicted", False), ("out.topk(5, dim=1)[1]", False), ("out.max(1).indices", False),
        ("T.sort(out)[1]", False), ("values", True), ("out.max(1)[0]", True),
        # An elementwise maximum and a single value: element 1 is part of the tensor.
        ("T.max(out, other)[1]", True), ("out.max()[1]", True), ("out.median()[1]", True),
    ]


def test_flows_into_return_follows_later_bindings() -> None:
    """A forward's value leaves its function through a ``return``: returned itself, or a name
    bound from it (also through a wrapper call) that a ``return`` reads."""
    module = cst.parse_module(textwrap.dedent("""
        def wrapped(self, x):
            dist = self(x)
            post = Posterior(dist)
            return post

        def direct(self, x):
            return self(x)[0]

        def printed(self, x):
            out = self(x)
            print(out.mean())
            return None

        def nested(self, x):
            out = self(x)
            def inner():
                return out
            return inner
    """))
    analysis = ModuleAnalysis(module)
    tree = analysis.tree
    found = {}
    for call in tree.calls_by_name["self"]:
        function = tree.enclosing_function(call)
        assert function is not None
        found[function.name.value] = analysis.graph.flows_into_return(call, function)
    assert found == {"wrapped": True, "direct": True, "printed": False, "nested": False}


def test_what_is_put_into_a_container_and_read_off_its_items_flows_on() -> None:
    module = cst.parse_module(textwrap.dedent("""
        import torch

        def update(replay, optimizer):
            terms = []
            for step in replay:
                log_prob = step.log_prob
                terms.append(-log_prob * step.reward)
            torch.stack(terms).sum().backward()
            optimizer.step()

        def logged(replay, log):
            shown = []
            for step in replay:
                shown.append(step.reward)
            log(shown)
    """))
    analysis = ModuleAnalysis(module)
    update = analysis.tree.functions_by_name["update"][0]
    logged = analysis.tree.functions_by_name["logged"][0]
    assert analysis.graph.flows_into_backward("replay", [update])
    assert analysis.graph.flows_into_backward("terms", [update])
    assert not analysis.graph.flows_into_backward("replay", [logged])

def test_a_batch_size_attribute_carries_no_graph() -> None:
    # tez reads `data_loader.batch_sampler.batch_size` from a loader handed back by
    # `self._driver.prepare(self.model, ...)`: whatever the receiver, a batch size is an int.
    states = _states("""
        import torch
        for batch in loader:
            out = model(batch)
            keep(out.batch_size)
            keep(model(batch).batch_sampler.batch_size)
            keep(out.num_nodes)
    """)
    assert states == {"out.batch_size": False, "model(batch).batch_sampler.batch_size": False,
                      "out.num_nodes": True}, states


def test_a_module_switched_to_eval_or_train_is_no_tensor() -> None:
    """`model.eval()` and `model.train()` hand the module back, whatever the model was taken
    for (here a name also bound to a forward's output)."""
    states = _states("""
        for x, y in loader:
            model = model(x)
            loss = criterion(model, y)
            loss.backward()
            keep(model.eval())
            keep(model.train())
            keep(model.float())
    """)
    assert states == {"model.eval()": False, "model.train()": False, "model.float()": True}

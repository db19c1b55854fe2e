"""DataLoader provenance, batch data and device classification on real snippets."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from memlint.analysis import ModuleAnalysis
from memlint.analysis.dataflow import (
    DataflowAnalysis,
    DeviceTarget,
    classify_to_target,
    has_non_blocking,
)


def _analysis(source: str) -> ModuleAnalysis:
    return ModuleAnalysis(cst.parse_module(textwrap.dedent(source)))


def _nodes(analysis: ModuleAnalysis) -> list[cst.CSTNode]:
    """Every node, nested functions included, in source order."""
    return [analysis.module, *analysis.tree.parents]


def _calls(analysis: ModuleAnalysis, method: str) -> list[cst.Call]:
    return [
        node
        for node in _nodes(analysis)
        if isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == method
    ]


def _loops(analysis: ModuleAnalysis) -> list[cst.For]:
    return [n for n in _nodes(analysis) if isinstance(n, cst.For)]


def _target_of(expression: str, prelude: str = "import torch\n") -> DeviceTarget:
    analysis = _analysis(f"{prelude}{expression}\n")
    call = analysis.module.body[-1].body[0].value  # type: ignore[attr-defined]
    assert isinstance(call, cst.Call)
    return classify_to_target(call, analysis.imports)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('x.to("cuda")', DeviceTarget.CUDA),
        ('x.to("cuda:1")', DeviceTarget.CUDA),
        ('x.to(f"cuda:{rank}")', DeviceTarget.CUDA),
        ('x.to(torch.device("cuda", 0))', DeviceTarget.CUDA),
        ("x.to(0)", DeviceTarget.CUDA),
        ("x.cuda()", DeviceTarget.CUDA),
        ("x.cuda(args.gpu)", DeviceTarget.CUDA),
        ("x.to(device)", DeviceTarget.ACCELERATOR),
        ("x.to(self.device)", DeviceTarget.ACCELERATOR),
        ("x.to(h.device)", DeviceTarget.ACCELERATOR),
        ("x.to(train_device)", DeviceTarget.ACCELERATOR),
        ("x.to(device=dev, dtype=torch.float16)", DeviceTarget.ACCELERATOR),
        ("x.to(device, torch.float16)", DeviceTarget.ACCELERATOR),
        ("x.to(torch.device(name))", DeviceTarget.ACCELERATOR),
        ('x.to("cuda" if torch.cuda.is_available() else "cpu")', DeviceTarget.ACCELERATOR),
        ("x.cpu()", DeviceTarget.HOST),
        ('x.to("cpu")', DeviceTarget.HOST),
        ('x.to(torch.device("cpu"))', DeviceTarget.HOST),
        ('x.to("mps")', DeviceTarget.OTHER_DEVICE),
        ("x.to(torch.float16)", DeviceTarget.NOT_A_MOVE),
        ("x.to(dtype)", DeviceTarget.NOT_A_MOVE),
        ("x.to(self.dtype)", DeviceTarget.NOT_A_MOVE),
        ("x.to(dtype=torch.bfloat16)", DeviceTarget.NOT_A_MOVE),
        ("x.to(other_tensor)", DeviceTarget.NOT_A_MOVE),
        ("x.to(memory_format=torch.channels_last)", DeviceTarget.NOT_A_MOVE),
        ("x.to(*args, **kwargs)", DeviceTarget.NOT_A_MOVE),
        ("x.float()", DeviceTarget.NOT_A_MOVE),
    ],
)
def test_classify_to_target(expression: str, expected: DeviceTarget) -> None:
    assert _target_of(expression) is expected


def test_dtype_alias_through_imports_is_a_cast() -> None:
    assert _target_of("x.to(th.half)", "import torch as th\n") is DeviceTarget.NOT_A_MOVE
    assert _target_of("x.to(float16)", "from torch import float16\n") is DeviceTarget.NOT_A_MOVE


def test_to_accelerator_covers_cuda_and_device_values_only() -> None:
    movers = {kind for kind in DeviceTarget if kind.to_accelerator}
    assert movers == {DeviceTarget.CUDA, DeviceTarget.ACCELERATOR}


@pytest.mark.parametrize(
    ("expression", "given"),
    [
        ("x.to(device)", False),
        ("x.to(device, non_blocking=True)", True),
        ("x.to(device, non_blocking=non_blocking)", True),
        ("x.to(device, torch.float32, True)", True),
        ("x.cuda()", False),
        ("x.cuda(0, True)", True),
        ("x.to(device, **transfer_kwargs)", True),
    ],
)
def test_has_non_blocking(expression: str, given: bool) -> None:
    call = cst.parse_expression(expression)
    assert isinstance(call, cst.Call)
    assert has_non_blocking(call) is given


def test_cpu_only_script_device_name_is_the_host() -> None:
    analysis = _analysis(
        """
        import torch
        device = torch.device("cpu")
        for x, y in loader:
            x = x.to(device)
        """
    )
    (call,) = _calls(analysis, "to")
    assert analysis.dataflow.device_target(call) is DeviceTarget.HOST


def test_device_name_with_any_accelerator_binding_stays_a_device() -> None:
    analysis = _analysis(
        """
        import torch
        device = "cpu"
        if torch.cuda.is_available():
            device = "cuda"
        for x, y in loader:
            x = x.to(device)
        """
    )
    (call,) = _calls(analysis, "to")
    assert analysis.dataflow.device_target(call) is DeviceTarget.ACCELERATOR


@pytest.mark.parametrize(
    "header",
    [
        "for x, y in train_loader:",
        "for x, y in self.val_dataloader:",
        "for i, (x, y) in enumerate(loader):",
        "for i, (x, y) in enumerate(tqdm(test_loader, desc='eval')):",
        "for (x, y), (u, v) in zip(src_loader, tgt_loader):",
        "for x, y in dataloaders[phase]:",
        "for x, y in train_dl:",
        "for x, y in self.train_dataloader():",
        "for x, y in DataLoader(ds, batch_size=4):",
        "for x, y in batches:",  # bound from DataLoader below
        "for x, y in make_batches():",  # returns a DataLoader below
        "for x, y in progress:",  # bound from tqdm(batches) below
    ],
)
def test_dataloader_loops(header: str) -> None:
    analysis = _analysis(
        f"""
        from torch.utils.data import DataLoader
        batches = DataLoader(ds)
        def make_batches():
            return DataLoader(ds)
        progress = tqdm(batches, desc="train")
        {header}
            pass
        """
    )
    (loop,) = _loops(analysis)
    assert analysis.dataflow.is_dataloader_loop(loop)


@pytest.mark.parametrize(
    "header",
    [
        "for layer in self.layers:",
        "for epoch in range(10):",
        "for i, x in enumerate(inputs):",
        "for path in downloader.files:",
        "for k, v in state_dict.items():",
    ],
)
def test_other_loops_are_not_dataloader_loops(header: str) -> None:
    analysis = _analysis(f"{header}\n    pass\n")
    (loop,) = _loops(analysis)
    assert not analysis.dataflow.is_dataloader_loop(loop)


def _receivers_in_batch(source: str) -> dict[str, bool]:
    analysis = _analysis(source)
    (loop, *_) = _loops(analysis)
    flow = analysis.dataflow
    out: dict[str, bool] = {}
    for call in _calls(analysis, "to"):
        assert isinstance(call.func, cst.Attribute)
        text = analysis.module.code_for_node(call.func.value)
        out[text] = flow.is_batch_data(call.func.value, loop)
    return out


def test_batch_data_flows_through_unpacking_indexing_and_comprehensions() -> None:
    found = _receivers_in_batch(
        """
        for step, batch in enumerate(train_loader):
            inputs, labels = batch
            ids = batch["input_ids"]
            moved = {k: v.to(device) for k, v in batch.items()}
            parts = tuple(t.to(device) for t in batch)
            inputs.to(device)
            ids.to(device)
            labels.float().to(device)
            outputs = model(inputs)
            outputs.to(device)
            step.to(device)
            model.to(device)
            mask = attention_mask.to(device)
            keep = (labels != -100).to(device)
        """
    )
    assert found == {
        "v": True,
        "t": True,
        "inputs": True,
        "ids": True,
        "labels.float()": True,
        "outputs": False,
        "step": False,
        "model": False,
        "attention_mask": False,
        "(labels != -100)": True,
    }


def test_batch_data_is_only_known_inside_dataloader_loops() -> None:
    found = _receivers_in_batch(
        """
        for layer in self.layers:
            hidden = layer(hidden)
            hidden.to(device)
        """
    )
    assert found == {"hidden": False}


def _fed(source: str) -> list[int]:
    """Lines of the DataLoader calls that the file's DataLoader loops iterate."""
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    flow: DataflowAnalysis = analysis.dataflow
    loops = [loop for loop in _loops(analysis) if flow.is_dataloader_loop(loop)]
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    return sorted(positions[call].start.line for call in flow.loaders_feeding(loops))


def test_loaders_feeding_follows_names_dicts_and_call_arguments() -> None:
    source = """
        from torch.utils.data import DataLoader
        train_loader = DataLoader(train_ds, batch_size=32)
        unused_loader = DataLoader(other_ds)
        loaders = {"train": DataLoader(a), "val": DataLoader(b)}

        def run(model, data):
            for x, y in data:
                model(x)

        run(model, train_loader)
        for x, y in loaders["val"]:
            pass
        """
    assert _fed(source) == [3, 5, 5]


def test_loaders_feeding_follows_methods_and_returned_loaders() -> None:
    source = """
        import torch

        class Trainer:
            def get_loader(self):
                return torch.utils.data.DataLoader(self.ds)

            def fit(self):
                for batch in self.get_loader():
                    pass

            def epoch(self, loader):
                for batch in loader:
                    pass

        t = Trainer()
        t.epoch(torch.utils.data.DataLoader(ds))
        """
    assert _fed(source) == [6, 17]


def test_loaders_feeding_follows_a_wrapper_bound_before_the_loop() -> None:
    source = """
        from torch.utils.data import DataLoader
        from tqdm import tqdm
        train_loader = DataLoader(ds, batch_size=8)
        progress = tqdm(train_loader)
        for step, batch in enumerate(progress):
            pass
        """
    assert _fed(source) == [4]

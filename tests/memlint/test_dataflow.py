"""DataLoader provenance, batch data and device classification on real snippets."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import PositionProvider

from memlint.analysis import ModuleAnalysis
from memlint.analysis.dataflow import (
    DataflowAnalysis,
    DeviceTarget,
    classify_to_target,
    has_non_blocking,
    value_key,
)


def _analysis(source: str) -> ModuleAnalysis:
    return ModuleAnalysis(cst.parse_module(textwrap.dedent(source)))


def _nodes(analysis: ModuleAnalysis) -> list[cst.CSTNode]:
    """Every node, nested functions included, in source order."""
    return list(analysis.tree.preorder)


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
    statement = analysis.module.body[-1]
    assert isinstance(statement, cst.SimpleStatementLine)
    line = statement.body[0]
    assert isinstance(line, cst.Expr)
    call = line.value
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


def test_a_pytest_fixture_parameter_is_not_the_files_cpu_name() -> None:
    # One test pins `device` to the CPU; the others take the `device` fixture from pytest.
    analysis = _analysis(
        """
        import torch

        def test_norm(name, device):
            if name == "cs":
                device = torch.device("cpu")
            return device

        def test_adjoint(device):
            x = torch.rand(1, 5, 5).to(device)
        """
    )
    (call,) = _calls(analysis, "to")
    assert analysis.dataflow.device_target(call) is DeviceTarget.ACCELERATOR


def test_a_parameter_the_cpu_only_script_passes_keeps_the_host_verdict() -> None:
    analysis = _analysis(
        """
        import torch

        def train(model, loader, device):
            for x, y in loader:
                x = x.to(device)

        def main():
            device = torch.device("cpu")
            train(model, loader, device)
        """
    )
    (call,) = _calls(analysis, "to")
    assert analysis.dataflow.device_target(call) is DeviceTarget.HOST


def test_the_device_of_a_batch_tensor_still_on_the_host_is_the_host() -> None:
    # normflows' bitsPerDatasetDL: `y.to(x.device)` with `x` the same batch, not moved.
    analysis = _analysis(
        """
        for x, y in loader:
            log_p = model(x, y.to(x.device))
        for x, y in loader:
            x = x.to(device)
            log_p = model(x, y.to(x.device))
        """
    )
    first, moved, second = _calls(analysis, "to")
    assert analysis.dataflow.device_target(first) is DeviceTarget.HOST
    assert analysis.dataflow.device_target(moved) is DeviceTarget.ACCELERATOR
    assert analysis.dataflow.device_target(second) is DeviceTarget.ACCELERATOR


def test_the_device_of_a_parameter_a_loop_passes_stays_a_device() -> None:
    # ART's PGD `_projection(values)`: the caller hands over batch-derived values that may
    # have been moved on the way; only the function's own loops decide.
    analysis = _analysis(
        """
        import torch
        def project(values, eps):
            return torch.minimum(values, torch.ones(1).to(values.device) * eps)
        def attack(model, loader, eps):
            for x, y in loader:
                x = project(x, eps)
        """
    )
    (call,) = _calls(analysis, "to")
    assert analysis.dataflow.device_target(call) is DeviceTarget.ACCELERATOR


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


@pytest.mark.parametrize(
    ("annotation", "loader"),
    [
        ("DataLoader", True),
        ("data.DataLoader", True),
        ('"DataLoader"', True),
        ("Optional[DataLoader]", True),
        ("DataLoader | None", True),
        ("Union[DataLoader, None]", True),
        ("DataLoader[Batch]", True),
        ("Optional[DataLoader[Batch]]", True),
        ("list[DataLoader]", False),
        ("Dict[str, DataLoader]", False),
        ("Union[DataLoader, List[DataLoader]]", False),
        ("Iterable", False),
    ],
)
def test_a_parameter_annotated_as_a_dataloader_is_one(annotation: str, loader: bool) -> None:
    analysis = _analysis(
        f"""
        def fit(net, train_iter: {annotation}):
            for entry in train_iter:
                pass
        """
    )
    (loop,) = _loops(analysis)
    assert analysis.dataflow.is_dataloader_loop(loop) is loader


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
    positions = wrapper.resolve(PositionProvider)
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


# -- loaders reaching their loop through wrappers and helpers ------------------------------

_WRAPPERS = textwrap.dedent("""
    from torch.utils.data import DataLoader
    from tqdm import tqdm
    batches = DataLoader(ds)
    wrapped = tqdm(enumerate(batches), total=len(batches))
    pbar = tqdm(batches, desc="train")
    it = iter(pbar)

    def forever(loader):
        while True:
            for batch in loader:
                yield batch

    def replay(loader):
        while True:
            yield from loader

    class Repeat:
        def __init__(self, loader):
            self.loader = loader
            self.it = iter(loader)

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.it)
""")


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("for i, (x, y) in wrapped:", "batches"),
        ("for batch in pbar:", "batches"),
        ("for samples, targets in metric_logger.log_every(batches, 10, 'Epoch'):", "batches"),
        ("for x, y in (b for b in batches if b is not None):", "batches"),
        ("for step, batch in enumerate(forever(batches)):", "batches"),
        ("for batch in replay(DataLoader(ds)):", "DataLoader()"),
        ("for batch in Repeat(batches):", "batches"),
        ("for batch in itertools.cycle(batches):", "batches"),
    ],
)
def test_wrapped_loaders_reach_the_loop(header: str, key: str) -> None:
    analysis = _analysis(f"{_WRAPPERS}\n{header}\n    pass\n")
    loop = _loops(analysis)[-1]
    flow = analysis.dataflow
    assert flow.is_dataloader_loop(loop)
    assert flow.loader_key(loop) == key


def test_generator_bound_to_a_name_reaches_the_loop() -> None:
    analysis = _analysis(
        """
        def train(model, train_loader):
            usable = (b for b in train_loader if b["mask"].any())
            for batch in usable:
                pass
        """
    )
    (loop,) = _loops(analysis)
    assert analysis.dataflow.is_dataloader_loop(loop)


@pytest.mark.parametrize(
    "helper",
    [
        # Moves batches itself: what it hands on is already on the device.
        "def gpu(loader):\n    for b in loader:\n        yield b.cuda(non_blocking=True)\n",
        # Yields something else than the items.
        "def gpu(loader):\n    for b in loader:\n        yield len(b)\n",
        # A prefetcher class that moves each batch.
        "class gpu:\n    def __init__(self, loader):\n        self.it = iter(loader)\n"
        "    def __next__(self):\n        return next(self.it).cuda(non_blocking=True)\n",
    ],
)
def test_wrappers_that_transform_batches_do_not_pass_the_loader_on(helper: str) -> None:
    analysis = _analysis(f"{helper}\nfor batch in gpu(train_loader):\n    pass\n")
    loop = _loops(analysis)[-1]
    assert not analysis.dataflow.is_dataloader_loop(loop)


def test_generator_that_moves_its_items_is_not_a_wrapper() -> None:
    analysis = _analysis(
        """
        def loop(model, train_loader):
            for x, y in ((x.cuda(non_blocking=True), y) for x, y in train_loader):
                pass
        """
    )
    (loop,) = _loops(analysis)
    assert not analysis.dataflow.is_dataloader_loop(loop)


# -- host batches reaching a transfer --------------------------------------------------------


def _origins(source: str) -> dict[str, list[tuple[str, str]]]:
    """Receiver text -> (site kind, source text) of each host batch origin, for every
    transfer without ``non_blocking`` (the ones MEM003 would report)."""
    analysis = _analysis(source)
    flow = analysis.dataflow
    out: dict[str, list[tuple[str, str]]] = {}
    code = analysis.module.code_for_node
    for call in [*_calls(analysis, "to"), *_calls(analysis, "cuda")]:
        assert isinstance(call.func, cst.Attribute)
        if has_non_blocking(call):
            continue
        out[code(call.func.value)] = [
            (type(o.site).__name__, code(o.source)) for o in flow.host_batch_origins(call)
        ]
    return out


def test_next_draws_inside_loops_are_batches() -> None:
    found = _origins(
        """
        def train(model, loader, device, steps):
            it = iter(loader)
            for step in range(steps):
                try:
                    inputs, labels = next(it)
                except StopIteration:
                    it = iter(loader)
                    inputs, labels = next(it)
                inputs.to(device)

        def probe(model, probe_loader):
            while True:
                batch = next(iter(probe_loader))
                batch = [t.to("cuda") for t in batch]

        def sample(model, train_dl, device):
            dl = iter(train_dl)
            while True:
                next(dl).to(device)
        """
    )
    assert found == {
        "inputs": [("For", "it")],
        "t": [("While", "probe_loader")],
        "next(dl)": [("While", "dl")],
    }


def test_one_off_and_per_epoch_samples_are_not_streamed_batches() -> None:
    found = _origins(
        """
        def overfit(model, loader, device, steps):
            x, y = next(iter(loader))
            for step in range(steps):
                x.to(device)

        def train(model, train_loader, val_loader, device, epochs):
            for epoch in range(epochs):
                preview = next(iter(val_loader))[0]
                preview.to(device)
                for images, _ in train_loader:
                    images.to(device, non_blocking=True)
        """
    )
    assert found == {"x": [], "preview": []}


def test_batches_reach_helpers_callbacks_and_step_functions() -> None:
    found = _origins(
        """
        import torch

        def to_device(batch, device):
            if isinstance(batch, torch.Tensor):
                return batch.to(device)
            return {k: to_device(v, device) for k, v in batch.items()}

        def apply_to(batch, fn):
            return [fn(t) for t in batch]

        def _pin(tensor):
            return tensor.cuda()

        class Trainer:
            def fit(self, loader):
                for batch in loader:
                    to_device(batch, self.device)
                    apply_to(batch, lambda t: t.cuda())
                    list(map(_pin, batch))
                    self.training_step(batch)

            def training_step(self, batch):
                images, labels = batch
                labels.to(self.device)

        def update(engine, batch):
            x, y = batch
            x.to("cuda")

        trainer = Engine(update)
        trainer.run(train_loader, max_epochs=2)
        """
    )
    assert found == {
        "batch": [("For", "loader")],
        "t": [("For", "loader")],
        "tensor": [("For", "loader")],
        "labels": [("For", "loader")],
        "x": [("Call", "train_loader")],
    }


def test_helpers_are_not_followed_for_host_devices_moved_values_or_other_scopes() -> None:
    found = _origins(
        """
        def to_device(batch, device="cuda"):
            return [t.to(device) for t in batch]

        def loss_fn(out, target):
            return (out - target.to(out.device)).abs().mean()

        def export(loader):
            for batch in loader:
                save(to_device(batch, "cpu"))

        def train(model, loader, device):
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                loss_fn(model(x), y)

        def test_one():
            def step(engine, batch):
                batch.to("cuda")
            engine = Engine(step)
            engine.run([1, 2, 3])

        def test_two():
            def step(engine, batch):
                return batch
            engine = Engine(step)
            engine.run(train_loader)
        """
    )
    assert found == {"t": [], "target": [], "batch": []}


def test_prepared_loaders_stay_on_the_device_under_wrappers_and_parameters() -> None:
    found = _origins(
        """
        model, train_loader = accelerator.prepare(model, train_loader)
        resumed = accelerator.skip_first_batches(train_loader, 10)
        for step, batch in enumerate(tqdm(train_loader)):
            batch.to(device)
        pbar = tqdm(resumed)
        for batch in pbar:
            batch.cuda()

        def fit(model, dl):
            it = iter(dl)
            while True:
                images = next(it)
                images.to(device)

        fit(model, fabric.setup_dataloaders(val_loader))
        """
    )
    assert found == {"batch": [], "images": []}


def test_loaders_over_device_tensors_hand_out_device_batches() -> None:
    found = _origins(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def gpu_resident(X, y, device):
            if torch.cuda.is_available():
                X = X.cuda()
            ds = TensorDataset(X, y)
            loader = DataLoader(ds, batch_size=64)
            for xb, yb in loader:
                xb.to(device)

        def factory(X, y):
            X = torch.as_tensor(X, device="cuda")
            return DataLoader(TensorDataset(X, y), batch_size=64)

        def from_factory(X, y, device):
            for feats, labels in factory(X, y):
                feats.to(device)

        def host_resident(X, y, device):
            X = X.float()
            loader = DataLoader(TensorDataset(X, y), batch_size=64)
            for inputs, targets in loader:
                inputs.to(device)
        """
    )
    assert found == {"X": [], "xb": [], "feats": [], "inputs": [("For", "loader")]}


def test_values_moved_earlier_in_the_iteration_are_on_the_device() -> None:
    found = _origins(
        """
        for data in loader:
            data.y.to(device)
            data.x = data.x.to(device, non_blocking=True)
            data.x.float().to(device)
            batch = {k: v.to(device, non_blocking=True) for k, v in data.extras.items()}
            batch["mask"].to(device)
            if isinstance(data.z, list):
                data.z = [t.to(device, non_blocking=True) for t in data.z]
            else:
                data.z.to(device)
        """
    )
    assert found == {
        "data.y": [("For", "loader")],
        "data.x.float()": [],
        'batch["mask"]': [],
        "data.z": [("For", "loader")],
    }


def _origin_feeds(source: str) -> list[int]:
    """Lines of the DataLoader calls behind every host batch origin in the file."""
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    flow = analysis.dataflow
    origins = [
        origin
        for method in ("to", "cuda")
        for call in _calls(analysis, method)
        for origin in flow.host_batch_origins(call)
    ]
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return sorted(positions[c].start.line for c in flow.loaders_feeding_origins(origins))


def test_loaders_behind_draws_and_engines_are_matched_in_their_own_scope() -> None:
    source = """
        from torch.utils.data import DataLoader

        def make_loader(ds):
            loader = DataLoader(ds, batch_size=8)
            return loader

        def test_a(ds):
            dataloader = DataLoader(ds, batch_size=4)
            for batch in dataloader:
                pass

        def test_b(ds):
            dataloader = DataLoader(ds, batch_size=4)
            it = iter(dataloader)
            while True:
                next(it).to("cuda")

        def test_c(ds):
            def step(engine, batch):
                batch.cuda()
            trainer = Engine(step)
            train_loader = make_loader(ds)
            trainer.run(train_loader)
        """
    assert _origin_feeds(source) == [5, 14]


@pytest.mark.parametrize(
    ("expression", "key"),
    [
        ("batch", ("batch",)),
        ("batch.x", ("batch", "x")),
        ('batch["input_ids"]', ("batch", '["input_ids"]')),
        ("batch[0].float()", ("batch", "[0]")),
        ("batch[key]", ("batch", "[*]")),
        ("x.to(device)", None),
        ("model(x)", None),
    ],
)
def test_value_key(expression: str, key: tuple[str, ...] | None) -> None:
    assert value_key(cst.parse_expression(expression)) == key


@pytest.mark.parametrize(
    ("expression", "placed"),
    [
        ("x.to(device)", True),
        ("x.cuda().float()", True),
        ("{k: v.to(device) for k, v in batch.items()}", True),
        ("[t.cuda(non_blocking=True) for t in batch]", True),
        ("tuple(t.to(device) for t in batch)", True),
        ("send_to_device(batch, device)", True),
        ("move_to_cuda(sample)", True),
        ("x.to(torch.float16)", False),
        ("x.cpu()", False),
        ("x.float()", False),
        ("prepare(batch)", False),
    ],
)
def test_places_on_device(expression: str, placed: bool) -> None:
    analysis = _analysis("import torch\n")
    assert analysis.dataflow.places_on_device(cst.parse_expression(expression)) is placed

"""MEM003 blocking-host-to-device: DataLoader batches copied to CUDA synchronously."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.dataflow import (
    BatchOrigin,
    DeviceTarget,
    classify_device_expr,
    classify_to_target,
    device_argument,
    has_non_blocking,
    nth_argument,
    transfer_method,
)
from memlint.analysis.imports import dotted_name
from memlint.analysis.testcode import in_ci_branch
from memlint.diagnostics import FixSafety
from memlint.edits import append_arg, has_keyword, has_star_args, keyword_arg, positional_count
from memlint.rules.base import Fix, Invalid, Rule, Valid
from memlint.vocabulary import LOADER_TEXT

if TYPE_CHECKING:
    from memlint.analysis.imports import ImportTable
    from memlint.context import FileContext

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
# pin_memory, ...): eight positional arguments reach pin_memory.
_PIN_MEMORY_POSITION = 8


def _is_cuda_tensor_type(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    """``torch.cuda.FloatTensor`` and its siblings (``torch.cuda.LongTensor``, ...)."""
    name = imports.qualified_name(expr) or ""
    return name.startswith("torch.cuda.") and name.endswith("Tensor")


def _passes_non_blocking(call: cst.Call) -> bool:
    """``non_blocking=`` given by keyword, or possibly through ``**kwargs``."""
    return any(arg.star == "**" or (arg.keyword is not None
                                    and arg.keyword.value == "non_blocking")
               for arg in call.args)


class BlockingHostToDevice(Rule):
    """
    ## What it does
    Flags a loop over a DataLoader that copies its batch to a CUDA device without
    ``non_blocking=True`` (reported at the ``.to()`` / ``.cuda()`` call), and a
    ``DataLoader(...)`` whose batches the same file copies to CUDA but which does not pass
    ``pin_memory=True`` (reported at the ``DataLoader`` call).

    The batch is followed from the loader to the copy within one file (a helper named like a
    loader, defined anywhere, hands one out: ``train_iter = dataloader(data, batch_size)``;
    a parameter annotated as one is one: ``def fit(self, net, train_iter: DataLoader)``;
    so is what a parameter or the object hands to a loop whose header says it draws
    batches, also under a progress bar: ``for batch_idx, (x, y) in enumerate(train_data):``,
    ``for batch_index, batch_data in enumerate(tqdm(data_generator)):``, or to a loop that
    unpacks each item into names (or binds it whole to a name for a batch, or unpacks it
    beside an index: ``for step, (x, y) in enumerate(train_queue):``) and trains on them, a
    backward pass in its body, or evaluates them in a function named for evaluation or
    decorated to run without grad (``@torch.no_grad()``): ``for
    x, labels in self.local_training_data:``, ``for batch in self.train_data:``, ``def
    test_model(model, test_data): for data, target in test_data:``; a device attribute
    spelled the scikit-learn way, ``self.device_``, is a device like ``self.device``),
    and the loop back to
    its ``DataLoader`` through the names it is kept under (the binding of a name that
    reaches the loop: a progress bar rebound for each loader draws from the latest one):
    a factory that returns it (also by
    name, beside a sampler: ``loader = DataLoader(...)`` ... ``return loader, sampler``) and a
    second name it is stored under (``self.train_loader = train_loader``). The batch goes:

    - through what wraps the loader before the loop: ``enumerate``, ``tqdm(...)`` (also bound
      to a name first: ``pbar = tqdm(loader)``, or opened as a context manager: ``with
      tqdm(enumerate(loader)) as t:``), a context manager given the loader that
      hands out one named like a loader (``with Manager(data_loader=loader) as
      safe_loader:``), ``metric_logger.log_every(loader, ...)``,
      ``iter``, ``itertools.cycle``, a generator expression over the loader, a conditional
      expression that picks a wrapper or the loader (``tqdm(loader) if verbose else
      loader``; either arm that is a loader counts, also bound to a name first), a progress
      reporter defined elsewhere that takes the loader beside other arguments
      (``LogProgress(logger, loader, total=n)``, ``progress_bar(loader)``,
      ``maybe_tqdm(loader, desc=d, verbose=v)``), and same-file
      infinite-iterator helpers (a generator that re-yields its argument's items, or a small
      class with ``__iter__``/``__next__`` around it);
    - through ``next(it)`` / ``next(iter(loader))`` inside a ``while`` or ``for`` loop, where
      each iteration draws a new batch (a single ``next()`` before the loop, or one batch
      sampled per epoch beside a loop over a loader, is a one-off and stays silent), and
      through ``next(self.replay)`` anywhere in a method when ``self.replay`` holds
      ``cycle(loader)``: an endless iterator kept on the object is drawn once per step (its
      ``DataLoader`` is found inside the ``cycle(...)`` call for the ``pin_memory`` report),
      and through a same-file fetch helper that a step loop calls (``try: batch =
      next(self.train_iter)`` ``except StopIteration: self.train_iter =
      iter(self.train_loader)``): its own copies, and those of the batch it returns to the
      loop, are per batch (a helper called once before the loop, or once per epoch beside
      the epoch's own loop over the loader, is a one-off);
    - through methods of the class that cast what they are given on the host
      (``inputs = self.convert_tensor_type(data["image"])``), also inherited from a project
      base class in another module,
    - into same-file helpers the loop hands the batch to (``to_device(batch, device)``,
      ``self.training_step(batch)``, a few calls deep), callbacks applied to it
      (``apply_to(batch, lambda t: t.cuda())``, ``map(to_gpu, batch)``), and step functions an
      engine runs over a loader (``trainer = Engine(train_step)`` with
      ``trainer.run(train_loader)``, or ``prepare_batch=`` of a trainer factory). The copy is
      reported where it is written, inside the helper, lambda or step function, since that
      is the line the fix changes; it is reported once however many loops reach it;
    - into the tuples, lists and dicts built of it (``inputs = {**batch, "labels":
      batch["input_ids"]}`` then ``{k: v.to(device) for k, v in inputs.items()}``).

    It stays silent where the batch is already on the device: loaders returned by
    ``accelerator.prepare``, ``accelerator.skip_first_batches`` or
    ``fabric.setup_dataloaders`` (also under ``tqdm``/``enumerate``, or passed to a helper's
    parameter), loaders over a dataset built from device tensors (``X = X.to(device)`` then
    ``DataLoader(TensorDataset(X, y))``; one device tensor is enough to stay silent), values
    moved earlier in the same iteration or helper (``batch.x = batch.x.to(device)`` then
    ``batch.x.to(device)``), values rebuilt earlier in the iteration as new host tensors
    (``masks = torch.tensor(masks)``, ``[torch.tensor(w) for w in weights]``: pageable
    memory the loader's pinning never reaches, like ``torch.tensor(part).to(device)``),
    batches of a project class named like a loader that is none (no ``DataLoader`` base,
    nothing named like a loader called inside, as ``LemmaDataLoader``: it assembles
    pageable batches itself and
    takes no ``pin_memory``, so neither report applies), batches a wrapper already moved (a
    prefetcher class or
    generator that calls ``.cuda()`` itself), and helper calls that pass a host device
    (``to_device(batch, "cpu")``), and loops over a collection of loaders (``for dl in
    loaders:`` hands on loaders, whose ``to()`` copies nothing). A loader built only when the
    script runs on a CI service
    (``if "CI" in os.environ:``, a few random samples for a smoke run) needs no pinning,
    nor does a call of a same-file loader factory named like a DataLoader that picks
    ``pin_memory`` itself (``def NNDataLoader(...): return DataLoader(..., pin_memory=True)``);
    one that takes it as a parameter is reported where it is called without it. A move to
    the device of a batch tensor still on the host (``y.to(x.device)`` with ``x`` not moved
    yet) copies nothing and is left alone, and so is a move in the ``else`` branch of a test
    that the device is CUDA (``if device == "cuda": x = x.cuda(non_blocking=True) else: x =
    x.to(device)``, also after ``torch.cuda.is_available()`` or a ``use_cuda`` flag): that
    branch runs for the CPU or another backend.

    A list, set or dict comprehension over a loader (``[model(x.cuda()) for x, _ in
    loader]``) draws a batch per item, as a ``for`` loop does.

    Not followed yet: loaders and engines defined in another file, a ``next()``
    outside any loop in a method only the framework calls per step (unless it draws from a
    ``cycle`` kept on the object), and (for the ``pin_memory`` report) a DataLoader that
    reaches an engine's ``run`` only as a closure variable of a nested handler.

    ## Why is this bad?
    A copy from pageable host memory makes the host wait until the data has reached the GPU,
    so the next batch cannot be prepared while the GPU computes. With pinned batches
    (``pin_memory=True``) and ``non_blocking=True`` the copy is queued on the CUDA stream and
    overlaps with host work; kernels on the same stream still see the finished copy.

    Across files (the project model): a loop over a wrapper defined in another module of the
    package (a generator that re-yields a loader's batches) is a loader loop, and a helper
    from another module that copies what it is given to the device without
    ``non_blocking`` (``to_device(batch, device)``) is reported where the loop calls it with
    a batch, also when it is imported through a package's re-exports or called inside a
    lambda (``map(lambda f: batch_to_device(f, device), features)``), and also one whose
    copies take ``non_blocking`` from a parameter that is off by default, called without it
    (``imed_utils.cuda(batch["input"], available)`` where ``def cuda(x, available=True,
    non_blocking=False)``). Loaders built in
    another module are not followed, but a ``DataLoader`` handed to a helper of another module
    that loops over it and copies each batch (``train_one_epoch(model, opt, train_loader,
    device)``) gets the ``pin_memory`` report here (the copy is reported in that module). A
    folder of scripts that imports its siblings by bare name (``from engine import
    train_one_epoch``) resolves them as Python does when the script runs. A method that a
    base class in another module calls with each batch of its loader loop
    (``for batch in train_loader: self.training_forward(batch)`` in the base, the hook
    overridden in a subclass's module) gets its parameter's copies reported, unless the base
    rebinds the batch before handing it on (``batch = batch.to(device)``). The base's loop
    may draw from a name bound to its loader first (``it = tqdm(self.test_loader) if verbose
    else self.test_loader``), and from what the object's own methods return (``self.train_loader,
    self.net = self.training_prepare(X)``, ``loader, _ = self.prepare(X)``): the ``DataLoader``
    that the subclass's override of such a method returns gets the ``pin_memory`` report,
    and when every such method returns a loader that batches the data itself (a list of
    batches, a project class named like a loader that is no DataLoader: ``PReNetLoader(X,
    y)``) the hook's copies are left alone, as for such a loader in one file; so does a loop in
    a method that such a base hands a loader itself (``loader = DataLoader(data); return
    self._predict(loader)``, ``_predict`` overridden to loop over it). A framework outside the
    project that hands its model each batch is known by its hook: BasicSR's training loop
    calls ``model.feed_data(data)`` per batch, and the pix2pix/CycleGAN code base (and the
    many built on it) ``model.set_input(data)``, so the copies of ``data`` in any method of
    either name are batch copies.

    Copies that overlap with nothing are left alone: a loop that always ``break``s after
    its first batch, a loop over a handful of batches (``zip(range(3), loader)``), a loop
    that calls ``synchronize()`` every iteration (timing code), and an optional move
    (``if device is not None: x = x.to(device)`` with ``device=None`` as the default).

    Test code is not checked (pytest modules, modules in a ``tests/`` folder, ``testing_*``
    helpers): it copies a batch or two of toy data, with no input pipeline to overlap. An
    evaluation script named ``test_*.py`` in an ``examples``, ``scripts``, ``tools`` or
    ``demo`` folder is no test module and is checked.

    Only moves to a device are reported: dtype casts (``.to(torch.float16)``),
    ``.to(other_tensor)``, copies to the host (``.cpu()``, ``.to("cpu")``, where
    ``non_blocking`` would need a later synchronisation), non-CUDA devices such as ``"mps"``,
    and scripts whose device is only ever ``"cpu"`` stay silent. A ``DataLoader`` that receives
    ``**kwargs`` may already pin memory and is not reported.

    A value that a module-level helper of the same file computes from the batch alone
    (views, arithmetic, tensor methods; nothing moved to a device inside) is batch data still
    on the host: ``transformations = get_transformations(igt)`` then ``[t.to(device) for t in
    transformations]``.

    A cast to a CUDA tensor type is a copy too: ``imgs.type(torch.cuda.FloatTensor)``, also
    through a name bound to one, alone or as a branch of a conditional (``Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor``, then ``imgs.type(Tensor)``, as
    many YOLO and GAN scripts write it); ``Tensor.type`` takes ``non_blocking`` as well.

    ## Example
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=4)
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
    ```

    ## How to fix
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
    ```
    Do not call ``.pin_memory()`` on each batch inside the loop: pinning there costs more than
    the copy it speeds up. Let the DataLoader's worker threads pin instead.

    ## Fix safety
    The fix adds ``non_blocking=True`` to the copy. It is safe when the target is plainly CUDA
    (``"cuda"``, ``"cuda:N"``, ``torch.device("cuda")``, ``.cuda()``): the copied batch is read
    by kernels on the same stream, which wait for it. It is unsafe when the target is a
    variable, which may name an MPS or other device where an asynchronous copy is not ordered
    the same way. ``pin_memory=True`` is never added automatically: pinned memory is
    page-locked host RAM, and on a memory-constrained host it can hurt.
    """

    code = "MEM003"
    name = "blocking-host-to-device"
    message = (
        "batch from a DataLoader is copied to the GPU without `non_blocking=True`; the host "
        "waits for every copy"
    )
    helper_message = (
        "batch from a DataLoader is copied to the GPU inside `{helper}` (another module of "
        "the project) without `non_blocking=True`; the host waits for every copy"
    )
    pin_message = (
        "this DataLoader's batches are copied to the GPU, but it does not set "
        "`pin_memory=True`; pageable batches cannot be copied asynchronously"
    )
    # Every finding sits in, or is fed by, a loop over something named or built as a loader,
    # or one that trains on what it unpacks, or a framework's batch hook.
    triggers = ("loader", "Loader", "_dl", "dl_", " dl", "(dl", "batch_i", "batchi", "batch_n",
                "i_batch", "ibatch", "b_idx", "bidx", "backward(", "feed_data", "set_input")
    # ... as a name (not `batching`, `from_dlpack`), and in the code itself, not only in a
    # docstring or comment.
    trigger_pattern = LOADER_TEXT
    code_gate = ("fact:loader-name",)
    # A test copies a batch or two of toy data: no input pipeline to overlap.
    skips_test_code = True
    fix_safety = FixSafety.SAFE

    valid = (
        # Items unpacked in the body of a loop that trains on nothing: what the parameter
        # holds (a list of host tensors, a loader) is not known.
        Valid("""
            def score(model, client_data, device):
                for pair in client_data:
                    (data, target) = pair
                    print(model(data.to(device)).argmax(1).eq(target.to(device)).sum())
        """),
        # Only a method is the framework's hook: a local function of that name is called by
        # its own code, with whatever it is given.
        Valid("""
            class Runner:
                def setup(self, device):
                    def feed_data(data):
                        return data["lq"].to(device)
                    self.hook = feed_data
        """),
        # The `else` of a CUDA test moves to another device (CPU, MPS): nothing to overlap.
        Valid("""
            import torch
            def predict(model, test_loader, device):
                with torch.no_grad():
                    for img in test_loader:
                        if device == "cuda":
                            img = img.cuda(non_blocking=True)
                        else:
                            img = img.to(device)
                        model(img)
        """),
        # A fetch helper run once before the loop, or once per epoch beside the epoch's own
        # loop over the loader (a preview batch): no batch streams through it.
        Valid("""
            class Trainer:
                def sample_batch(self):
                    x, _ = next(iter(self.val_loader))
                    return x.to(self.device)
                def train(self, epochs):
                    fixed = self.sample_batch()
                    for epoch in range(epochs):
                        preview = self.sample_batch()
                        for x, y in self.train_loader:
                            self.step(x.to(self.device, non_blocking=True), y)
                        self.show(preview, fixed)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            def bits_per_dim(model, dataset):
                for x, y in DataLoader(dataset, batch_size=64):
                    model.log_prob(x, y.to(x.device))  # x is still on the host: no copy
        """),
        Valid("""
            from torch.utils.data import DataLoader as TorchDataLoader
            def NNDataLoader(dataset, batch_size, shuffle=False):
                loader = TorchDataLoader(dataset, batch_size, shuffle=shuffle, pin_memory=True)
                return loader
            def fit(model, dataset, device):
                train_loader = NNDataLoader(dataset, 32, shuffle=True)
                for x, y in train_loader:
                    model(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            def infer(model, x):
                return model.forward(x)
            def lift(x):
                return x.to("cuda", non_blocking=True).float()
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            for x, _ in loader:  # a helper's result that is no function of the batch alone
                out = infer(model, x)
                out = [o.to("cuda") for o in out]
                y = lift(x)  # a helper that moves: its result is on the device
                y = y.to("cuda")
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            Tensor = torch.cuda.FloatTensor
            for imgs, labels in loader:
                imgs = imgs.type(torch.FloatTensor)  # a dtype cast on the host
                imgs = imgs.type(Tensor, non_blocking=True)
                labels = labels.type(torch.LongTensor)
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)
            for x, _ in loader:  # initialise from the first batch only
                init_from(x.to("cuda"))
                break
            for _, (x, y) in zip(range(3), loader):  # plot three batches
                plot(model(x.to("cuda")).cpu(), y)
            for x, y in loader:  # time every step
                x = x.to("cuda")
                torch.cuda.synchronize()
        """),
        Valid("""
            from torch.utils.data import DataLoader
            def fit(model, dataset, device=None):
                for x, y in DataLoader(dataset, batch_size=32):
                    if device is not None:
                        x, y = x.to(device), y.to(device)
                    model.step(x, y)
        """),
        Valid("""
            import os
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            if "CI" in os.environ:  # a smoke run in the test framework: eight samples
                loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8)))
            else:
                loader = DataLoader(full_set, batch_size=256, pin_memory=True)
            for x, y in loader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, pin_memory=True)
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.cuda(non_blocking=True)
                x = x.to(torch.float16)
                x = x.to(y)
                out = model(x).cpu()
                preds = out.to("cpu")
        """),
        Valid("""
            import torch
            device = torch.device("cpu")
            loader = torch.utils.data.DataLoader(ds, batch_size=8)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
        """),
        Valid("""
            import torch
            def forward(self, hidden, mask):
                for layer in self.layers:
                    hidden = layer(hidden).to(mask.device)
                return hidden
        """),
        Valid("""
            from accelerate import Accelerator
            from torch.utils.data import DataLoader
            accelerator = Accelerator()
            loader = DataLoader(ds, batch_size=16)
            model, loader = accelerator.prepare(model, loader)
            for batch in loader:
                batch = batch.to(accelerator.device)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            def build(ds, **loader_kwargs):
                return DataLoader(ds, **loader_kwargs)
            for batch in build(ds, num_workers=2):
                batch = batch.to(device, non_blocking=True)
        """),
        # Prepared loaders stay on the device under tqdm/enumerate and after a resume skip.
        Valid("""
            from accelerate import Accelerator
            from tqdm.auto import tqdm
            accelerator = Accelerator()
            model, train_dataloader = accelerator.prepare(model, train_dataloader)
            for step, batch in enumerate(tqdm(train_dataloader, desc="epoch")):
                batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            resumed_dataloader = accelerator.skip_first_batches(train_dataloader, 120)
            progress = tqdm(resumed_dataloader)
            for batch in progress:
                labels = batch["labels"].to(accelerator.device)
        """),
        # The whole dataset was moved to the GPU before the loader was built.
        Valid("""
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            features = torch.load("features.pt").to("cuda")
            targets = torch.load("targets.pt").to("cuda")
            train_set = TensorDataset(features, targets)
            loader = DataLoader(train_set, batch_size=256, shuffle=True)
            for xb, yb in loader:
                xb, yb = xb.to("cuda"), yb.to("cuda")
        """),
        # A second .to() of a value already moved in this iteration copies nothing.
        Valid("""
            for data in graph_loader:
                data.x = data.x.to(device, non_blocking=True)
                data.edge_index = data.edge_index.to(device, non_blocking=True)
                out = model(data.x.to(device), data.edge_index)
                batch = {k: v.cuda(non_blocking=True) for k, v in data.extras.items()}
                mask = batch["mask"].cuda()
        """),
        # A helper that is only ever handed the host as its device; a prefetcher that moves
        # each batch itself hands on device tensors.
        Valid("""
            import torch
            def to_device(batch, device):
                return [t.to(device) for t in batch]
            class CudaPrefetcher:
                def __init__(self, loader):
                    self.it = iter(loader)
                def __iter__(self):
                    return self
                def __next__(self):
                    return [t.cuda(non_blocking=True) for t in next(self.it)]
            for batch in val_loader:
                torch.save(to_device(batch, "cpu"), "batch.pt")
            for images, labels in CudaPrefetcher(train_loader):
                images = images.to("cuda")
        """),
        # A plain iterator kept on the object and drawn once per epoch is a preview, not a
        # stream; a string key into a mapping of devices is no device list.
        Valid("""
            from torch.utils.data import DataLoader
            class Preview:
                def setup(self, dataset):
                    self.preview = iter(DataLoader(dataset, batch_size=8))
                def on_epoch_end(self):
                    images, _ = next(self.preview)
                    self.log(self.model(images.to(self.device)))
            def spread(chunks, devices):
                return [c.to(devices["main"]) for c in chunks]
        """),
        # A loop over a list of tensors or datasets (not all of them loaders) hands out no
        # batches.
        Valid("""
            import torch
            def report(model, train_x, test_x, val_loader, device):
                for split in [train_x, test_x]:
                    for row in split:
                        model(row.to(device))
                for part in [train_x, val_loader]:
                    for row in part:
                        model(row.to(device))
        """),
        # Tensors the loop builds on the host from the batch's Python lists: pageable, out of
        # the loader's reach, like `torch.tensor(part).to(device)` in one expression.
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            def train(model, dataset, device):
                loader = DataLoader(dataset, batch_size=32, collate_fn=collate)
                for batch in loader:
                    masks = batch.masks()
                    weights = batch.weights()
                    masks = torch.tensor(masks, dtype=torch.bool)
                    weights = [torch.tensor(w).unsqueeze(1) for w in weights]
                    model(batch, masks.to(device), [w.to(device) for w in weights])
        """),
        # Batches the function cut itself from whole tensors: no loader behind them.
        Valid("""
            def train(model, x_all, y_all, device):
                batches = [(x_all[i:i + 32], y_all[i:i + 32]) for i in range(0, len(x_all), 32)]
                for batch_idx, (x, y) in enumerate(batches):
                    model(x.to(device), y.to(device))
        """),
        # Pairs the function built itself, a loop that trains nothing, an agent's rollouts:
        # no loader behind them.
        Valid("""
            def fit(model, xs, ys, device, data):
                pairs = [(xs[i], ys[i]) for i in range(len(xs))]
                for x, y in pairs:
                    model(x.to(device), y.to(device)).backward()
                for x, y in data:
                    print(model(x.to(device)), y)
            def fit_ram(model, dataset, device):
                for i, properties in enumerate(dataset):
                    model(properties["x"].to(device)).sum().backward()
            def reinforce(policy, env_batches, device):
                for obs, returns in env_batches:
                    (policy(obs.to(device)) * returns.to(device)).mean().backward()
        """),
        Valid("""
            def train(model, x_all, device):
                chunks = [x_all[i:i + 32] for i in range(0, len(x_all), 32)]
                for batch_idx, batch in enumerate(chunks):
                    model(batch.to(device))
        """),
        # Without a backward pass or a name for evaluation, what a parameter hands in may be
        # anything (pairs a caller cut, tensors already placed); nor is an agent's
        # experience a loader's batches, evaluated or not.
        Valid(
            """
            def plot_samples(model, test_data, device):
                for step, (x, y) in enumerate(test_data):
                    show(model(x.to(device)), y)
            def evaluate(agent, rollouts, device):
                for obs, action in rollouts:
                    agent(obs.to(device))
            """,
        ),
    )
    invalid = (
        # A dict built of the batch (Hugging Face's `{**batch, ...}`) holds its tensors.
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Seq2Seq:
                def train(self, dataset):
                    loader = DataLoader(dataset, batch_size=8, pin_memory=True)
                    for batch in loader:
                        inputs = self._inputs(batch)
                        self.model(**inputs).loss.backward()

                def _inputs(self, batch):
                    inputs = {**batch, "labels": batch["input_ids"]}
                    return {k: v.to(self.device) for k, v in inputs.items()}
            """,
            lines=(12,),
            fixed="""
            from torch.utils.data import DataLoader
            class Seq2Seq:
                def train(self, dataset):
                    loader = DataLoader(dataset, batch_size=8, pin_memory=True)
                    for batch in loader:
                        inputs = self._inputs(batch)
                        self.model(**inputs).loss.backward()

                def _inputs(self, batch):
                    inputs = {**batch, "labels": batch["input_ids"]}
                    return {k: v.to(self.device, non_blocking=True) for k, v in inputs.items()}
            """,
        ),
        # A loop that binds each item whole to a name for a batch and trains on it, over data
        # the object holds (deepke's trainers): a loader loop.
        Invalid(
            """
            import torch
            class Trainer:
                def train(self):
                    for batch in self.train_data:
                        batch = (t.to(self.device) for t in batch)
                        loss = self.model(*batch)
                        loss.backward()
            """,
            lines=(6,),
            fixed="""
            import torch
            class Trainer:
                def train(self):
                    for batch in self.train_data:
                        batch = (t.to(self.device, non_blocking=True) for t in batch)
                        loss = self.model(*batch)
                        loss.backward()
            """,
        ),
        # A loader built only when there is data for it (`... if val_set is not None else
        # None`) is still the one the loop draws from: both reports.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            def train(net, train_set, val_set, device):
                val_loader = DataLoader(val_set, batch_size=64) if val_set is not None else None
                for x in val_loader:
                    net(x.to(device))
            """,
            lines=(5, 7),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            def train(net, train_set, val_set, device):
                val_loader = DataLoader(val_set, batch_size=64) if val_set is not None else None
                for x in val_loader:
                    net(x.to(device, non_blocking=True))
            """,
        ),
        # The hook's batch is the first argument its caller passes, whatever the receiver is
        # called; a static hook has none.
        Invalid(
            """
            class Model(Base):
                def feed_data(this, data, extra=None):
                    this.lq = data["lq"].to(this.device)
                @staticmethod
                def feed_data(data, device):
                    return data["gt"].to(device)
            """,
            lines=(4, 7),
            fixed="""
            class Model(Base):
                def feed_data(this, data, extra=None):
                    this.lq = data["lq"].to(this.device, non_blocking=True)
                @staticmethod
                def feed_data(data, device):
                    return data["gt"].to(device, non_blocking=True)
            """,
        ),
        # BasicSR's training loop, outside the project, hands `feed_data` every batch.
        Invalid(
            """
            from basicsr.models.sr_model import SRModel
            class RealESRNetModel(SRModel):
                def feed_data(self, data):
                    self.lq = data["lq"].to(self.device)
                    if "gt" in data:
                        self.gt = data["gt"].to(self.device)
            """,
            lines=(5, 7),
            fixed="""
            from basicsr.models.sr_model import SRModel
            class RealESRNetModel(SRModel):
                def feed_data(self, data):
                    self.lq = data["lq"].to(self.device, non_blocking=True)
                    if "gt" in data:
                        self.gt = data["gt"].to(self.device, non_blocking=True)
            """,
        ),
        # A method of the class that casts what it is given on the host hands on batch data.
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Agent:
                def convert_tensor_type(self, input_tensor):
                    if self.tensor_type == "float":
                        return input_tensor.float()
                    return input_tensor.double()
                def training(self, dataset):
                    for data in DataLoader(dataset, batch_size=4, pin_memory=True):
                        inputs = self.convert_tensor_type(data["image"])
                        self.step(inputs.to(self.device))
            """,
            lines=(11,),
            fixed="""
            from torch.utils.data import DataLoader
            class Agent:
                def convert_tensor_type(self, input_tensor):
                    if self.tensor_type == "float":
                        return input_tensor.float()
                    return input_tensor.double()
                def training(self, dataset):
                    for data in DataLoader(dataset, batch_size=4, pin_memory=True):
                        inputs = self.convert_tensor_type(data["image"])
                        self.step(inputs.to(self.device, non_blocking=True))
            """,
        ),
        # The pix2pix/CycleGAN training loop calls `model.set_input(data)` every batch.
        Invalid(
            """
            from .base_model import BaseModel
            class CycleGANModel(BaseModel):
                def set_input(self, input):
                    self.real_A = input["A"].to(self.device)
                    self.real_B = input["B"].to(self.device)
                    self.image_paths = input["A_paths"]
            """,
            lines=(5, 6),
            fixed="""
            from .base_model import BaseModel
            class CycleGANModel(BaseModel):
                def set_input(self, input):
                    self.real_A = input["A"].to(self.device, non_blocking=True)
                    self.real_B = input["B"].to(self.device, non_blocking=True)
                    self.image_paths = input["A_paths"]
            """,
        ),
        # A comprehension over a loader copies every batch, as a `for` loop does.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            def embed(encoder, dataset, device):
                loader = DataLoader(dataset, batch_size=64, pin_memory=True)
                feats = [encoder(x.to(device)) for x, _ in loader]
                return {i: b.cuda() for i, b in enumerate(loader)}, feats
            """,
            lines=(6, 7),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            def embed(encoder, dataset, device):
                loader = DataLoader(dataset, batch_size=64, pin_memory=True)
                feats = [encoder(x.to(device, non_blocking=True)) for x, _ in loader]
                return {i: b.cuda(non_blocking=True) for i, b in enumerate(loader)}, feats
            """,
        ),
        # Computed from the batch alone by a same-file helper that moves nothing: host data.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            def split_pose(igt):
                rot = igt[:, :3, :3]
                return rot.permute(0, 2, 1), igt[:, :3, 3]
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            for template, igt in loader:
                poses = split_pose(igt)
                poses = [t.to("cuda") for t in poses]
            """,
            lines=(10,),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            def split_pose(igt):
                rot = igt[:, :3, :3]
                return rot.permute(0, 2, 1), igt[:, :3, 3]
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            for template, igt in loader:
                poses = split_pose(igt)
                poses = [t.to("cuda", non_blocking=True) for t in poses]
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            for imgs, targets in loader:
                imgs = imgs.type(torch.cuda.FloatTensor)
            """,
            lines=(6,),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
            for imgs, targets in loader:
                imgs = imgs.type(torch.cuda.FloatTensor, non_blocking=True)
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=8)
                Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
                for imgs, targets in loader:
                    with torch.no_grad():
                        outputs = model(imgs.type(Tensor))
            """,
            lines=(5, 9),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=8)
                Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
                for imgs, targets in loader:
                    with torch.no_grad():
                        outputs = model(imgs.type(Tensor, non_blocking=True))
            """,
        ),
        # Autograd's legacy wrapper hands on the batch's own tensor.
        Invalid(
            """
            from torch.autograd import Variable
            def train(model, train_loader, optimizer):
                for data, target in train_loader:
                    data = Variable(data).cuda()
                    target = Variable(target).cuda()
                    loss = model(data, target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            lines=(5, 6),
            fixed="""
            from torch.autograd import Variable
            def train(model, train_loader, optimizer):
                for data, target in train_loader:
                    data = Variable(data).cuda(non_blocking=True)
                    target = Variable(target).cuda(non_blocking=True)
                    loss = model(data, target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # The same when the body unpacks each item (FedScale's client step).
        Invalid(
            """
            class Client:
                def train_step(self, client_data, model, optimizer, criterion):
                    for data_pair in client_data:
                        (data, target) = data_pair
                        data = data.to(device=self.device)
                        target = target.to(device=self.device)
                        loss = criterion(model(data), target)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            lines=(6, 7),
            fixed="""
            class Client:
                def train_step(self, client_data, model, optimizer, criterion):
                    for data_pair in client_data:
                        (data, target) = data_pair
                        data = data.to(device=self.device, non_blocking=True)
                        target = target.to(device=self.device, non_blocking=True)
                        loss = criterion(model(data), target)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
        ),
        # A loop header that draws batches over what a parameter or an attribute hands in
        # (FedML's trainers: the DataLoader is built in another module).
        Invalid(
            """
            class ModelTrainer:
                def train(self, train_data, device, args):
                    for epoch in range(args.epochs):
                        for batch_idx, (x, labels) in enumerate(train_data):
                            x = x.to(device)
                            loss = self.loss(self.model(x), labels.to(device))
                            loss.backward()
                def extract(self, device):
                    for b_idx, (x, _) in enumerate(self.local_training_data):
                        self.feats[b_idx] = self.model(x.to(device)).detach()
                def test(self, device, use_test):
                    if use_test:
                        data = self.local_test_data
                    else:
                        data = self.local_training_data
                    for batch_idx, (x, y) in enumerate(data):
                        self.model(x.to(device))
            """,
            lines=(6, 7, 11, 18),
            fixed="""
            class ModelTrainer:
                def train(self, train_data, device, args):
                    for epoch in range(args.epochs):
                        for batch_idx, (x, labels) in enumerate(train_data):
                            x = x.to(device, non_blocking=True)
                            loss = self.loss(self.model(x), labels.to(device, non_blocking=True))
                            loss.backward()
                def extract(self, device):
                    for b_idx, (x, _) in enumerate(self.local_training_data):
                        self.feats[b_idx] = self.model(x.to(device, non_blocking=True)).detach()
                def test(self, device, use_test):
                    if use_test:
                        data = self.local_test_data
                    else:
                        data = self.local_training_data
                    for batch_idx, (x, y) in enumerate(data):
                        self.model(x.to(device, non_blocking=True))
            """,
        ),
        # A loop that unpacks each item into names and trains on them, over what the object
        # or a parameter hands in (FedML's clients): its items are a loader's batches.
        Invalid(
            """
            class Client:
                def train(self, epochs):
                    for epoch in range(epochs):
                        for x, labels in self.local_training_data:
                            x = x.to(self.device)
                            labels = labels.to(self.device)
                            loss = self.criterion(self.model(x), labels)
                            loss.backward()
                            self.optimizer.step()
            """,
            lines=(6, 7),
            fixed="""
            class Client:
                def train(self, epochs):
                    for epoch in range(epochs):
                        for x, labels in self.local_training_data:
                            x = x.to(self.device, non_blocking=True)
                            labels = labels.to(self.device, non_blocking=True)
                            loss = self.criterion(self.model(x), labels)
                            loss.backward()
                            self.optimizer.step()
            """,
        ),
        # One progress-bar name rebound for each loader (TSB-AD's detectors): each loop
        # draws from the loader its latest binding wraps, so both go unpinned to the GPU.
        Invalid(
            """
            import tqdm
            from torch.utils.data import DataLoader
            def fit(model, train_data, valid_data, device):
                train_loader = DataLoader(train_data, batch_size=32, shuffle=True)
                valid_loader = DataLoader(valid_data, batch_size=32)
                loop = tqdm.tqdm(enumerate(train_loader), total=len(train_loader))
                for idx, (x, y) in loop:
                    model(x.to(device, non_blocking=True)).sum().backward()
                loop = tqdm.tqdm(enumerate(valid_loader), total=len(valid_loader))
                for idx, (x, y) in loop:
                    model(x.to(device, non_blocking=True))
            """,
            lines=(5, 6),
        ),
        # A function decorated to run without grad is inference code whatever its name
        # (FL-bench's feature statistics over a client's training data).
        Invalid(
            """
            import torch
            class Client:
                def fit(self):
                    for X, y in self.train_set:
                        X = X.to(self.device)
                        self.loss(self.model(X), y).backward()
                @torch.no_grad()
                def compute_mean_cov(self):
                    feats = []
                    for _, (X, y) in enumerate(self.train_set):
                        feats.append(self.model.encoder(X.to(self.device)))
                    return feats
            """,
            lines=(6, 12),
            fixed="""
            import torch
            class Client:
                def fit(self):
                    for X, y in self.train_set:
                        X = X.to(self.device, non_blocking=True)
                        self.loss(self.model(X), y).backward()
                @torch.no_grad()
                def compute_mean_cov(self):
                    feats = []
                    for _, (X, y) in enumerate(self.train_set):
                        feats.append(self.model.encoder(X.to(self.device, non_blocking=True)))
                    return feats
            """,
        ),
        # A device kept under scikit-learn's trailing underscore (`self.device_`, set by
        # `fit()`) is the accelerator the user asked for, as `self.device` is.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            class Regressor:
                def fit(self, X, y):
                    self.device_ = torch.device(self.device)
                    for xb, yb in DataLoader(list(zip(X, y)), batch_size=32):
                        loss = self.loss_(self.module_(xb.to(self.device_)), yb)
                        loss.backward()
            """,
            lines=(7, 8),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            class Regressor:
                def fit(self, X, y):
                    self.device_ = torch.device(self.device)
                    for xb, yb in DataLoader(list(zip(X, y)), batch_size=32):
                        loss = self.loss_(self.module_(xb.to(self.device_, non_blocking=True)), yb)
                        loss.backward()
            """,
        ),
        # An index beside the unpacked item (FedNAS's `for step, (input, target) in
        # enumerate(train_queue)`), in a loop that trains or in a function named for
        # evaluation (`local_infer`, `test_model`): the same loader's batches.
        Invalid(
            """
            class Trainer:
                def local_train(self, train_queue, model, criterion, optimizer):
                    for step, (input, target) in enumerate(train_queue):
                        input = input.to(self.device)
                        loss = criterion(model(input), target)
                        loss.backward()
                        optimizer.step()
                def local_infer(self, valid_queue, model):
                    model.eval()
                    for step, (input, target) in enumerate(valid_queue):
                        input = input.to(self.device)
                        logits = model(input)
            def test_model(model, test_data, device):
                for data, target in test_data:
                    data = data.to(device=device)
                    output = model(data)
            """,
            lines=(5, 12, 16),
            fixed="""
            class Trainer:
                def local_train(self, train_queue, model, criterion, optimizer):
                    for step, (input, target) in enumerate(train_queue):
                        input = input.to(self.device, non_blocking=True)
                        loss = criterion(model(input), target)
                        loss.backward()
                        optimizer.step()
                def local_infer(self, valid_queue, model):
                    model.eval()
                    for step, (input, target) in enumerate(valid_queue):
                        input = input.to(self.device, non_blocking=True)
                        logits = model(input)
            def test_model(model, test_data, device):
                for data, target in test_data:
                    data = data.to(device=device, non_blocking=True)
                    output = model(data)
            """,
        ),
        # The same header with the batch kept whole under a batch's name, over a parameter
        # or a progress bar around it (fuxictr's trainer): the batch goes on to a helper.
        Invalid(
            """
            import sys
            from tqdm import tqdm
            class BaseModel:
                def get_labels(self, inputs):
                    return inputs["label"].to(self.device)
                def train_epoch(self, data_generator):
                    if self._verbose == 0:
                        batch_iterator = data_generator
                    else:
                        batch_iterator = tqdm(data_generator, file=sys.stdout)
                    for batch_index, batch_data in enumerate(batch_iterator):
                        loss = self.loss_fn(self(batch_data), self.get_labels(batch_data))
                        loss.backward()
            """,
            lines=(6,),
            fixed="""
            import sys
            from tqdm import tqdm
            class BaseModel:
                def get_labels(self, inputs):
                    return inputs["label"].to(self.device, non_blocking=True)
                def train_epoch(self, data_generator):
                    if self._verbose == 0:
                        batch_iterator = data_generator
                    else:
                        batch_iterator = tqdm(data_generator, file=sys.stdout)
                    for batch_index, batch_data in enumerate(batch_iterator):
                        loss = self.loss_fn(self(batch_data), self.get_labels(batch_data))
                        loss.backward()
            """,
        ),
        # The device of a batch tensor moved earlier in the iteration is the accelerator.
        Invalid(
            """
            from torch.utils.data import DataLoader
            def fit(model, dataset, device):
                for x, y in DataLoader(dataset, batch_size=64, pin_memory=True):
                    x = x.to(device, non_blocking=True)
                    model(x, y.to(x.device))
            """,
            lines=(6,),
            fixed="""
            from torch.utils.data import DataLoader
            def fit(model, dataset, device):
                for x, y in DataLoader(dataset, batch_size=64, pin_memory=True):
                    x = x.to(device, non_blocking=True)
                    model(x, y.to(x.device, non_blocking=True))
            """,
        ),
        # A loader factory that leaves pin_memory to its caller (off by default): the
        # call that does not ask for it is reported.
        Invalid(
            """
            from torch.utils.data import DataLoader as TorchDataLoader
            def NNDataLoader(dataset, batch_size, pin_memory=False):
                return TorchDataLoader(dataset, batch_size, pin_memory=pin_memory)
            def fit(model, dataset, device):
                train_loader = NNDataLoader(dataset, 32)
                for x, y in train_loader:
                    model(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
            """,
            lines=(6,),
        ),
        # A progress wrapper named for tqdm, defined elsewhere, hands on the loader's batches.
        Invalid(
            """
            import torch
            from project.display import maybe_tqdm
            def run_val(val_dataloader, model, device, verbose=True):
                for step, (batch, meta) in enumerate(
                    maybe_tqdm(val_dataloader, desc="Eval", verbose=verbose)
                ):
                    batch = batch.to(device)
                    with torch.no_grad():
                        model(batch)
            """,
            lines=(8,),
            fixed="""
            import torch
            from project.display import maybe_tqdm
            def run_val(val_dataloader, model, device, verbose=True):
                for step, (batch, meta) in enumerate(
                    maybe_tqdm(val_dataloader, desc="Eval", verbose=verbose)
                ):
                    batch = batch.to(device, non_blocking=True)
                    with torch.no_grad():
                        model(batch)
            """,
        ),
        # A parameter annotated as a DataLoader is one, whatever its name.
        Invalid(
            """
            from typing import Optional
            from torch.utils.data import DataLoader
            from tqdm import tqdm
            class Trainer:
                def __call__(self, net, train_iter: DataLoader,
                             validation_iter: Optional[DataLoader] = None):
                    with tqdm(train_iter, total=50) as it:
                        for batch_no, entry in enumerate(it, start=1):
                            inputs = [v.to(self.device) for v in entry.values()]
                            net(*inputs).backward()
                    for entry in validation_iter:
                        net(*[v.to(self.device) for v in entry.values()])
            """,
            lines=(10, 13),
            fixed="""
            from typing import Optional
            from torch.utils.data import DataLoader
            from tqdm import tqdm
            class Trainer:
                def __call__(self, net, train_iter: DataLoader,
                             validation_iter: Optional[DataLoader] = None):
                    with tqdm(train_iter, total=50) as it:
                        for batch_no, entry in enumerate(it, start=1):
                            inputs = [v.to(self.device, non_blocking=True) for v in entry.values()]
                            net(*inputs).backward()
                    for entry in validation_iter:
                        net(*[v.to(self.device, non_blocking=True) for v in entry.values()])
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            from tqdm import tqdm
            def summarise(dataset, device, verbose):
                loader = DataLoader(dataset, batch_size=1, pin_memory=True)
                for item in tqdm(loader) if verbose else loader:
                    image = item["image"].to(device)
                    label = item["label"][0].to(device)
            """,
            lines=(8, 9),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            from tqdm import tqdm
            def summarise(dataset, device, verbose):
                loader = DataLoader(dataset, batch_size=1, pin_memory=True)
                for item in tqdm(loader) if verbose else loader:
                    image = item["image"].to(device, non_blocking=True)
                    label = item["label"][0].to(device, non_blocking=True)
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, num_workers=4)
            for x, y in loader:
                x, y = x.to(device), y.cuda()
            """,
            lines=(4, 6, 6),
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, num_workers=4)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.cuda(non_blocking=True)
            """,
        ),
        Invalid(
            """
            import torch
            def evaluate(model, val_loader):
                for step, batch in enumerate(val_loader):
                    batch = {k: v.to("cuda") for k, v in batch.items()}
                    model(**batch)
            """,
            lines=(5,),
            fixed="""
            import torch
            def evaluate(model, val_loader):
                for step, batch in enumerate(val_loader):
                    batch = {k: v.to("cuda", non_blocking=True) for k, v in batch.items()}
                    model(**batch)
            """,
        ),
        # The loop's loader is a parameter handed down two levels of same-file helpers: the
        # pin_memory report finds the DataLoader behind both.
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Evaluator:
                def evaluate(self, model, test_set):
                    test_loader = DataLoader(test_set, batch_size=64)
                    return self.eval_metric(model, test_loader)
                def eval_metric(self, model, loader):
                    return self.eval_acc(model, loader)
                def eval_acc(self, model, loader):
                    for data in loader:
                        model(data.to(self.device, non_blocking=True))
            """,
            lines=(5,),
        ),
        # A device string filled in from a template names CUDA as plainly as an f-string.
        Invalid(
            """
            def train(model, train_loader, local_rank):
                for inputs, labels in train_loader:
                    inputs = inputs.to("cuda:{}".format(local_rank)).to_dict()
                    labels = labels.to("cuda:%d" % local_rank)
            """,
            lines=(4, 5),
            fixed="""
            def train(model, train_loader, local_rank):
                for inputs, labels in train_loader:
                    inputs = inputs.to("cuda:{}".format(local_rank), non_blocking=True).to_dict()
                    labels = labels.to("cuda:%d" % local_rank, non_blocking=True)
            """,
        ),
        # Wrappers between the loader and the loop.
        Invalid(
            """
            from tqdm import tqdm
            def train_one_epoch(model, train_loader, metric_logger):
                pbar = tqdm(train_loader, desc="train")
                for batch in pbar:
                    images = batch["image"].cuda()
                for images, targets in metric_logger.log_every(train_loader, 20, "Epoch:"):
                    targets = targets.cuda()
                for x, y in ((x, y) for x, y in train_loader if len(x) > 1):
                    x = x.cuda()
            """,
            lines=(6, 8, 10),
            fixed="""
            from tqdm import tqdm
            def train_one_epoch(model, train_loader, metric_logger):
                pbar = tqdm(train_loader, desc="train")
                for batch in pbar:
                    images = batch["image"].cuda(non_blocking=True)
                for images, targets in metric_logger.log_every(train_loader, 20, "Epoch:"):
                    targets = targets.cuda(non_blocking=True)
                for x, y in ((x, y) for x, y in train_loader if len(x) > 1):
                    x = x.cuda(non_blocking=True)
            """,
        ),
        # Batches drawn with next(): from an infinite-iterator helper, and from iter(loader).
        Invalid(
            """
            def forever(loader):
                while True:
                    for batch in loader:
                        yield batch
            def train(model, train_loader, total_steps):
                batches = forever(train_loader)
                for step in range(total_steps):
                    images, labels = next(batches)
                    images = images.to("cuda")
            def probe(model, probe_loader):
                it = iter(probe_loader)
                while True:
                    batch = next(it)
                    batch = [t.to("cuda") for t in batch]
            """,
            lines=(10, 15),
            fixed="""
            def forever(loader):
                while True:
                    for batch in loader:
                        yield batch
            def train(model, train_loader, total_steps):
                batches = forever(train_loader)
                for step in range(total_steps):
                    images, labels = next(batches)
                    images = images.to("cuda", non_blocking=True)
            def probe(model, probe_loader):
                it = iter(probe_loader)
                while True:
                    batch = next(it)
                    batch = [t.to("cuda", non_blocking=True) for t in batch]
            """,
        ),
        # The copy sits in a helper or a lambda the loop hands its batch to: reported there.
        Invalid(
            """
            import torch
            def to_device(batch, device):
                if isinstance(batch, torch.Tensor):
                    return batch.to(device)
                return {k: to_device(v, device) for k, v in batch.items()}
            def apply_to(batch, fn):
                return [fn(t) for t in batch]
            def train(model, loader, device):
                for batch in loader:
                    inputs = to_device(batch["inputs"], device)
                    targets = apply_to(batch["targets"], lambda t: t.cuda())
            """,
            lines=(5, 12),
            fixed="""
            import torch
            def to_device(batch, device):
                if isinstance(batch, torch.Tensor):
                    return batch.to(device, non_blocking=True)
                return {k: to_device(v, device) for k, v in batch.items()}
            def apply_to(batch, fn):
                return [fn(t) for t in batch]
            def train(model, loader, device):
                for batch in loader:
                    inputs = to_device(batch["inputs"], device)
                    targets = apply_to(batch["targets"], lambda t: t.cuda(non_blocking=True))
            """,
        ),
        # An engine's step function gets each batch of the loader the engine runs on.
        Invalid(
            """
            from ignite.engine import Engine
            from torch.utils.data import DataLoader
            def train_step(engine, batch):
                x, y = batch
                x, y = x.to("cuda"), y.to("cuda")
                return model(x, y)
            trainer = Engine(train_step)
            train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
            trainer.run(train_loader, max_epochs=10)
            """,
            lines=(6, 6, 9),
            fixed="""
            from ignite.engine import Engine
            from torch.utils.data import DataLoader
            def train_step(engine, batch):
                x, y = batch
                x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)
                return model(x, y)
            trainer = Engine(train_step)
            train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
            trainer.run(train_loader, max_epochs=10)
            """,
        ),
        # A cycle kept on the object and drawn with next() in a per-step method, and a helper
        # that copies to one of a list of devices (`devices[0]`).
        Invalid(
            """
            from itertools import cycle
            from torch.utils.data import DataLoader
            class Replay:
                def before_experience(self, buffer):
                    self.replay_stream = cycle(DataLoader(buffer, batch_size=32, shuffle=True))
                def criterion(self, out, y):
                    x_mem, y_mem = next(self.replay_stream)
                    x_mem = x_mem.to(self.device)
                    return loss(out, y) + loss(self.model(x_mem), y_mem)
            def train_batch(net, X, y, devices):
                X = X.to(devices[0])
                return net(X), y
            def train(net, train_loader, devices):
                for features, labels in train_loader:
                    train_batch(net, features, labels, devices)
            """,
            lines=(6, 9, 12),
            fixed="""
            from itertools import cycle
            from torch.utils.data import DataLoader
            class Replay:
                def before_experience(self, buffer):
                    self.replay_stream = cycle(DataLoader(buffer, batch_size=32, shuffle=True))
                def criterion(self, out, y):
                    x_mem, y_mem = next(self.replay_stream)
                    x_mem = x_mem.to(self.device, non_blocking=True)
                    return loss(out, y) + loss(self.model(x_mem), y_mem)
            def train_batch(net, X, y, devices):
                X = X.to(devices[0], non_blocking=True)
                return net(X), y
            def train(net, train_loader, devices):
                for features, labels in train_loader:
                    train_batch(net, features, labels, devices)
            """,
        ),
        # A step's batch fetch that restarts an exhausted iterator, called once per step: the
        # copies in it, and those of the batch it returns to the step loop.
        Invalid(
            """
            class Trainer:
                def fetch(self, it):
                    try:
                        x, y = next(it)
                    except StopIteration:
                        it = iter(self.train_loader)
                        x, y = next(it)
                    return it, (x.to(self.device), y)
                def get_batch(self):
                    try:
                        return next(self.train_iter)
                    except StopIteration:
                        self.train_iter = iter(self.train_loader)
                        return next(self.train_iter)
                def train(self, steps):
                    it = iter(self.train_loader)
                    for step in range(steps):
                        it, (x, y) = self.fetch(it)
                        images, labels = self.get_batch()
                        self.step(x, y.cuda(), images.cuda())
            """,
            lines=(9, 21, 21),
            fixed="""
            class Trainer:
                def fetch(self, it):
                    try:
                        x, y = next(it)
                    except StopIteration:
                        it = iter(self.train_loader)
                        x, y = next(it)
                    return it, (x.to(self.device, non_blocking=True), y)
                def get_batch(self):
                    try:
                        return next(self.train_iter)
                    except StopIteration:
                        self.train_iter = iter(self.train_loader)
                        return next(self.train_iter)
                def train(self, steps):
                    it = iter(self.train_loader)
                    for step in range(steps):
                        it, (x, y) = self.fetch(it)
                        images, labels = self.get_batch()
                        self.step(x, y.cuda(non_blocking=True), images.cuda(non_blocking=True))
            """,
        ),
        # A context manager that hands out a loader for the one it is given (a memory-limiting
        # wrapper) leads back to the DataLoader for the pin_memory report.
        Invalid(
            """
            from torch.utils.data import DataLoader
            def main(model, train_set, engine):
                train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
                with engine.limit_batches(data_loader=train_loader, max_size=16) as small_loader:
                    for batch in small_loader:
                        model(batch.cuda(non_blocking=True))
            """,
            lines=(4,),
        ),
        # A loader returned by a factory method, kept on the object under a second name, or
        # returned by name beside its sampler, leads back to its DataLoader.
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Trainer:
                def __init__(self, train_set):
                    train_loader = self.get_train_dataloader(train_set)
                    self.train_loader = train_loader
                def get_train_dataloader(self, dataset):
                    return DataLoader(dataset, batch_size=32, shuffle=True)
                def train_epoch(self, model):
                    for batch in self.train_loader:
                        model(batch.cuda(non_blocking=True))
            """,
            lines=(8,),
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Model:
                def fit(self, data):
                    train_loader, sampler = self.load_examples(data)
                    for batch in train_loader:
                        self.model(*(t.to(self.device, non_blocking=True) for t in batch))
                def load_examples(self, data):
                    loader = DataLoader(data, batch_size=8)
                    return loader, None
            """,
            lines=(9,),
        ),
        # A loop over a list of loaders (bound to a name first) hands out loaders, whatever
        # its target is called.
        Invalid(
            """
            import torch
            from tqdm import tqdm
            def evaluate(model, head_loader, tail_loader, device):
                splits = [head_loader, tail_loader]
                for split in splits:
                    for positive, negative in tqdm(split):
                        model(positive.to(device), negative)
            """,
            lines=(8,),
            fixed="""
            import torch
            from tqdm import tqdm
            def evaluate(model, head_loader, tail_loader, device):
                splits = [head_loader, tail_loader]
                for split in splits:
                    for positive, negative in tqdm(split):
                        model(positive.to(device, non_blocking=True), negative)
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        # Where the batches this file copies to the GPU come from (for pin_memory).
        self._origins: dict[BatchOrigin, None] = {}
        # DataLoaders handed to a helper of another module that copies their batches.
        self._handed: dict[cst.Call, None] = {}

    def visit_Call(self, node: cst.Call) -> None:
        cuda_type = self._cuda_type_cast(node)
        project = self.context.project
        if (cuda_type is None and transfer_method(node) not in ("to", "cuda")) or (
                project is not None and dotted_name(node.func) in project.movers):
            # (A helper of another module named like the method: `imed_utils.cuda(x)`.)
            self._check_helper(node)
            return
        analysis = self.context.analysis
        # The call's own spelling first; the file-wide refinement (a CPU-only device name)
        # only for calls that do carry a host batch.
        if cuda_type is None and not classify_to_target(node, analysis.imports).to_accelerator:
            return
        flow = analysis.dataflow
        origins = [o for o in flow.host_batch_origins(node) if flow.is_steady(o)]
        if not origins or self._optional_move(node) or self._plain_batches(origins):
            return
        target = cuda_type if cuda_type is not None else flow.device_target(node)
        if not target.to_accelerator:
            return
        for origin in origins:
            self._origins[origin] = None
        if has_non_blocking(node):
            return
        safety = FixSafety.SAFE if target is DeviceTarget.CUDA else FixSafety.UNSAFE
        fixed = append_arg(node, keyword_arg("non_blocking", cst.Name("True")))
        self.report(node, fix=Fix(safety, {node: fixed}))

    def _cuda_type_cast(self, call: cst.Call) -> DeviceTarget | None:
        """``x.type(torch.cuda.FloatTensor)``, also through a name the function (or the
        module) binds to a CUDA tensor type, alone or as a branch of a conditional
        (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``): a copy to the
        GPU that ``Tensor.type`` makes blocking unless given ``non_blocking=True``. CUDA when
        the type is written at the call, the unknown accelerator when a name may hold the
        host type (the fix is then unsafe, though a host-to-host cast ignores the flag)."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "type"):
            return None
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) != 1 or _passes_non_blocking(call):
            return None
        arg = positional[0].value
        imports = self.context.analysis.imports
        if _is_cuda_tensor_type(arg, imports):
            return DeviceTarget.CUDA
        if not isinstance(arg, cst.Name):
            return None
        tree = self.context.analysis.tree
        values: list[cst.BaseExpression] = []
        for scope in (tree.enclosing_function(call), tree.module):
            if scope is None:
                continue
            values = [
                node.value for node in tree.walk(scope)
                if isinstance(node, cst.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)
                and node.targets[0].target.value == arg.value
            ]
            if values:
                break
        if not values or not all(
                _is_cuda_tensor_type(v, imports) or (
                    isinstance(v, cst.IfExp) and (_is_cuda_tensor_type(v.body, imports)
                                                  or _is_cuda_tensor_type(v.orelse, imports)))
                for v in values):
            return None
        return DeviceTarget.ACCELERATOR

    def _check_helper(self, call: cst.Call) -> None:
        """A helper from another module of the project that copies what it is given to a
        device without ``non_blocking`` (``to_device(batch, device)``), called with batch data:
        reported at the call, the one line of this file that the fix concerns."""
        project = self.context.project
        written = dotted_name(call.func) if project is not None else None
        if project is None or written is None or written not in project.movers:
            return
        if any(arg.star == "**" or (arg.keyword is not None
                                    and arg.keyword.value == "non_blocking")
               for arg in call.args):
            return  # the caller chose: `send_to_device(batch, device, non_blocking=...)`
        flag = project.mover_flags.get(written)
        given = None if flag is None else nth_argument(call, *flag)
        if given is not None and not (isinstance(given, cst.Name) and given.value == "False"):
            return  # the helper's own flag for `non_blocking`: `cuda(x, True, True)`
        imports = self.context.analysis.imports
        if any(classify_device_expr(arg.value, imports) is DeviceTarget.HOST
               for arg in call.args):
            return  # `to_device(batch, "cpu")`
        flow = self.context.analysis.dataflow
        for index, param in project.movers[written]:
            arg = nth_argument(call, index, param)
            if arg is None:
                continue
            origins = [o for o in flow.batch_origins(arg) if flow.is_steady(o)]
            if origins and self._plain_batches(origins):
                return
            if origins:
                for origin in origins:
                    self._origins[origin] = None
                self.report(call, self.helper_message.format(helper=written))
                return
            # `train_one_epoch(model, train_loader, device)`: the helper loops over the
            # loader and copies each batch; the copy is reported in its own module, the
            # loader's missing pin_memory here.
            for loader in flow.loaders_passed(arg):
                self._handed[loader] = None

    def _plain_loader(self, call: cst.Call) -> bool:
        """``LemmaDataLoader(...)``: a project class named like a DataLoader that is none (no
        DataLoader base, none built inside). It takes no ``pin_memory``, and no loader worker
        pins the batches it assembles itself."""
        project = self.context.project
        written = dotted_name(call.func)
        return project is not None and written is not None and project.is_plain_loader(written)

    def _pinning_factory(self, call: cst.Call) -> bool:
        """``NNDataLoader(dataset=ds, batch_size=32)`` where this file's ``def
        NNDataLoader(...)`` builds the DataLoader it hands out with ``pin_memory`` chosen
        inside (``pin_memory=True``, not one of its own parameters): the call is no
        DataLoader construction, the loader it returns is pinned already."""
        if not isinstance(call.func, cst.Name):
            return False
        analysis = self.context.analysis
        tree = analysis.tree
        functions = tree.functions_by_name.get(call.func.value, ())
        if not functions:
            return False
        for function in functions:
            params = {p.name.value for p in (*function.params.params,
                                             *function.params.kwonly_params,
                                             *function.params.posonly_params)}
            loaders = [node for node in tree.walk(function.body) if isinstance(node, cst.Call)
                       and analysis.dataflow.is_dataloader_call(node)]
            if not loaders:
                return False
            for loader in loaders:
                chosen = [a.value for a in loader.args
                          if a.keyword is not None and a.keyword.value == "pin_memory"]
                if not chosen or (isinstance(chosen[0], cst.Name)
                                  and chosen[0].value in params):
                    return False
        return True

    def _plain_batches(self, origins: list[BatchOrigin]) -> bool:
        """Every loader behind ``origins`` is such a class: its batches are built by the
        class itself in pageable memory, nothing an asynchronous copy could overlap."""
        loaders = self.context.analysis.dataflow.loaders_feeding_origins(dict.fromkeys(origins))
        return bool(loaders) and all(self._plain_loader(call) for call in loaders)

    def _optional_move(self, call: cst.Call) -> bool:
        """``if device is not None: x = x.to(device)`` where ``device=None`` is the
        parameter's default: the move is an option the caller may never take."""
        arg = device_argument(call)
        if not isinstance(arg, cst.Name):
            return False
        tree = self.context.analysis.tree
        function = tree.enclosing_function(call)
        if function is None:
            return False
        params = [*function.params.params, *function.params.kwonly_params,
                  *function.params.posonly_params]
        if not any(p.name.value == arg.value and isinstance(p.default, cst.Name)
                   and p.default.value == "None" for p in params):
            return False
        for anc in tree.ancestors(call):
            if anc is function:
                return False
            if isinstance(anc, cst.If) and any(
                    isinstance(n, cst.Name) and n.value == arg.value
                    for n in (anc.test, *tree.walk(anc.test))):
                return True
        return False

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._origins and not self._handed:
            return
        flow = self.context.analysis.dataflow
        loaders = dict.fromkeys(flow.loaders_feeding_origins(self._origins))
        loaders.update(self._handed)
        for call in loaders:
            if (
                has_keyword(call, "pin_memory")
                or self._plain_loader(call)
                or self._pinning_factory(call)
                or has_star_args(call)
                or positional_count(call) >= _PIN_MEMORY_POSITION
                or in_ci_branch(call, self.context.analysis.tree)
            ):
                continue
            self.report(call, self.pin_message)

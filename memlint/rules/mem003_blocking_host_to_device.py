"""MEM003 blocking-host-to-device: DataLoader batches copied to CUDA synchronously."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from memlint.analysis.dataflow import DeviceTarget, has_non_blocking, transfer_method
from memlint.diagnostics import FixSafety
from memlint.edits import append_arg, has_keyword, has_star_args, keyword_arg, positional_count
from memlint.rules.base import Fix, Invalid, Rule, Valid

if TYPE_CHECKING:
    from memlint.context import FileContext

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
# pin_memory, ...): eight positional arguments reach pin_memory.
_PIN_MEMORY_POSITION = 8


class BlockingHostToDevice(Rule):
    """
    ## What it does
    Flags a loop over a DataLoader that copies its batch to a CUDA device without
    ``non_blocking=True`` (reported at the ``.to()`` / ``.cuda()`` call), and a
    ``DataLoader(...)`` whose batches the same file copies to CUDA but which does not pass
    ``pin_memory=True`` (reported at the ``DataLoader`` call).

    ## Why is this bad?
    A copy from pageable host memory makes the host wait until the data has reached the GPU,
    so the next batch cannot be prepared while the GPU computes. With pinned batches
    (``pin_memory=True``) and ``non_blocking=True`` the copy is queued on the CUDA stream and
    overlaps with host work; kernels on the same stream still see the finished copy.

    Only moves to a device are reported: dtype casts (``.to(torch.float16)``),
    ``.to(other_tensor)``, copies to the host (``.cpu()``, ``.to("cpu")``, where
    ``non_blocking`` would need a later synchronisation), non-CUDA devices such as ``"mps"``,
    and scripts whose device is only ever ``"cpu"`` stay silent. A ``DataLoader`` that receives
    ``**kwargs`` may already pin memory and is not reported.

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
    pin_message = (
        "this DataLoader's batches are copied to the GPU, but it does not set "
        "`pin_memory=True`; pageable batches cannot be copied asynchronously"
    )
    # Every finding sits in, or is fed by, a loop over something named or built as a loader.
    triggers = ("loader", "Loader", "_dl", "dl_", " dl", "(dl")
    fix_safety = FixSafety.SAFE

    valid = (
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
    )
    invalid = (
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
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._moving_loops: dict[cst.For, None] = {}

    def _batch_loop(self, call: cst.Call) -> cst.For | None:
        """The DataLoader loop whose batch ``call``'s receiver holds, if any."""
        if not isinstance(call.func, cst.Attribute):
            return None
        flow = self.context.analysis.dataflow
        receiver = call.func.value
        for loop in self.context.analysis.tree.enclosing_loops(call):
            if (
                isinstance(loop, cst.For)
                and flow.is_dataloader_loop(loop)
                and flow.is_batch_data(receiver, loop)
            ):
                return None if flow.framework_places_batches(loop) else loop
        return None

    def visit_Call(self, node: cst.Call) -> None:
        if transfer_method(node) not in ("to", "cuda"):
            return
        loop = self._batch_loop(node)
        if loop is None:
            return
        target = self.context.analysis.dataflow.device_target(node)
        if not target.to_accelerator:
            return
        self._moving_loops[loop] = None
        if has_non_blocking(node):
            return
        safety = FixSafety.SAFE if target is DeviceTarget.CUDA else FixSafety.UNSAFE
        fixed = append_arg(node, keyword_arg("non_blocking", cst.Name("True")))
        self.report(node, fix=Fix(safety, {node: fixed}))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._moving_loops:
            return
        flow = self.context.analysis.dataflow
        for call in flow.loaders_feeding(self._moving_loops):
            if (
                has_keyword(call, "pin_memory")
                or has_star_args(call)
                or positional_count(call) >= _PIN_MEMORY_POSITION
            ):
                continue
            self.report(call, self.pin_message)

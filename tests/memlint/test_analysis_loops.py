"""Loop facts: training loops (directly or through helpers), DataLoader loops, targets."""

from __future__ import annotations

import textwrap

import libcst as cst

from memlint.analysis import ModuleAnalysis


def _loops(source: str) -> tuple[ModuleAnalysis, list[cst.For | cst.While]]:
    module = cst.parse_module(textwrap.dedent(source))
    analysis = ModuleAnalysis(module)
    loops = [
        n for n in analysis.tree.preorder if isinstance(n, (cst.For, cst.While))
    ]
    return analysis, loops


def test_training_loops_directly_and_through_helpers() -> None:
    analysis, loops = _loops("""
        def train_step(batch):
            inner(batch)

        def inner(batch):
            criterion(model(batch), batch.y).backward()

        for epoch in range(3):
            for batch in train_loader:
                train_step(batch)
        for x, y in enumerate(val_loader):
            model(x)
        for x in data:
            scaler.scale(loss_fn(model(x))).backward()
        while True:
            scaler.step(optimizer)
        for x in data:
            scheduler.step()
    """)
    training = [analysis.loops.is_training_loop(loop) for loop in loops]
    assert training == [True, True, False, True, True, False]
    funcs = analysis.tree.functions_by_name
    assert analysis.loops.function_trains(funcs["train_step"][0])
    assert analysis.loops.function_backprops(funcs["inner"][0])
    assert len(analysis.loops.training_callers(funcs["train_step"][0])) == 1


def test_dataloader_loops_and_targets() -> None:
    analysis, loops = _loops("""
        from torch.utils.data import DataLoader
        batches = DataLoader(ds, batch_size=8)
        for i, (x, y) in enumerate(batches):
            pass
        for x in tqdm(self.train_loader):
            pass
        for inputs, labels in dataloaders[phase]:
            pass
        for row in rows:
            pass
        while (item := queue.get()) is not None:
            pass
    """)
    assert [analysis.dataflow.is_dataloader_loop(loop) for loop in loops] == [
        True, True, True, False, False,
    ]
    assert analysis.loops.loop_targets(loops[0]) == {"i", "x", "y"}
    assert analysis.loops.loop_targets(loops[4]) == {"item"}

"""What a loop is and where its data comes from.

Contract (owned by the core-rules work; keep the public methods stable):
- ``is_training_loop(loop) -> bool``: the loop body (within its function) calls
  ``.backward()`` or ``<optimizer>.step()`` / ``scaler.step(opt)``.
- ``is_dataloader_loop(loop) -> bool``: the loop iterates a DataLoader (or a value that
  plainly is one: ``*loader*`` names, ``enumerate(loader)``, ``tqdm(loader)``).
- ``loop_targets(loop) -> set[str]``: names bound by the loop header.
"""

from __future__ import annotations

from memlint.analysis.tree import TreeIndex


class LoopAnalysis:
    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree

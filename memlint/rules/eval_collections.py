"""The visiting half shared by the rules about evaluation outputs collected batch after batch.

MEM005 (outputs kept with their graph) and MEM016 (outputs kept on the device) look at the
same places, ``preds.append(...)``, ``preds += [...]`` and ``[model(x) for x in loader]``;
they differ only in what they ask of the collected value. Not a rule module itself (its name
does not start with ``mem``), so the registry never picks this base class up.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from memlint.analysis.evaluation import Collection, EvaluationCollections
from memlint.rules.base import Rule


class EvalCollectionRule(Rule):
    """Calls :meth:`check` with every per-batch collection in evaluation code."""

    # The places looked at below, inside a loop of evaluation code or next to a loader name
    # (:class:`~memlint.analysis.evaluation.EvaluationCollections` asks for one of the two).
    code_gate = ("fact:eval-collection", "fact:loader-collection")
    # Tests collect a batch or two of toy outputs to compare: no growing evaluation run.
    skips_test_code = True

    @cached_property
    def _collections(self) -> EvaluationCollections:
        return EvaluationCollections(self.context.analysis, self.context.path)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend"):
            self._found(self._collections.collection_at(node))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._found(self._collections.collection_at(node))

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._found(self._collections.comprehension_at(node))

    def _found(self, found: Collection | None) -> None:
        if found is not None:
            self.check(found)

    def check(self, found: Collection) -> None:
        raise NotImplementedError

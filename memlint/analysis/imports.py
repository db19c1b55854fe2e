"""A cheap import-alias table: enough to know that ``t.no_grad`` or ``nn.MSELoss`` is torch's.

libcst's QualifiedNameProvider/ScopeProvider pair halves throughput; memlint rules only need
to resolve dotted names through the file's own imports.
"""

from __future__ import annotations

import libcst as cst

from memlint.vocabulary import FOREIGN_FRAMEWORKS


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts: list[str] = []
    node: cst.BaseExpression = expr
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression) -> str | None:
    return dotted_name(node)


class ImportTable:
    """Maps names bound by top-level and nested imports to the dotted path they stand for."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def add_import(self, node: cst.Import, *, fallback: bool = False) -> None:
        """``fallback``: an import in an ``except ImportError`` block, which only binds the
        names the ``try`` body did not (``try: from torch.amp ... except: from torch.cuda.amp``).
        """
        for alias in node.names:
            full = _module_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._bind(alias.asname.name.value, full, fallback)
            else:
                head = full.split(".", 1)[0]
                self._bind(head, head, fallback)

    def add_import_from(self, node: cst.ImportFrom, *, fallback: bool = False) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        base = _module_name(node.module)
        if base is None:
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self._bind(local, f"{base}.{alias.name.value}", fallback)

    def _bind(self, local: str, full: str, fallback: bool) -> None:
        if fallback:
            self.aliases.setdefault(local, full)
        else:
            self.aliases[local] = full

    def resolve(self, dotted: str) -> str:
        """Expand the head of ``dotted`` through the imports; unknown heads stay as written."""
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return dotted
        return f"{full}.{rest}" if rest else full

    def qualified_name(self, expr: cst.BaseExpression) -> str | None:
        """The import-resolved dotted name: ``F.mse_loss`` -> ``torch.nn.functional.mse_loss``."""
        dotted = dotted_name(expr)
        return None if dotted is None else self.resolve(dotted)

    def imports_torch(self) -> bool:
        return any(v == "torch" or v.startswith("torch.") for v in self.aliases.values())

    def foreign_framework(self) -> bool:
        """Is this another framework's code: a module that imports JAX, Warp, TensorFlow and
        the like (:data:`~memlint.vocabulary.FOREIGN_FRAMEWORKS`), anywhere in it, and
        nothing from torch?"""
        heads = {v.split(".", 1)[0] for v in self.aliases.values()}
        return "torch" not in heads and not heads.isdisjoint(FOREIGN_FRAMEWORKS)

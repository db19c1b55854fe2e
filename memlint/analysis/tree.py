"""One walk over the module that records parents, functions and call sites.

Rules and the other analyses ask this index structural questions (what encloses this node,
who calls this function) instead of walking the tree again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import libcst as cst

from memlint.analysis.imports import ImportTable, dotted_name

Loop = cst.For | cst.While
Scope = cst.FunctionDef | cst.Lambda | cst.Module


class _Indexer(cst.CSTVisitor):
    def __init__(self, index: TreeIndex) -> None:
        super().__init__()
        self.index = index
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        index = self.index
        if self.stack:
            index.parents[node] = self.stack[-1]
        self.stack.append(node)
        if isinstance(node, cst.Call):
            name = dotted_name(node.func)
            if name is not None:
                index.calls_by_name[name.rsplit(".", 1)[-1]].append(node)
        elif isinstance(node, cst.FunctionDef):
            index.functions_by_name[node.name.value].append(node)
        elif isinstance(node, cst.ClassDef):
            index.classes_by_name[node.name.value].append(node)
        elif isinstance(node, cst.Import):
            index.imports.add_import(node)
        elif isinstance(node, cst.ImportFrom):
            index.imports.add_import_from(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class TreeIndex:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.functions_by_name: defaultdict[str, list[cst.FunctionDef]] = defaultdict(list)
        self.classes_by_name: defaultdict[str, list[cst.ClassDef]] = defaultdict(list)
        # Calls keyed by the last part of the callee's dotted name (`self.reset_grad()` -> `reset_grad`).
        self.calls_by_name: defaultdict[str, list[cst.Call]] = defaultdict(list)
        self.imports = ImportTable()
        module.visit(_Indexer(self))

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Parents from the nearest outwards."""
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, cst.FunctionDef):
                return anc
        return None

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, cst.ClassDef):
                return anc
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> list[Loop]:
        """Loops around ``node`` inside its own function, nearest first (a loop's `else` excluded)."""
        loops: list[Loop] = []
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(anc, (cst.For, cst.While)) and child is anc.body:
                loops.append(anc)
            child = anc
        return loops

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The nearest simple or compound statement containing ``node`` (for noqa lines)."""
        for anc in [node, *self.ancestors(node)]:
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return anc
        return node

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.ancestors(node))

    def walk(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Every node below ``root`` (pre-order), without descending into nested functions or classes."""
        todo = list(reversed(root.children))
        while todo:
            node = todo.pop()
            yield node
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            todo.extend(reversed(node.children))

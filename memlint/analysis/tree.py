"""One walk over the module that records parents, functions, call sites and visiting order.

Rules and the other analyses ask this index structural questions (what encloses this node,
who calls this function) instead of walking the tree again.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator

import libcst as cst

from memlint.analysis.imports import ImportTable, dotted_name

Loop = cst.For | cst.While
Scope = cst.FunctionDef | cst.Lambda | cst.Module


class _FieldRecorder(cst.CSTVisitor):
    """Learns which fields of a node type hold children, in the order libcst visits them.

    libcst calls ``on_visit_attribute`` for every child field, even empty ones, so one
    shallow pass over any instance gives the full order for its type.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if attribute not in self.fields:
            self.fields.append(attribute)


_CHILD_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def _learn_child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    recorder = _FieldRecorder()
    # The only hook libcst offers for the field order; it rebuilds the node once per type.
    node._visit_and_replace_children(recorder)
    # A few fields are skipped, hook included, when they are None (an f-string expression's
    # ``format_spec``); libcst visits them last, so they go last here.
    skipped = [
        f.name for f in dataclasses.fields(node)
        if f.name not in recorder.fields and getattr(node, f.name) is None
    ]
    fields = (*recorder.fields, *skipped)
    _CHILD_FIELDS[type(node)] = fields
    return fields


# Node classes seen so far. CSTNode is an ABC, and ``isinstance`` against an ABC is slow
# enough to show in profiles when asked for every field of every node.
_NODE_TYPES: set[type] = set()


# Leaves that only hold spaces and line breaks: no rule or analysis asks about them (comments
# live in other nodes), and they are about half of a module's nodes.
LAYOUT_LEAVES: frozenset[type] = frozenset({cst.SimpleWhitespace, cst.Newline})


def _is_node_type(value_type: type) -> bool:
    if value_type in LAYOUT_LEAVES:
        return False
    if issubclass(value_type, cst.CSTNode):
        _NODE_TYPES.add(value_type)
        return True
    return False


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without its cost, and without the layout leaves.

    ``CSTNode.children`` and ``CSTNode.visit`` rebuild every node they pass through; reading
    the child fields directly is about three times faster and yields the same nodes in the
    same (source) order.
    """
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _learn_child_fields(node)
    out: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            out.extend(value)
        elif value_type in _NODE_TYPES or _is_node_type(value_type):
            out.append(value)
    return out


# Nodes that open a scope of their own. libcst node classes are final, and an exact type test
# is several times cheaper than ``isinstance`` against them (they are ABCs).
_SCOPE_TYPES: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


class TreeIndex:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.functions_by_name: defaultdict[str, list[cst.FunctionDef]] = defaultdict(list)
        self.classes_by_name: defaultdict[str, list[cst.ClassDef]] = defaultdict(list)
        # Calls keyed by the callee's last name (`self.reset_grad()` -> `reset_grad`), also
        # when the receiver is an expression (`f(x).backward()` -> `backward`).
        self.calls_by_name: defaultdict[str, list[cst.Call]] = defaultdict(list)
        self.imports = ImportTable()
        # Every node in libcst's visiting order; ``subtree_end[i]`` is the index just past the
        # last descendant of ``preorder[i]``. The engine dispatches rules from these lists, so
        # a file is walked once.
        self.preorder: list[cst.CSTNode] = []
        self.subtree_end: list[int] = []
        self._build(module)

    def _build(self, root: cst.CSTNode) -> None:
        parents = self.parents
        preorder = self.preorder
        ends = self.subtree_end
        call_t, func_t, class_t = cst.Call, cst.FunctionDef, cst.ClassDef
        import_t, import_from_t = cst.Import, cst.ImportFrom
        # Pending work: a node with its parent, or the preorder index of a node whose
        # subtree is finished (an int).
        todo: list[tuple[cst.CSTNode, cst.CSTNode | None] | int] = [(root, None)]
        while todo:
            item = todo.pop()
            if type(item) is int:
                ends[item] = len(preorder)
                continue
            node, parent = item  # type: ignore[misc]  # not an int: checked above
            if parent is not None:
                parents[node] = parent
            index = len(preorder)
            preorder.append(node)
            ends.append(index + 1)
            kind = type(node)
            if kind is call_t:
                assert isinstance(node, cst.Call)
                func = node.func
                if type(func) is cst.Attribute:
                    # `scaler.scale(loss).backward()` has no dotted name but is a backward call.
                    self.calls_by_name[func.attr.value].append(node)
                else:
                    name = dotted_name(func)
                    if name is not None:
                        self.calls_by_name[name].append(node)
            elif kind is func_t:
                assert isinstance(node, cst.FunctionDef)
                self.functions_by_name[node.name.value].append(node)
            elif kind is class_t:
                assert isinstance(node, cst.ClassDef)
                self.classes_by_name[node.name.value].append(node)
            elif kind is import_t:
                assert isinstance(node, cst.Import)
                self.imports.add_import(node, fallback=_in_except(node, parents))
            elif kind is import_from_t:
                assert isinstance(node, cst.ImportFrom)
                self.imports.add_import_from(node, fallback=_in_except(node, parents))
            children = child_nodes(node)
            if children:
                todo.append(index)
                todo.extend([(child, node) for child in reversed(children)])

    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The direct children of ``node`` in source order (a cheap ``node.children``)."""
        return child_nodes(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Parents from the nearest outwards."""
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        parents = self.parents
        current = parents.get(node)
        while current is not None:
            if type(current) is cst.FunctionDef:
                return current
            current = parents.get(current)
        return None

    def qualname(self, node: cst.FunctionDef | cst.ClassDef) -> str:
        """``Cls.method``, ``outer.inner``: the name the project model knows it by."""
        names = [node.name.value]
        for anc in self.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
                names.append(anc.name.value)
        return ".".join(reversed(names))

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for anc in self.ancestors(node):
            if type(anc) is cst.ClassDef:
                return anc
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> list[Loop]:
        """Loops around ``node`` inside its own function, nearest first.

        A loop's ``else`` block is not inside the loop.
        """
        loops: list[Loop] = []
        child = node
        for anc in self.ancestors(node):
            kind = type(anc)
            if kind in _SCOPE_TYPES:
                break
            if (kind is cst.For or kind is cst.While) and child is anc.body:  # type: ignore[attr-defined]
                loops.append(anc)  # type: ignore[arg-type]
            child = anc
        return loops

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The nearest simple or compound statement containing ``node`` (for noqa lines)."""
        for anc in [node, *self.ancestors(node)]:
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return anc
        return node

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        parents = self.parents
        current: cst.CSTNode | None = node
        while current is not None:
            if current is container:
                return True
            current = parents.get(current)
        return False

    def walk(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Every node below ``root`` (pre-order), not entering nested functions or classes."""
        todo = child_nodes(root)
        todo.reverse()
        while todo:
            node = todo.pop()
            yield node
            if type(node) in _SCOPE_TYPES:
                continue
            children = child_nodes(node)
            children.reverse()
            todo.extend(children)


def _in_except(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """Is this import statement directly in an ``except`` block (a fallback import)?"""
    line = parents.get(node)
    block = None if line is None else parents.get(line)
    return block is not None and isinstance(parents.get(block), cst.ExceptHandler)

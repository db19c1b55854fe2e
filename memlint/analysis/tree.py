"""One walk over the module that records parents, functions, call sites and visiting order.

Rules and the other analyses ask this index structural questions (what encloses this node,
who calls this function) instead of walking the tree again.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from operator import attrgetter
from typing import TypeVar

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


# Leaves that only hold spaces and line breaks: no rule or analysis asks about them (comments
# live in other nodes), and they are about half of a module's nodes.
LAYOUT_LEAVES: frozenset[type] = frozenset({cst.SimpleWhitespace, cst.Newline})

# Punctuation and operators. Rules read an operator through its expression
# (``node.operator``) and never visit one; in a tree without layout (memlint.fastcst) they
# hold nothing else, and left out of its index they are a quarter fewer nodes to walk,
# record and dispatch. In libcst's own tree they stay: the space after a comma or a bracket
# may hold comments.
TOKENS: tuple[type[cst.CSTNode], ...] = (
    cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen,
    cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
    cst.RightCurlyBrace, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp,
    cst.BaseAugOp,
)


# Every node type of the TOKENS families.
TOKEN_TYPES: frozenset[type] = frozenset(
    value for value in map(cst.__dict__.get, dir(cst))
    if isinstance(value, type) and issubclass(value, TOKENS))

# Every node type the index of a tree without layout leaves out.
LEFT_OUT: frozenset[type] = LAYOUT_LEAVES | TOKEN_TYPES

# For every type met in a child field: is a value of it a child to keep? Known for the types
# seen so far; one table for trees with layout, one for trees without. CSTNode is an ABC, and
# ``issubclass`` against an ABC is slow enough to show in profiles when asked for every field
# of every node (strings, None and sentinels included).
_KEPT: dict[type, bool] = {}
_KEPT_BARE: dict[type, bool] = {}


def _is_kept_type(value_type: type, layout: bool) -> bool:
    left_out = LAYOUT_LEAVES if layout else LEFT_OUT
    kept = value_type not in left_out and issubclass(value_type, cst.CSTNode)
    (_KEPT if layout else _KEPT_BARE)[value_type] = kept
    return kept


def child_nodes(node: cst.CSTNode, layout: bool = True) -> list[cst.CSTNode]:
    """``node.children`` without its cost, and without the layout leaves (``layout`` False:
    without the types in :data:`LEFT_OUT`).

    ``CSTNode.children`` and ``CSTNode.visit`` rebuild every node they pass through; reading
    the child fields directly (all of a type's at once, through one ``attrgetter``) is about
    three times faster and yields the same nodes in the same (source) order.
    """
    getter = _CHILD_GETTERS.get(type(node))
    if getter is None:
        getter = _child_getter(node)
    out: list[cst.CSTNode] = []
    kept = _KEPT if layout else _KEPT_BARE
    for value in getter(node):
        value_type = type(value)
        if value_type is tuple or value_type is list:
            out.extend(value)  # type: ignore[arg-type]  # a sequence of nodes
        else:
            keep = kept.get(value_type)
            if keep is None:
                keep = _is_kept_type(value_type, layout)
            if keep:
                out.append(value)  # type: ignore[arg-type]  # a node: by the type test
    return out


# Per node type: a function giving the values of its child fields, in visiting order.
_CHILD_GETTERS: dict[type[cst.CSTNode], Callable[[cst.CSTNode], tuple[object, ...]]] = {}


def _child_getter(node: cst.CSTNode) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    fields = _CHILD_FIELDS.get(type(node)) or _learn_child_fields(node)
    getter: Callable[[cst.CSTNode], tuple[object, ...]]
    if len(fields) == 1:
        one = attrgetter(fields[0])
        getter = lambda n: (one(n),)  # noqa: E731  # attrgetter of one field gives no tuple
    elif fields:
        getter = attrgetter(*fields)
    else:
        getter = lambda n: ()  # noqa: E731
    _CHILD_GETTERS[type(node)] = getter
    return getter


def class_methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """The methods defined directly in a class body."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [s for s in body if isinstance(s, cst.FunctionDef)]


def last_child(node: cst.CSTNode) -> cst.CSTNode | None:
    """``node.children[-1]`` (layout leaves included) without rebuilding every child."""
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _learn_child_fields(node)
    for name in reversed(fields):
        value = getattr(node, name)
        if type(value) is tuple or type(value) is list:
            if value:
                return value[-1]  # type: ignore[no-any-return]  # a sequence of nodes
        elif isinstance(value, cst.CSTNode):
            return value
    return None


# Nodes that open a scope of their own. libcst node classes are final, and an exact type test
# is several times cheaper than ``isinstance`` against them (they are ABCs).
_SCOPE_TYPES: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


_UNKNOWN = object()

_D = TypeVar("_D", cst.FunctionDef, cst.ClassDef)


class TreeIndex:
    """``layout``: the tree holds whitespace and comments (libcst's parse); False for one
    built without (:mod:`memlint.fastcst`), whose tokens are left out too."""

    def __init__(self, module: cst.Module, layout: bool = True) -> None:
        self.module = module
        self.layout = layout
        # id(node) -> the node's parent (the module has none), keyed by id because libcst
        # hashes nodes in Python. Its order is not the visiting order: iterate ``preorder``.
        self.parents: dict[int, cst.CSTNode] = {}
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
        # id(node) -> its index in ``preorder``: a subtree is a slice of it (``walk``).
        self._order: dict[int, int] = {}
        # enclosing_function's answers: analyses ask it for the same nodes again and again.
        self._functions: dict[int, cst.FunctionDef | None] = {}
        # name -> the ``preorder`` index of each of ``calls_by_name[name]`` (``calls_within``)
        self._call_positions: dict[str, list[int]] = {}
        self._bases_memo: dict[str, frozenset[str]] = {}
        self._sharing_memo: dict[tuple[str, str], bool] = {}
        self._classes_in_force: dict[str, list[cst.ClassDef] | None] = {}
        # id(scope) -> dotted target -> its assignments in the scope (``assignments_to``)
        self._assignments: dict[int, defaultdict[str, list[cst.Assign]]] = {}
        self._build(module)

    def _build(self, root: cst.CSTNode) -> None:
        parents = self.parents
        preorder = self.preorder
        ends = self.subtree_end
        order = self._order
        call_t, func_t, class_t = cst.Call, cst.FunctionDef, cst.ClassDef
        import_t, import_from_t = cst.Import, cst.ImportFrom
        # Pending work: a node (its parent already recorded), or the preorder index of a node
        # whose subtree is finished (an int).
        todo: list[cst.CSTNode | int] = [root]
        pop, push, extend = todo.pop, todo.append, todo.extend
        kinds = frozenset({call_t, func_t, class_t, import_t, import_from_t})
        layout = self.layout
        while todo:
            node = pop()
            if type(node) is int:
                ends[node] = len(preorder)
                continue
            index = len(preorder)
            order[id(node)] = index
            preorder.append(node)  # type: ignore[arg-type]  # not an int: checked above
            ends.append(index + 1)
            kind = type(node)
            if kind in kinds:
                self._index(node, kind)  # type: ignore[arg-type]
            children = child_nodes(node, layout)  # type: ignore[arg-type]
            if children:
                parents.update(dict.fromkeys(map(id, children), node))  # type: ignore[arg-type]
                push(index)
                children.reverse()
                extend(children)

    def _index(self, node: cst.CSTNode, kind: type[cst.CSTNode]) -> None:
        """Calls by callee name, definitions by name, imports: the by-name indexes."""
        if kind is cst.Call:
            assert isinstance(node, cst.Call)
            func = node.func
            if type(func) is cst.Attribute:
                # `scaler.scale(loss).backward()` has no dotted name but is a backward call.
                self.calls_by_name[func.attr.value].append(node)
            else:
                name = dotted_name(func)
                if name is not None:
                    self.calls_by_name[name].append(node)
        elif kind is cst.FunctionDef:
            assert isinstance(node, cst.FunctionDef)
            self.functions_by_name[node.name.value].append(node)
        elif kind is cst.ClassDef:
            assert isinstance(node, cst.ClassDef)
            self.classes_by_name[node.name.value].append(node)
        elif kind is cst.Import:
            assert isinstance(node, cst.Import)
            self.imports.add_import(node, fallback=_in_except(node, self.parents))
        elif kind is cst.ImportFrom:
            assert isinstance(node, cst.ImportFrom)
            self.imports.add_import_from(node, fallback=_in_except(node, self.parents))

    def calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls by ``function``'s name that can run this definition.

        All of them, except where a name has several definitions that can be told apart.
        A module that defines a function more than once at its top level, each
        unconditionally: a bare-name call runs the definition in force, the last one before
        it for a call at module level, the module's last for a call inside a function (which
        runs after the module is loaded). Methods of several classes: ``self.step()`` in a
        class that defines ``step`` runs its own, or that of a class that can share its
        instances (a subclass, a class deriving from both; by base names). Without this, a
        file that repeats a script (``def train`` forty times) asks forty callers of each.
        """
        resolved = self._calls_by_definition.get(id(function))
        if resolved is not None:
            return resolved
        return self.calls_by_name.get(function.name.value, [])

    def calls_within(self, node: cst.CSTNode, name: str) -> list[cst.Call]:
        """The calls by this name inside ``node`` (nested scopes included), in source order:
        a slice of ``calls_by_name``, which the index fills in visiting order. For questions
        asked per class or function, which would otherwise scan the whole file's calls."""
        calls = self.calls_by_name.get(name)
        if not calls:
            return []
        start = self._order.get(id(node))
        if start is None or self.preorder[start] is not node:
            return [c for c in calls if self.is_inside(c, node)]
        positions = self._call_positions.get(name)
        if positions is None:
            positions = self._call_positions[name] = [self._order[id(c)] for c in calls]
        return calls[bisect_left(positions, start):bisect_left(positions,
                                                                self.subtree_end[start])]

    @cached_property
    def _calls_by_definition(self) -> dict[int, list[cst.Call]]:
        """``calls_of`` for the definitions it tells apart, by id."""
        resolved: dict[int, list[cst.Call]] = {}
        for name, functions in self.functions_by_name.items():
            if len(functions) > 1:
                calls = self.calls_by_name.get(name, [])
                self._resolve_top_level(functions, calls, resolved)
                self._resolve_methods(functions, calls, resolved)
        return resolved

    def _resolve_top_level(self, functions: list[cst.FunctionDef], calls: list[cst.Call],
                           resolved: dict[int, list[cst.Call]]) -> None:
        top = self._in_force_order(functions)
        if top is None:
            return
        lists: list[list[cst.Call]] = [[] for _ in top]
        for call in calls:
            # An attribute (``module.train()``, ``model.train()``) at most runs the one in force.
            before = self._in_force(top, call)
            for found in (lists if before < 0 else (lists[before],)):
                found.append(call)
        for function, found in zip(top, lists, strict=True):
            resolved[id(function)] = found

    def _in_force_order(self, definitions: Sequence[_D]) -> list[_D] | None:
        """The definitions of one name at the module's top level, in order, when there are
        several and none elsewhere at module scope (in an ``if`` or ``try``); else None."""
        module, parents = self.module, self.parents
        top = [d for d in definitions if parents.get(id(d)) is module]
        if len(top) < 2 or any(parents.get(id(d)) is not module and self._at_module_scope(d)
                               for d in definitions):
            return None
        return top

    def _in_force(self, top: Sequence[cst.CSTNode], at: cst.CSTNode) -> int:
        """Which of ``top`` (:meth:`_in_force_order`) a reference at ``at`` means: the last
        one from inside a function, the last one before it at module level; -1 if none is
        defined yet there."""
        if not self._at_module_scope(at):
            return len(top) - 1
        order = self._order
        return bisect_right([order[id(d)] for d in top], order[id(at)]) - 1

    def _resolve_methods(self, functions: list[cst.FunctionDef], calls: list[cst.Call],
                         resolved: dict[int, list[cst.Call]]) -> None:
        owned = [(f, c) for f in functions if (c := self._owner(f)) is not None]
        if len(owned) < 2:
            return
        by_owner_name: dict[str, list[int]] = {}
        for i, (_, owner) in enumerate(owned):
            by_owner_name.setdefault(owner.name.value, []).append(i)
        owners = {id(c): i for i, (_, c) in enumerate(owned)}
        in_functions: list[int] | None = None  # targets of any other call inside a function
        lists: list[list[cst.Call]] = [[] for _ in owned]
        for call in calls:
            func = call.func
            receiver = func.value if type(func) is cst.Attribute else None
            caller = None if receiver is None else self.enclosing_class(call)
            targets: Iterable[int]
            if caller is not None and type(receiver) is cst.Name and receiver.value in (
                    "self", "cls"):
                # Its own method, or one of a class that can share its instances.
                own = owners.get(id(caller))
                targets = [i for name, found in by_owner_name.items()
                           if self._names_share(name, caller.name.value)
                           for i in found if i != own]
                if own is not None:
                    targets.append(own)
            elif (caller is not None and type(receiver) is cst.Call
                  and type(receiver.func) is cst.Name and receiver.func.value == "super"):
                bases = self._base_names(caller.name.value)  # ``super().step()``
                targets = [i for name, found in by_owner_name.items() if name in bases
                           for i in found]
            elif not self._at_module_scope(call):
                if in_functions is None:
                    in_functions = [i for i, (_, owner) in enumerate(owned)
                                    if self._class_in_force(owner, call)]
                targets = in_functions
            else:
                targets = [i for i, (_, owner) in enumerate(owned)
                           if self._class_in_force(owner, call)]
            for i in targets:
                lists[i].append(call)
        for (function, _), found in zip(owned, lists, strict=True):
            resolved[id(function)] = found

    def _class_in_force(self, owner: cst.ClassDef, at: cst.CSTNode) -> bool:
        """Can code at ``at`` hold an instance of ``owner``? Not when the module defines
        another class of that name at its top level that is in force there."""
        name = owner.name.value
        if name not in self._classes_in_force:
            self._classes_in_force[name] = self._in_force_order(self.classes_by_name[name])
        top = self._classes_in_force[name]
        if top is None or all(c is not owner for c in top):
            return True
        at_index = self._in_force(top, at)
        return at_index < 0 or top[at_index] is owner

    def _owner(self, function: cst.FunctionDef) -> cst.ClassDef | None:
        """The class ``function`` is a method of, if it is one."""
        block = self.parents.get(id(function))
        owner = None if block is None else self.parents.get(id(block))
        return owner if type(owner) is cst.ClassDef else None

    def _names_share(self, name: str, other: str) -> bool:
        """Can a method of a class called ``name`` run on ``self`` in a class called
        ``other`` (another class)? When one derives from the other or a class of the file
        from both, by name. (Two classes of one name, a script pasted twice, share nothing
        unless a class derives from that name.)"""
        pair = (name, other)
        known = self._sharing_memo.get(pair)
        if known is None:
            known = self._sharing_memo[pair] = (
                other in self._base_names(name) or name in self._base_names(other)
                or any(name in bases and other in bases
                       for bases in map(self._base_names, self.classes_by_name)))
        return known

    def _base_names(self, name: str) -> frozenset[str]:
        """The names of the classes that classes called ``name`` derive from, transitively
        through the file's classes (a base's last dotted name: ``nn.Module`` -> ``Module``,
        a generic's own: ``BaseTrainer[Config]`` -> ``BaseTrainer``)."""
        known = self._bases_memo.get(name)
        if known is None:
            found: set[str] = set()
            todo = [name]
            while todo:
                for cls in self.classes_by_name.get(todo.pop(), ()):
                    for base in cls.bases:
                        value = base.value
                        while type(value) is cst.Subscript:
                            value = value.value
                        if type(value) is cst.Attribute:
                            value = value.attr
                        if type(value) is cst.Name and value.value not in found:
                            found.add(value.value)
                            todo.append(value.value)
            known = self._bases_memo[name] = frozenset(found)
        return known

    def _at_module_scope(self, node: cst.CSTNode) -> bool:
        """Runs as the module loads: in no function or lambda (a class body counts)."""
        return not any(type(a) is cst.FunctionDef or type(a) is cst.Lambda
                       for a in self.ancestors(node))

    def assignments_to(self, name: str, at: cst.CSTNode) -> list[cst.Assign]:
        """The assignments to the dotted ``name`` in the scope it lives in as seen from
        ``at``: the class's methods for ``self.x``, else the function around ``at`` (the
        module at the top level)."""
        scope: cst.CSTNode | None = (self.enclosing_class(at) if name.startswith("self.")
                                     else self.enclosing_function(at))
        root = scope if scope is not None else self.module
        by_name = self._assignments.get(id(root))
        if by_name is None:
            # Read once per scope: rules ask it of every call that might be a forward.
            by_name = self._assignments[id(root)] = defaultdict(list)
            roots = [root, *class_methods(root)] if isinstance(root, cst.ClassDef) else [root]
            for node in (n for r in roots for n in self.walk(r)):
                if type(node) is cst.Assign:
                    for target in dict.fromkeys(dotted_name(t.target) for t in node.targets):
                        if target is not None:
                            by_name[target].append(node)
        return list(by_name.get(name, ()))

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Parents from the nearest outwards."""
        parents = self.parents
        current = parents.get(id(node))
        while current is not None:
            yield current
            current = parents.get(id(current))

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        key = id(node)
        known = self._functions.get(key, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]  # a FunctionDef or None
        parents = self.parents
        current = parents.get(key)
        while current is not None and type(current) is not cst.FunctionDef:
            current = parents.get(id(current))
        assert current is None or isinstance(current, cst.FunctionDef)
        self._functions[key] = current
        return current

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
        order = self._order
        start, at = order.get(id(container)), order.get(id(node))
        if (start is not None and at is not None and self.preorder[start] is container
                and self.preorder[at] is node):
            return start <= at < self.subtree_end[start]  # a subtree is a slice of preorder
        parents = self.parents
        current: cst.CSTNode | None = node
        while current is not None:
            if current is container:
                return True
            current = parents.get(id(current))
        return False

    def walk(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Every node below ``root`` (pre-order), not entering nested functions or classes.

        An indexed subtree is a slice of ``preorder``, read without building child lists;
        a node from outside the index (built by a rule) is walked through its fields."""
        start = self._order.get(id(root))
        if start is not None and self.preorder[start] is root:
            preorder, ends, scopes = self.preorder, self.subtree_end, _SCOPE_TYPES
            i, stop = start + 1, ends[start]
            while i < stop:
                node = preorder[i]
                yield node
                i = ends[i] if type(node) in scopes else i + 1
            return
        todo = child_nodes(root, self.layout)
        todo.reverse()
        while todo:
            node = todo.pop()
            yield node
            if type(node) in _SCOPE_TYPES:
                continue
            children = child_nodes(node, self.layout)
            children.reverse()
            todo.extend(children)


def _in_except(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """Is this import statement directly in an ``except`` block (a fallback import)?"""
    line = parents.get(id(node))
    block = None if line is None else parents.get(id(line))
    return block is not None and isinstance(parents.get(id(block)), cst.ExceptHandler)

"""Is this test code? Forwards and copies there run on toy data, once.

Several rules leave test code alone (``skips_test_code``: the scan drops them for such a file
before it is parsed, :func:`memlint.gates.for_path`): a smoke forward in a test is no
evaluation run, and a batch copied in a test loop is no input pipeline. A file is judged
from its path alone: pytest's own test modules (``test_*.py``, ``*_test.py``,
``conftest.py``), modules directly inside a ``tests``/``test``/``testing`` folder, and
``testing_*`` helper modules. Inside any file, the branch of an ``if`` that asks whether it
runs on a CI service (``if "CI" in os.environ:``, as tutorials and notebooks do to swap in a
few random samples) is test code too, and so is a module's own self-check: a module-level
``_test()`` (or ``_test_*``) that the module's ``if __name__ == "__main__":`` block runs, as
model-zoo modules do to build each network and assert its output shape on a random input,
or a parameterless module-level ``test()`` that makes up its inputs the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

# Judged from the path alone, so the project model (which must not import libcst) asks too.
from memlint.vocabulary import is_pytest_module as is_pytest_module
from memlint.vocabulary import is_test_code as is_test_code

if TYPE_CHECKING:
    from memlint.analysis.tree import TreeIndex


# Environment variables CI services set, which scripts test to shrink their data.
_CI_VARIABLES = frozenset({"CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "GITLAB_CI"})


def _asks_for_ci(test: cst.BaseExpression, tree: TreeIndex) -> bool:
    """``"CI" in os.environ``, ``os.environ.get("CI")``, ``os.getenv("CI")`` and the like."""
    strings = {n.evaluated_value for n in (test, *tree.walk(test))
               if isinstance(n, cst.SimpleString)}
    names = {n.value for n in (test, *tree.walk(test)) if isinstance(n, cst.Name)}
    return bool(strings & _CI_VARIABLES) and bool(names & {"environ", "getenv"})


def in_ci_branch(node: cst.CSTNode, tree: TreeIndex) -> bool:
    """Does ``node`` run only when the script finds itself on a CI service?"""
    child = node
    for anc in tree.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body and _asks_for_ci(anc.test, tree):
            return True
        child = anc
    return False


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = (test.left, target.comparator)
    names = {s.value for s in sides if isinstance(s, cst.Name)}
    strings = {s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)}
    return names == {"__name__"} and strings == {"__main__"}


# Torch factories a self-check makes its inputs with.
_MADE_UP_INPUTS = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
    "zeros", "ones", "empty", "full",
})


def _iterates_over_data(function: cst.FunctionDef, tree: TreeIndex) -> bool:
    """Does ``function`` loop over anything but a literal list or ``range(...)``?"""
    for node in tree.walk(function):
        if isinstance(node, cst.While):
            return True
        if isinstance(node, (cst.For, cst.CompFor)):
            it = node.iter
            if isinstance(it, (cst.List, cst.Tuple)):
                continue
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and (
                    it.func.value == "range"):
                continue
            return True
    return False


def _makes_up_inputs(function: cst.FunctionDef, tree: TreeIndex) -> bool:
    """Does ``function`` build a tensor with a torch factory (``torch.randn(2, 10)``)?"""
    for name in _MADE_UP_INPUTS:
        for call in tree.calls_by_name.get(name, ()):
            func = call.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
                continue
            if tree.imports.qualified_name(func.value) != "torch":
                continue
            if any(anc is function for anc in tree.ancestors(call)):
                return True
    return False


def _is_parameterless_smoke_test(function: cst.FunctionDef, tree: TreeIndex) -> bool:
    """A module-level ``def test():`` that takes nothing, makes up its own inputs with torch
    factories, loops over no data and switches no model to eval, called from no function
    (only from the module's top level, or not at all: ``# test()``), as model-zoo and sampler
    modules keep beside their classes (``net = ResNet18(); y = net(torch.randn(2, 3, 32,
    32)); print(y.size())``). A tutorial's ``def test():`` over a global ``test_loader``
    loops over data; one that switches a model to eval stays evaluation code.
    """
    if function.name.value != "test":
        return False
    params = function.params
    if params.params or params.posonly_params or params.kwonly_params or (
            isinstance(params.star_arg, cst.Param)) or params.star_kwarg is not None:
        return False
    for call in tree.calls_by_name.get("test", ()):
        if tree.enclosing_function(call) is not None:
            return False
    for call in tree.calls_by_name.get("eval", ()):
        if any(anc is function for anc in tree.ancestors(call)):
            return False  # switches a model to evaluation: judged as evaluation code
    return _makes_up_inputs(function, tree) and not _iterates_over_data(function, tree)


def is_module_self_test(function: cst.FunctionDef, tree: TreeIndex) -> bool:
    """Is ``function`` the module's own self-check, run from its ``__main__`` block?

    A module-level function named ``_test`` or ``_test_*`` (private: no test runner
    collects it) that a statement under the module's ``if __name__ == "__main__":``
    calls. Its forwards run once on inputs it makes up, to check shapes. So does a
    parameterless ``test()`` that makes up its inputs with torch factories and loops over
    no data, called from no function (:func:`_is_parameterless_smoke_test`).
    """
    name = function.name.value
    if tree.parent(function) is not tree.module:
        return False
    if _is_parameterless_smoke_test(function, tree):
        return True
    if name != "_test" and not name.startswith("_test_"):
        return False
    for call in tree.calls_by_name.get(name, ()):
        for anc in tree.ancestors(call):
            if (isinstance(anc, cst.If) and _is_main_guard(anc.test)
                    and tree.parent(anc) is tree.module):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
    return False

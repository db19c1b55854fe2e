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
model-zoo modules do to build each network and assert its output shape on a random input.
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


def is_module_self_test(function: cst.FunctionDef, tree: TreeIndex) -> bool:
    """Is ``function`` the module's own self-check, run from its ``__main__`` block?

    A module-level function named ``_test`` or ``_test_*`` (private: no test runner
    collects it) that a statement under the module's ``if __name__ == "__main__":``
    calls. Its forwards run once on inputs it makes up, to check shapes.
    """
    name = function.name.value
    if name != "_test" and not name.startswith("_test_"):
        return False
    if tree.parent(function) is not tree.module:
        return False
    for call in tree.calls_by_name.get(name, ()):
        for anc in tree.ancestors(call):
            if (isinstance(anc, cst.If) and _is_main_guard(anc.test)
                    and tree.parent(anc) is tree.module):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
    return False

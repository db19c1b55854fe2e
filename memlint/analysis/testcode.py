"""Is this test code? Forwards and copies there run on toy data, once.

Several rules leave test code alone (``skips_test_code``: the scan drops them for such a file
before it is parsed, :func:`memlint.gates.for_path`): a smoke forward in a test is no
evaluation run, and a batch copied in a test loop is no input pipeline. A file is judged
from its path alone: pytest's own test modules (``test_*.py``, ``*_test.py``,
``conftest.py``), modules directly inside a ``tests``/``test``/``testing`` folder, and
``testing_*`` helper modules. Inside any file, the branch of an ``if`` that asks whether it
runs on a CI service (``if "CI" in os.environ:``, as tutorials and notebooks do to swap in a
few random samples) is test code too.
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

"""The code under test is the installed distribution, both of its packages alike.

A flat layout makes it easy to test one package from the source tree and the other from
site-packages without noticing (``tests/__init__.py`` plus pytest's default import mode put
the checkout on ``sys.path``). tox and CI set ``MEMLINT_EXPECT_INSTALLED=1`` and run from
outside the checkout: there, nothing may come from the source tree.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import distribution, entry_points
from pathlib import Path
from urllib.parse import unquote, urlparse

import memlint
import pytest_gpumem

DIST = "torch-memlint"
CHECKOUT = Path(__file__).resolve().parent.parent


def _editable_source() -> Path | None:
    """The source folder of an editable install (PEP 610's direct_url.json), else None."""
    raw = distribution(DIST).read_text("direct_url.json")
    if not raw:
        return None
    data = json.loads(raw)
    if not data.get("dir_info", {}).get("editable"):
        return None
    return Path(unquote(urlparse(data["url"]).path)).resolve()


def test_both_packages_come_from_the_installed_distribution() -> None:
    here = {Path(memlint.__file__).resolve().parent.parent,
            Path(pytest_gpumem.__file__).resolve().parent.parent}
    assert len(here) == 1, f"memlint and pytest_gpumem imported from different places: {here}"
    source = _editable_source()
    if source is not None:
        assert here == {source}
    else:
        located = Path(str(distribution(DIST).locate_file("memlint/__init__.py"))).resolve()
        assert located == Path(memlint.__file__).resolve()


def test_the_plugin_entry_point_is_the_imported_module() -> None:
    (point,) = [ep for ep in entry_points(group="pytest11")
                if ep.name == "gpumem" and ep.dist is not None and ep.dist.name == DIST]
    assert point.value == "pytest_gpumem.plugin"
    module = point.load()
    assert Path(module.__file__).resolve().parent == Path(pytest_gpumem.__file__).resolve().parent


def test_not_the_source_tree_where_an_installed_copy_is_expected() -> None:
    if os.environ.get("MEMLINT_EXPECT_INSTALLED") != "1":
        return
    assert _editable_source() is None, "an editable install is not the installed package"
    for module in (memlint, pytest_gpumem):
        path = Path(module.__file__).resolve()
        assert path.parent != CHECKOUT / module.__name__, f"{module.__name__} from the source"
        assert "site-packages" in path.parts, f"{module.__name__} imported from {path}"

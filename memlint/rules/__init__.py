"""Where rules live: one module per rule, named ``memNNN_<name>.py``, found automatically.

:func:`rule_specs` reads the generated :mod:`memlint.rules.index` and imports no rule (nor
libcst); :func:`all_rules` imports every rule module, for docs, fixes and the tests.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlint.rules.base import Rule
    from memlint.rules.spec import RuleSpec


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, ordered by code."""
    from memlint.rules.base import Rule

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("mem"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return tuple(sorted(found, key=lambda r: r.code))


def rule_specs() -> tuple[RuleSpec, ...]:
    """Every rule's spec, ordered by code, without importing the rules."""
    from memlint.rules.index import RULES

    return RULES


def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.code: rule for rule in all_rules()}

"""A memory failure in a test marked ``xfail`` is an expected failure, as pytest treats any
other failure of such a test.

pytest's own rule (``_pytest.skipping``): when a test marked ``xfail`` (with no ``raises=``)
fails in any phase, the report becomes ``xfailed``; when it passes, ``xpassed``, or a failure
``[XPASS(strict)]`` under ``strict=True``. A peak over budget, an out-of-memory error or a
leak is a failure of the test, so it turns an XPASS into an XFAIL the same way, and under
``--runxfail`` it is an ordinary memory failure. With ``raises=`` only those exceptions are
expected, so a memory failure stays a failure.
"""

from __future__ import annotations

import pytest
from _pytest.skipping import xfailed_key  # private, but stable since pytest 6.2

STRICT_XPASS = "[XPASS(strict)] "


def expected_failure(item: pytest.Item) -> str | None:
    """The xfail reason when a failure of ``item`` would be an expected one, else None."""
    if item.config.option.runxfail:
        return None
    xfailed = item.stash.get(xfailed_key, None)
    if xfailed is None or xfailed.raises is not None:
        return None
    return str(xfailed.reason)


def is_strict_xpass(report: pytest.TestReport) -> bool:
    """A call that passed, failed only because its ``xfail(strict=True)`` expected a failure."""
    return (
        report.when == "call"
        and report.failed
        and isinstance(report.longrepr, str)
        and report.longrepr.startswith(STRICT_XPASS)
    )


def mark_expected(report: pytest.TestReport, reason: str) -> None:
    """Turn a report the memory check failed into pytest's xfailed report."""
    report.outcome = "skipped"
    report.wasxfail = reason

"""JUnit XML: one test suite per file, one failing test case per finding, so CI systems
that show test reports (GitLab, Jenkins, Azure) list memlint's findings; a clean run is
one passing case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from itertools import groupby
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo
from memlint.output.text import printable


def _xml_text(text: str) -> str:
    """XML 1.0 cannot hold control characters at all: write them as escapes."""
    return printable(text) if any(ord(c) < 32 and c not in "\t\n\r" for c in text) else text


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    count = str(len(diagnostics))
    root = ET.Element("testsuites", name="memlint", tests=count, failures=count, errors="0")
    if not diagnostics:
        suite = ET.SubElement(root, "testsuite", name="memlint", tests="1", failures="0",
                              errors="0")
        ET.SubElement(suite, "testcase", name="No problems found", classname="memlint")
    for path, group in groupby(diagnostics, key=lambda d: d.path):
        found = list(group)
        name = _xml_text(Path(path).as_posix())
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(found)),
                              failures=str(len(found)), errors="0")
        for d in found:
            case = ET.SubElement(suite, "testcase", name=f"memlint.{d.code}", classname=name,
                                 file=name, line=str(d.line))
            failure = ET.SubElement(case, "failure", message=_xml_text(d.message),
                                    type=d.code)
            failure.text = _xml_text(f"{name}:{d.location}: {d.code} {d.message}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"

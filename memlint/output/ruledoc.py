"""Rule documentation as users read it: ``memlint rule``, the rule table and SARIF metadata."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memlint.diagnostics import FixSafety
from memlint.rules.spec import RuleSpec, as_specs

if TYPE_CHECKING:
    from memlint.rules.base import Rule

_SECTION = re.compile(r"^##\s+(?P<title>.+?)\s*$", re.MULTILINE)

# Diagnostics the engine and runner emit about a file itself, not from a rule.
ENGINE_DOCS: dict[str, tuple[str, str]] = {
    "MEM996": ("io-error", "The file could not be read (permissions, a vanished file, ...)."),
    "MEM997": ("internal-error",
               "memlint failed on this file; the rest of the run went on. Please report it."),
    "MEM999": ("parse-error",
               "The file is not valid Python (or not decodable), so no rule could check it."),
}


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    summary: str
    doc: str
    default_enabled: bool
    fix_safety: FixSafety | None


def sections(doc: str) -> dict[str, str]:
    """The ``## Heading`` sections of a ruff-shaped docstring, by heading."""
    out: dict[str, str] = {}
    matches = list(_SECTION.finditer(doc))
    for i, here in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(doc)
        out[here.group("title")] = doc[here.end():end].strip()
    return out


def summary_of(doc: str) -> str:
    """The first sentence of "What it does" (or of the docstring), on one line."""
    body = sections(doc).get("What it does") or doc
    text = " ".join(body.split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def info(rule: type[Rule]) -> RuleInfo:
    import inspect

    doc = inspect.cleandoc(rule.__doc__ or "")
    return RuleInfo(rule.code, rule.name, summary_of(doc) or rule.message, doc,
                    rule.default_enabled, rule.fix_safety)


def engine_info(code: str) -> RuleInfo:
    name, text = ENGINE_DOCS[code]
    return RuleInfo(code, name, text, text, True, None)


class Catalogue(Mapping[str, RuleInfo]):
    """Every code memlint can report, rules and engine codes, by code.

    Built on first use: the docs come from the rule classes, and only some output formats
    read them, so a plain text run never imports a rule for its documentation.
    """

    def __init__(self, rules: Iterable[RuleSpec | type[Rule]]) -> None:
        self._specs = as_specs(rules)
        self._items: dict[str, RuleInfo] | None = None

    @property
    def items_by_code(self) -> dict[str, RuleInfo]:
        if self._items is None:
            out = {spec.code: info(spec.load()) for spec in self._specs}
            for code in ENGINE_DOCS:
                out.setdefault(code, engine_info(code))
            self._items = dict(sorted(out.items()))
        return self._items

    def __getitem__(self, code: str) -> RuleInfo:
        return self.items_by_code[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items_by_code)

    def __len__(self) -> int:
        return len(self.items_by_code)


def catalogue(rules: Iterable[RuleSpec | type[Rule]]) -> Catalogue:
    """Every code memlint can report, rules and engine codes, by code."""
    return Catalogue(rules)


def render_doc(item: RuleInfo) -> str:
    """The text ``memlint rule CODE`` prints: a title line, then the docstring."""
    default = "on by default" if item.default_enabled else "off by default (enable with select)"
    fix = f"fix: {item.fix_safety.value}" if item.fix_safety is not None else "no fix"
    return f"# {item.name} ({item.code})\n\n{default}; {fix}\n\n{item.doc}\n"


def render_table(items: Iterable[RuleInfo]) -> str:
    """``memlint rule --all``: one aligned row per rule."""
    header = ("code", "name", "default", "fix", "summary")
    rows = [header] + [
        (i.code, i.name, "on" if i.default_enabled else "off",
         i.fix_safety.value if i.fix_safety is not None else "-", i.summary)
        for i in items
    ]
    widths = [max(len(row[col]) for row in rows) for col in range(4)]
    lines = ["  ".join([*(row[c].ljust(widths[c]) for c in range(4)), row[4]]).rstrip()
             for row in rows]
    return "\n".join(lines) + "\n"


def render_markdown_table(items: Iterable[RuleInfo], link: str = "docs/rules/{code}.md") -> str:
    """The README's rule table: each code links to its generated documentation page."""
    lines = ["| code | name | default | fix | what it flags |", "|---|---|---|---|---|"]
    for i in items:
        fix = i.fix_safety.value if i.fix_safety is not None else "—"
        summary = i.summary.replace("|", "\\|")
        lines.append(f"| [{i.code}]({link.format(code=i.code)}) | `{i.name}` | "
                     f"{'on' if i.default_enabled else 'off'} | {fix} | {summary} |")
    return "\n".join(lines) + "\n"

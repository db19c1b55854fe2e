"""The cheap text prefilter: a rule runs on a file only if the file holds one of its triggers.

It reads raw bytes (triggers are ASCII, and Python source encodings are ASCII-compatible),
so a file that no rule applies to is neither decoded nor parsed, and it needs no libcst:
the command line applies it to rule specs before any rule class is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from itertools import pairwise
from typing import Protocol, TypeVar


class Triggered(Protocol):
    """What the prefilter reads of a rule: rule classes and rule specs both have it."""

    @property
    def triggers(self) -> tuple[str, ...]: ...

    @property
    def requires(self) -> tuple[tuple[str, ...], ...]: ...

    @property
    def trigger_pattern(self) -> bytes | None: ...


T = TypeVar("T", bound=Triggered)


def applicable_rules(text: str | bytes, rules: Iterable[T]) -> list[T]:
    """The rules whose trigger groups all match somewhere in the file, and whose pattern does
    (a pattern two rules share, MEM005's and MEM016's, is searched for once)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    searched: dict[bytes, bool] = {}

    def matches(pattern: bytes) -> bool:
        found = searched.get(pattern)
        if found is None:
            found = searched[pattern] = search(pattern, data)
        return found

    held: dict[bytes, bool] = {}

    def holds(word: bytes) -> bool:
        # Rules share words (`backward(`, `step(`): each is looked for once per file.
        found = held.get(word)
        if found is None:
            found = held[word] = word in data
        return found

    return [r for r in rules
            if all(not group or any(holds(guard) and any(holds(w) for w in words)
                                    for guard, words in group)
                   for group in _byte_groups(r.triggers, r.requires))
            and (r.trigger_pattern is None or matches(r.trigger_pattern))]


# How many places holding a part's literal prefix are tried one by one before the parts
# search the rest of the file themselves.
_TRIES = 8


def search(pattern: bytes, data: bytes) -> bool:
    """Does ``pattern`` match anywhere in ``data``? As ``re.search``, but faster.

    A pattern that opens with a choice (``\\.eval\\(|def eval``, ``(?:zeros|ones)\\(``) makes
    the regular expression engine try every alternative at every byte of the file; a
    pattern that opens with a literal lets it skip to where that literal occurs, which is
    ten times faster. So the pattern is split into its alternatives once, and it matches
    where any of them does. Each part is tried only where its literal opening occurs.
    """
    if pattern.startswith(b"(?i)") and _lowercase(pattern):
        # In any case: the same as the pattern on the lowered text, which is searched for
        # literal openings as any other (a case-blind scan tries every byte).
        pattern, data = pattern[4:], data.lower()
    groups = _alternatives(pattern)
    present = [False] * len(groups)
    for i, (prefix, guard, parts) in enumerate(groups):
        if guard >= 0 and not present[guard]:
            continue  # `Tensor(` is absent, so `FloatTensor(` is too: no need to look
        at = data.find(prefix)
        if at < 0:
            continue
        present[i] = True
        if not prefix:
            if any(part.search(data) for part in parts):
                return True
            continue
        # Every match starts with the prefix: try the parts where it occurs, rather than
        # have each part scan the whole file for it again; where it occurs often (`def `),
        # the parts' own scans from there on are cheaper than a try at each place.
        find = data.find
        for _ in range(_TRIES):
            if any(part.match(data, at) for part in parts):
                return True
            at = find(prefix, at + 1)
            if at < 0:
                break
        else:
            if any(part.search(data, at) for part in parts):
                return True
    return False


@cache
def _lowercase(pattern: bytes) -> bool:
    """Does ``(?i)rest`` match where ``rest`` matches the lowered text? Yes when ``rest``
    holds no upper-case letter (lowered text holds none, and ``\\W``, ``\\S``, ``\\B``
    would change meaning) and no flag of its own (``(?-i:...)``); bytes patterns and
    ``bytes.lower`` both fold ASCII letters only."""
    rest = pattern[4:]
    return rest == rest.lower() and _FLAGS.search(rest) is None


_FLAGS = re.compile(rb"\(\?[-a-z]")


@cache
def _alternatives(pattern: bytes) -> tuple[tuple[bytes, int, tuple[re.Pattern[bytes], ...]], ...]:
    """The pattern's alternatives, grouped by the literal text each must start with: a file
    without ``zeros(`` is not searched by the three alternatives that open with it. Shortest
    text first, each with the index of its guard: the longest earlier text inside it (-1:
    none), which a file must hold for it to be worth looking for (``Tensor(`` guards
    ``FloatTensor(`` and nine more)."""
    groups: dict[bytes, list[re.Pattern[bytes]]] = {}
    for part in split_alternatives(pattern):
        groups.setdefault(literal_prefix(part), []).append(re.compile(part))
    ordered = sorted(groups, key=len)
    out: list[tuple[bytes, int, tuple[re.Pattern[bytes], ...]]] = []
    for i, prefix in enumerate(ordered):
        inside = [j for j in range(i) if ordered[j] and ordered[j] in prefix]
        guard = max(inside, key=lambda j: len(ordered[j])) if inside else -1
        out.append((prefix, guard, tuple(groups[prefix])))
    return tuple(out)


# Characters with a meaning of their own in a pattern; any other byte (and any escaped
# punctuation) matches itself.
_SPECIAL = frozenset(b".^$*+?{}[]()|\\")
_QUANTIFIERS = frozenset(b"*+?{")


def literal_prefix(pattern: bytes) -> bytes:
    """The text every match of ``pattern`` starts with (``b""`` when none is certain):
    ``rand\\w*\\(`` -> ``rand``, ``\\.eval\\(`` -> ``.eval(``, ``ab?c`` -> ``a``."""
    if pattern.startswith(b"(?"):
        return b""  # inline flags or a group: nothing certain without reading further
    out = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == ord("\\"):
            if i + 1 >= len(pattern) or pattern[i + 1:i + 2].isalnum():
                break  # a class (\\w, \\d), an anchor (\\b) or a reference (\\1)
            char, width = pattern[i + 1], 2
        elif c in _SPECIAL:
            break
        else:
            char, width = c, 1
        if pattern[i + width:i + width + 1] and pattern[i + width] in _QUANTIFIERS:
            break  # `b?`: the character may be absent (or repeated)
        out.append(char)
        i += width
    return bytes(out)


def split_alternatives(pattern: bytes) -> list[bytes]:
    """Patterns that together match where ``pattern`` does: its top-level alternatives, with
    a leading group of alternatives (``(?:a|b)rest``) spread over the rest (``arest``,
    ``brest``). A pattern this cannot read safely (inline global flags, unbalanced
    brackets) stays whole."""
    if pattern.startswith(b"(?") and re.match(rb"\(\?[aiLmsux]+\)", pattern):
        return [pattern]
    parts = _split_top(pattern)
    if parts is None:
        return [pattern]
    out: list[bytes] = []
    for part in parts:
        end = _group_end(part) if part.startswith(b"(?:") else None
        inner = None if end is None else _split_top(part[3:end])
        if end is None or inner is None or len(inner) < 2 or (
                part[end + 1:end + 2] in (b"*", b"+", b"?", b"{")):
            out.append(part)
        else:
            out.extend(choice + part[end + 1:] for choice in inner)
    return out


def _scan(pattern: bytes) -> list[tuple[int, int]] | None:
    """(index, depth) of each byte outside escapes and character classes; None when the
    brackets do not balance."""
    found: list[tuple[int, int]] = []
    depth = 0
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i:i + 1]
        if c == b"\\":
            i += 2
            continue
        if c == b"[":
            i += 1
            if pattern[i:i + 1] == b"^":
                i += 1
            if pattern[i:i + 1] == b"]":
                i += 1
            while i < n and pattern[i:i + 1] != b"]":
                i += 2 if pattern[i:i + 1] == b"\\" else 1
            if i >= n:
                return None
            i += 1
            continue
        if c == b"(":
            depth += 1
        elif c == b")":
            depth -= 1
            if depth < 0:
                return None
        found.append((i, depth))
        i += 1
    return found if depth == 0 else None


def _split_top(pattern: bytes) -> list[bytes] | None:
    scanned = _scan(pattern)
    if scanned is None:
        return None
    cuts = [i for i, depth in scanned if depth == 0 and pattern[i:i + 1] == b"|"]
    bounds = [-1, *cuts, len(pattern)]
    return [pattern[a + 1:b] for a, b in pairwise(bounds)]


def _group_end(part: bytes) -> int | None:
    """The index of the ``)`` that closes the group ``part`` opens with."""
    scanned = _scan(part)
    if scanned is None:
        return None
    return next((i for i, depth in scanned if depth == 0 and part[i:i + 1] == b")"), None)


@cache
def _byte_groups(triggers: tuple[str, ...], requires: tuple[tuple[str, ...], ...]
                 ) -> tuple[tuple[tuple[bytes, tuple[bytes, ...]], ...], ...]:
    """The trigger groups as bytes; each non-empty group needs one match. The rarest
    groups come first, as far as the words tell: a file that fails one group is done. A
    group of longer words is the rarer (``noqa`` beside ``mem``), and of words as long, the
    smaller group is both cheaper to scan for and usually the rarer (``backward(`` beside
    nine words for state). Each group is split into clusters (:func:`_clusters`)."""
    groups = [tuple(t.encode("utf-8") for t in group) for group in (triggers, *requires)]
    return tuple(_clusters(group) for group in sorted(
        groups, key=lambda g: (-min(map(len, g), default=0), len(g))))


def _clusters(words: tuple[bytes, ...]) -> tuple[tuple[bytes, tuple[bytes, ...]], ...]:
    """(guard, words) pairs covering ``words``: a text that holds none of a guard holds none of
    its words, so one scan of the file stands for several where the guard is absent, as it
    usually is (``batch`` for ``batch_i``, ``batchi``, ``i_batch``, ``ibatch``). A guard is the
    longest text of three or more characters that most words share (two or more); a word
    that shares none is its own guard."""
    left = list(words)
    out: list[tuple[bytes, tuple[bytes, ...]]] = []
    while left:
        best: tuple[tuple[int, int], bytes, list[bytes]] | None = None
        for part in sorted({w[i:j] for w in left for i in range(len(w))
                            for j in range(i + 3, len(w) + 1)}):
            covered = [w for w in left if part in w]
            if len(covered) < 2:
                continue
            key = (len(covered), len(part))
            if best is None or key > best[0]:
                best = (key, part, covered)
        if best is None:
            break
        _, guard, covered = best
        out.append((guard, tuple(covered)))
        left = [w for w in left if w not in covered]
    return (*out, *((w, (w,)) for w in left))

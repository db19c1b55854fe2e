"""Argument edits on a libcst ``Call`` that several fixes share.

Fixes must keep the call's layout and every comment in it: a one-line call stays on one line,
a call with one argument per line gets the new argument on its own line, and a comment stays
on the line of the argument it was written next to. The whitespace between two tokens is a
"gap"; an edit that removes or inserts tokens merges or splits gaps, never drops one.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

Separator = cst.SimpleWhitespace | cst.ParenthesizedWhitespace
Gap = cst.BaseParenthesizableWhitespace


def _bare(ws: Gap) -> Separator:
    """The gap without its comments: a line break and the indentation, or one space."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(newline=ws.first_line.newline),
            empty_lines=[],
            indent=ws.indent,
            last_line=ws.last_line,
        )
    return cst.SimpleWhitespace(ws.value if isinstance(ws, cst.SimpleWhitespace) else " ")


def argument_separator(call: cst.Call) -> Separator:
    """The whitespace this call puts after the comma between two arguments."""
    args = call.args
    if len(args) >= 2 and isinstance(args[0].comma, cst.Comma):
        return _bare(args[0].comma.whitespace_after)
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return _bare(call.whitespace_before_args)
    return cst.SimpleWhitespace(" ")


def _column(call: cst.Call) -> cst.SimpleWhitespace:
    """The indentation of an argument on a line of its own (past the block's indent)."""
    sep = argument_separator(call)
    if isinstance(sep, cst.ParenthesizedWhitespace):
        return sep.last_line
    return cst.SimpleWhitespace("    ")


def merge_gaps(gaps: Sequence[Gap], column: cst.SimpleWhitespace, *,
               closing: bool = False) -> Gap:
    """One gap that stands for several consecutive ones (the tokens between them removed):
    it starts as the first multi-line gap starts, ends as the last one ends (so the next
    token keeps its indentation), and keeps every comment in order; a trailing comment of
    a later gap moves to a line of its own at ``column``. On one line, the first gap stays
    (``f(a, c)``), or the last one where the gap leads to the ``closing`` bracket."""
    lines = [g for g in gaps if isinstance(g, cst.ParenthesizedWhitespace)]
    if not lines:
        return (gaps[-1] if closing else gaps[0]) if gaps else cst.SimpleWhitespace("")
    empty = list(lines[0].empty_lines)
    for gap in lines[1:]:
        if gap.first_line.comment is not None:
            empty.append(cst.EmptyLine(indent=True, whitespace=column,
                                       comment=gap.first_line.comment,
                                       newline=gap.first_line.newline))
        empty.extend(gap.empty_lines)
    return lines[0].with_changes(empty_lines=empty, indent=lines[-1].indent,
                                 last_line=lines[-1].last_line)


def has_comment(ws: Gap) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace) and (
        ws.first_line.comment is not None or any(e.comment for e in ws.empty_lines))


def _after(arg: cst.Arg) -> list[Gap]:
    """The gaps that follow an argument's value: around its comma, and after it."""
    comma = arg.comma
    gaps: list[Gap] = []
    if isinstance(comma, cst.Comma):
        gaps += [comma.whitespace_before, comma.whitespace_after]
    return [*gaps, arg.whitespace_after_arg]


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``f(a, b)`` -> ``f(a, b, <arg>)``, keeping a trailing comma where the call had one.

    The gap between the last argument and the closing bracket splits in two: its comments
    stay after the old last argument, its line break and indentation lead to the bracket.
    """
    if not call.args:
        return call.with_changes(args=[arg])
    *head, last = call.args
    trailing = last.comma
    closing = merge_gaps(_after(last)[1:] if isinstance(trailing, cst.Comma)
                         else _after(last), _column(call), closing=True)
    separator: Gap = argument_separator(call)
    if has_comment(closing):
        assert isinstance(closing, cst.ParenthesizedWhitespace)
        separator = closing.with_changes(
            indent=True if not isinstance(separator, cst.ParenthesizedWhitespace)
            else separator.indent,
            last_line=_column(call))
    before = trailing.whitespace_before if isinstance(trailing, cst.Comma) \
        else cst.SimpleWhitespace("")
    new_last = last.with_changes(
        comma=cst.Comma(whitespace_before=before, whitespace_after=separator),
        whitespace_after_arg=cst.SimpleWhitespace(""))
    end = _bare(closing)
    if isinstance(trailing, cst.Comma):
        added = arg.with_changes(comma=cst.Comma(whitespace_after=end))
    else:
        added = arg.with_changes(whitespace_after_arg=end)
    return call.with_changes(args=[*head, new_last, added])


def prepend_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``f(a, b)`` -> ``f(<arg>, a, b)``."""
    if not call.args:
        return call.with_changes(args=[arg])
    first = arg.with_changes(comma=cst.Comma(whitespace_after=argument_separator(call)))
    return call.with_changes(args=[first, *call.args])


def remove_arg(call: cst.Call, dropped: cst.Arg) -> cst.Call:
    """The call without ``dropped``; the comments around it stay, the commas stay valid.

    The gaps on both sides of the removed argument merge into one; a call left without
    arguments and without comments becomes ``f()``.
    """
    args = list(call.args)
    index = next(i for i, a in enumerate(args) if a is dropped)
    column = _column(call)
    removed = _after(dropped)
    if index == 0:
        # The gap after the opening bracket absorbs the removed argument's.
        rest = args[1:]
        merged = merge_gaps([call.whitespace_before_args, *removed], column, closing=not rest)
        if not rest and not has_comment(merged):
            merged = cst.SimpleWhitespace("")
        return call.with_changes(whitespace_before_args=merged, args=rest)
    previous = args[index - 1]
    comma = previous.comma
    assert isinstance(comma, cst.Comma)  # an argument follows it
    before = [comma.whitespace_after, previous.whitespace_after_arg]
    if index + 1 < len(args) or isinstance(dropped.comma, cst.Comma):
        # The previous comma stays: it leads to the next argument, or is now the trailing one.
        gap = merge_gaps([*before, *removed], column, closing=index + 1 == len(args))
        previous = previous.with_changes(
            comma=comma.with_changes(whitespace_after=gap),
            whitespace_after_arg=cst.SimpleWhitespace(""))
    else:
        gap = merge_gaps([comma.whitespace_before, *before, *removed], column, closing=True)
        previous = previous.with_changes(comma=cst.MaybeSentinel.DEFAULT,
                                         whitespace_after_arg=gap)
    return call.with_changes(args=[*args[:index - 1], previous, *args[index + 1:]])


def has_keyword(call: cst.Call, name: str) -> bool:
    return any(a.keyword is not None and a.keyword.value == name for a in call.args)


def has_star_args(call: cst.Call) -> bool:
    """``*args`` or ``**kwargs`` make the argument list unknowable."""
    return any(a.star for a in call.args)


def positional_count(call: cst.Call) -> int:
    return sum(1 for a in call.args if a.keyword is None and not a.star)

"""Argument edits on a libcst ``Call`` that several fixes share.

Fixes must keep the call's layout: a one-line call stays on one line, and a call with one
argument per line gets the new argument on its own line. Separators are copied from the call
itself with any comment stripped, so a comment is never duplicated.
"""

from __future__ import annotations

import libcst as cst

Separator = cst.SimpleWhitespace | cst.ParenthesizedWhitespace


def _without_comment(ws: cst.BaseParenthesizableWhitespace) -> Separator:
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(newline=ws.first_line.newline),
            empty_lines=[],
            indent=ws.indent,
            last_line=ws.last_line,
        )
    return cst.SimpleWhitespace(" ")


def argument_separator(call: cst.Call) -> Separator:
    """The whitespace this call puts after the comma between two arguments."""
    args = call.args
    if len(args) >= 2 and isinstance(args[0].comma, cst.Comma):
        return _without_comment(args[0].comma.whitespace_after)
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return _without_comment(call.whitespace_before_args)
    return cst.SimpleWhitespace(" ")


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
    """``f(a, b)`` -> ``f(a, b, <arg>)``, keeping a trailing comma where the call had one."""
    if not call.args:
        return call.with_changes(args=[arg])
    *head, last = call.args
    trailing = last.comma
    comma = cst.Comma(whitespace_after=argument_separator(call))
    if isinstance(trailing, cst.Comma):
        comma = trailing.with_changes(whitespace_after=argument_separator(call))
        if isinstance(trailing.whitespace_after, cst.ParenthesizedWhitespace):
            # The trailing comma's whitespace leads to the closing bracket; it moves to the new arg.
            comma = cst.Comma(whitespace_after=argument_separator(call))
    new_last = last.with_changes(comma=comma)
    return call.with_changes(args=[*head, new_last, arg.with_changes(comma=trailing)])


def prepend_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``f(a, b)`` -> ``f(<arg>, a, b)``."""
    if not call.args:
        return call.with_changes(args=[arg])
    first = arg.with_changes(comma=cst.Comma(whitespace_after=argument_separator(call)))
    return call.with_changes(args=[first, *call.args])


def has_keyword(call: cst.Call, name: str) -> bool:
    return any(a.keyword is not None and a.keyword.value == name for a in call.args)


def has_star_args(call: cst.Call) -> bool:
    """``*args`` or ``**kwargs`` make the argument list unknowable."""
    return any(a.star for a in call.args)


def positional_count(call: cst.Call) -> int:
    return sum(1 for a in call.args if a.keyword is None and not a.star)

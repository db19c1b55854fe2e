#!/usr/bin/env bash
# Print "VERSION BINDIR" for each of Python 3.10, 3.12 and 3.13 found on this machine (on
# PATH, or installed by pyenv without being its global version); .ci/run tests each of them.
for v in 3.10 3.12 3.13; do
    found=""
    if command -v "python$v" >/dev/null 2>&1 && "python$v" -c "pass" >/dev/null 2>&1; then
        found="$(dirname "$(python$v -c 'import sys; print(sys.executable)')")"
    elif command -v pyenv >/dev/null 2>&1; then
        for dir in "$(pyenv root)"/versions/"$v".*/bin; do
            [ -x "$dir/python$v" ] && found="$dir"
        done
    fi
    [ -n "$found" ] && echo "$v $found"
done
exit 0

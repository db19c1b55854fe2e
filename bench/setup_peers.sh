#!/usr/bin/env bash
# Prepare what bench/lint_speed.py compares against, under bench/.work/ (git-ignored):
#   - peers-venv: TorchFix 0.7.0 and Fixit 2.2.1 in their own venv (TorchFix pins an old libcst,
#     so they cannot share memlint's environment);
#   - transformers: the src/transformers tree of the transformers 5.23.0 sdist.
# Safe to run again: every step is skipped when its result is already there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$here/.work"
python="${PYTHON:-python3}"
mkdir -p "$work"

venv="$work/peers-venv"
if [ ! -x "$venv/bin/torchfix" ] || [ ! -x "$venv/bin/fixit" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "torchfix==0.7.0" "fixit==2.2.1"
fi

tree="$work/transformers"
if [ ! -d "$tree" ]; then
    sdist="$work/transformers-5.23.0.tar.gz"
    if [ ! -f "$sdist" ]; then
        "$python" -m pip download --quiet --no-deps --no-binary :all: "transformers==5.23.0" -d "$work"
    fi
    tmp="$(mktemp -d "$work/extract.XXXXXX")"
    tar -xzf "$sdist" -C "$tmp" "transformers-5.23.0/src/transformers"
    mv "$tmp/transformers-5.23.0/src/transformers" "$tree"
    rm -rf "$tmp"
fi

echo "peers: $("$venv/bin/torchfix" --version 2>/dev/null || echo torchfix), $("$venv/bin/fixit" --version 2>/dev/null || echo fixit)"
echo "corpus: $tree ($(find "$tree" -name '*.py' | wc -l) .py files)"

#!/usr/bin/env bash
# Prepare the real test suites bench/gpumem_suites.py runs, under bench/.work/ (git-ignored):
#   - suites-venv: a venv that sees this checkout's environment (torch, pytest, the plugin)
#     through a .pth file and adds each suite's own dependencies from the package registry;
#   - skorch, pytorch-metric-learning, kornia: their pinned sdists, unpacked.
# Safe to run again: every step is skipped when its result is already there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$here/.work"
python="${PYTHON:-python3}"
mkdir -p "$work"

# name==version, then the extra test dependencies its tests import
suites=(
    "skorch==1.4.0|scikit-learn scipy numpy tabulate tqdm pandas flaky safetensors"
    "pytorch-metric-learning==2.9.0|numpy scikit-learn tqdm"
    "kornia==0.9.0|kornia-rs packaging numpy"
)

venv="$work/suites-venv"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    base_site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    # addsitedir also runs that environment's own .pth files (the editable install's finder)
    echo "import site; site.addsitedir('$base_site')" > "$venv_site/_gpumem_base.pth"
fi

for entry in "${suites[@]}"; do
    spec="${entry%%|*}"
    deps="${entry#*|}"
    name="${spec%%==*}"
    version="${spec#*==}"
    tree="$work/$name-$version"
    if [ ! -d "$tree" ]; then
        "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: "$spec" -d "$work/sdists"
        sdist="$(ls "$work"/sdists/* | grep -i -E "/${name//-/[-_]}-$version\.(tar\.gz|zip)$" | head -1)"
        tmp="$(mktemp -d "$work/extract.XXXXXX")"
        tar -xzf "$sdist" -C "$tmp"
        mv "$tmp"/* "$tree"
        rm -rf "$tmp"
    fi
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet $deps
    "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$tree" \
        || "$venv/bin/python" -m pip install --quiet --no-deps "$tree"
    echo "ready: $tree"
done

#!/usr/bin/env bash
# Prepare the real test suites bench/gpumem_suites.py runs, under bench/.work/ (git-ignored):
#   - suites-venv: a venv that sees this checkout's environment (torch, pytest, the plugin)
#     through a .pth file and adds each suite's own dependencies from the package registry;
#   - each suite's pinned sdist, unpacked; its tests run from that tree (python -m pytest puts
#     the tree first on sys.path), so the package itself is never built or installed.
# Which suites, and why these versions (the sdists of pytorch-metric-learning, every version
# tried, and of kornia after 0.6.5 ship no tests): see the docstring of bench/gpumem_suites.py.
# Safe to run again: every step is skipped when its result is already there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$here/.work"
python="${PYTHON:-python3}"
mkdir -p "$work"

# name==version, then the dependencies its tests import
suites=(
    "skorch==1.4.0|scikit-learn scipy numpy tabulate tqdm pandas flaky safetensors"
    "kornia==0.6.5|packaging numpy"
    "gpytorch==1.15.2|linear_operator>=0.6.1 mpmath>=0.19,<=1.3 scikit-learn scipy"
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
    echo "ready: $tree"
done

# kornia's sdist ships test/ but not the repository's root conftest.py, whose fixtures give
# every test its device and dtype; these two stand in for it (float32 only, on the CPU
# unless KORNIA_TEST_DEVICE names another device, as on a GPU machine).
cat > "$work/kornia-0.6.5/conftest.py" <<'PY'
import os

import pytest
import torch


@pytest.fixture
def device():
    return torch.device(os.environ.get("KORNIA_TEST_DEVICE", "cpu"))


@pytest.fixture
def dtype():
    return torch.float32
PY

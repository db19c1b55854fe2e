#!/usr/bin/env bash
# Ready this checkout for a lent GPU machine, which reaches no package registry: the test
# dependencies its image lacks as cp312 wheels in .whl/, and the real suites' trees (from
# bench/setup_suites.sh) in .suites/; both git-ignored through .git/info/exclude. Then, in
# one device call that carries .whl and .suites (bench/RESULTS-gpu.md, 2026-11-27):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
#   export PYTHONPATH=/tmp/site && python3 -m pip install -q --no-deps --no-build-isolation -e . &&
#   SUITES_WORK=.suites STEP_TIMEOUT=330 bash bench/gpu_checklist.sh $OUT
# The image already holds torch, pytest, pytest-xdist, pytest-timeout, hypothesis,
# nvidia-ml-py, pathspec, PyYAML, attrs, gpytorch, scikit-learn, pandas, tabulate and
# safetensors (/work/.library/device/KINDS.md); versions below are those CI resolves today.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .git/info
for path in /.whl/ /.suites/; do
    grep -qxF "$path" .git/info/exclude 2>/dev/null || echo "$path" >> .git/info/exclude
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    libcst==1.9.0 hypothesmith==0.3.3 lark==1.3.1 jsonschema==4.26.0 \
    jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==0.30.0 pre-commit==4.7.0 \
    cfgv==3.5.0 identify==2.6.20 nodeenv==1.12.0 virtualenv==21.15.11 distlib==0.4.4 \
    platformdirs==4.14.8 pytest-rerunfailures==16.7 flaky==3.8.1 pytest-repeat==0.9.4 \
    pytest-randomly==5.1.0
bash bench/setup_suites.sh
mkdir -p .suites
for tree in skorch-1.4.0 kornia-0.6.5 gpytorch-1.15.2; do
    rm -rf ".suites/$tree" && cp -r "bench/.work/$tree" .suites/  # fresh: conftest stand-ins
done
find .suites -name __pycache__ -prune -exec rm -rf {} +
du -sh .whl .suites

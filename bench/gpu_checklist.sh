#!/usr/bin/env bash
# Everything bench/RESULTS-gpu.md records, on a CUDA machine, with logs in ${1:-gpu-logs}/
# (seven files, one per step group, so a lent machine's limit on returned files holds).
# Needs torch with CUDA, pytest-xdist and nvidia-ml-py already installed, and this package
# installed (pip install -e ".[torch,test]", or --no-deps where no registry is reachable:
# bench/gpu_prepare.sh readies the wheels and suites for a lent machine, and says how).
# The real suites (issue 12's CUDA run) need bench/setup_suites.sh's trees under
# ${SUITES_WORK:-bench/.work} and an interpreter that holds their dependencies
# (${SUITES_PYTHON:-python3}); they run in the background, one core each, beside the rest.
# STEP_TIMEOUT (seconds, default 600) stops any one step, so a lease's limit keeps the logs.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${1:-gpu-logs}"
limit="${STEP_TIMEOUT:-600}"
mkdir -p "$logs"
export PYTHONUNBUFFERED=1
step() {  # step LOG COMMAND...: run, keep the output, go on after a failure
    local log="$logs/$1"; shift
    echo "== $*" >> "$log"
    timeout "$limit" "$@" >> "$log" 2>&1
    echo "== exit $? (checklist at ${SECONDS}s)" >> "$log"
}
{ nvidia-smi; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"; } > "$logs/gpu_tests.txt" 2>&1
# kornia runs whole on CUDA; skorch and gpytorch only their CUDA tests (`-k cuda`: what a
# GPU adds over CI, and skorch's whole suite alone outlasts a 15-minute lease), unless
# SUITES_ALL=1. Each against plain pytest, with and without the allocation history.
if [ -d "${SUITES_WORK:-bench/.work}/skorch-1.4.0" ]; then
    for suite in skorch kornia gpytorch; do
        select=()
        if [ "$suite" != kornia ] && [ -z "${SUITES_ALL:-}" ]; then select=(-- -k cuda); fi
        step "suite-$suite.txt" env KORNIA_TEST_DEVICE=cuda python3 bench/gpumem_suites.py \
            --suite "$suite" --backend cuda --backend cuda-fast \
            --work "${SUITES_WORK:-bench/.work}" --python "${SUITES_PYTHON:-python3}" \
            "${select[@]}" &
    done
fi
step gpu_tests.txt python3 -m pytest tests/gpu -v -rs -rP -p no:cacheprovider -p no:randomly
step examples.txt python3 -m pytest examples/gpumem --gpumem -p no:cacheprovider
step examples.txt python3 bench/gpumem_zoo.py
step plugin_tests.txt python3 -m pytest tests/gpumem -q -n 6 -p no:cacheprovider --gpumem -rfEs
step cuda_bench.txt python3 bench/cuda_experiments.py
wait  # the suites use the GPU too: CUDA synchronisation spins on the CPU while they run
step cuda_bench.txt python3 bench/gpumem_overhead.py --backend cuda --tests 3000 --rounds "${OVERHEAD_ROUNDS:-3}"

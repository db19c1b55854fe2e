#!/usr/bin/env bash
# Everything bench/RESULTS-gpu.md records, on a CUDA machine, with logs in ${1:-gpu-logs}/.
# Needs torch with CUDA, pytest-xdist and nvidia-ml-py already installed, and this package
# installed (pip install -e ".[torch,test]", or --no-deps where no registry is reachable).
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${1:-gpu-logs}"
mkdir -p "$logs"
export PYTHONUNBUFFERED=1
step() {  # step LOG COMMAND...: run, keep the output, go on after a failure
    local log="$logs/$1"; shift
    echo "== $*" | tee -a "$log"
    "$@" >> "$log" 2>&1
    echo "== exit $?" | tee -a "$log"
}
{ nvidia-smi; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"; } > "$logs/versions.txt" 2>&1
step gpu_tests.txt python3 -m pytest tests/gpu -v -rs -rP -p no:cacheprovider
step suite.txt python3 -m pytest tests -q -n 8 -p no:cacheprovider --gpumem -rfEs
step examples.txt python3 -m pytest examples/gpumem --gpumem -p no:cacheprovider
step zoo.txt python3 bench/gpumem_zoo.py
step experiments.txt python3 bench/cuda_experiments.py
step overhead.txt python3 bench/gpumem_overhead.py --backend cuda --tests 3000 --rounds 3

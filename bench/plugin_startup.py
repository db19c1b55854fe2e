"""What loading pytest_gpumem costs a pytest run that does not pass --gpumem.

pytest imports every ``pytest11`` plugin at start-up, whether or not its options are used.
This times the import of the plugin module in fresh processes, after pytest itself is
imported, and lists what it imports (torch and pynvml must not be among them).

    python bench/plugin_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBE = r"""
import sys, time
import pytest, _pytest.runner, _pytest.terminal
before = set(sys.modules)
start = time.perf_counter()
import pytest_gpumem.plugin
took = time.perf_counter() - start
new = sorted(set(sys.modules) - before)
print(took)
print(" ".join(new))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: list[float] = []
    modules: list[str] = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        times.append(float(out[0]) * 1000)
        modules = out[1].split()
    heavy = [m for m in modules if m.split(".")[0] in ("torch", "pynvml", "numpy")]
    print(f"import pytest_gpumem.plugin after pytest: median {statistics.median(times):.1f} ms "
          f"(min {min(times):.1f}, max {max(times):.1f}; {args.runs} fresh processes)")
    print(f"modules it imports: {len(modules)}, of them its own: "
          f"{sum(m.startswith('pytest_gpumem') for m in modules)}; "
          f"torch/pynvml/numpy: {', '.join(heavy) or 'none'}")
    return 1 if heavy else 0


if __name__ == "__main__":
    sys.exit(main())

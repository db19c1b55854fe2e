"""``pip install`` with PyTorch's CPU wheel index added when it can be reached.

On plain PyPI, ``torch==2.13.0`` on Linux is the CUDA build (plus about 2 GB of CUDA
libraries); the CPU index serves ``2.13.0+cpu``, which pip prefers as the higher version.
Behind a firewall or offline the index is skipped (pip would otherwise retry it for
minutes) and whatever the configured indexes and wheel folders hold is used. tox
(``install_command``) and ``.ci/run`` both install through this script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

CPU_INDEX = os.environ.get("MEMLINT_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")


def reachable(url: str, timeout: float = 5.0) -> bool:
    if not url:
        return False
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    if argv == ["--reachable"]:  # for scripts: exit 0 when the CPU index answers
        return 0 if reachable(CPU_INDEX) else 1
    extra = ["--extra-index-url", CPU_INDEX] if reachable(CPU_INDEX) else []
    if not extra:
        print(f"pip_install: {CPU_INDEX or 'the CPU index'} not reachable; using the "
              "configured indexes only", file=sys.stderr)
    return subprocess.call([sys.executable, "-m", "pip", "install", *extra, *argv])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

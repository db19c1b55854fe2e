"""Peak tensor memory of small training steps: CPU backend, analytic, and CUDA backend.

For each model (MLP, CNN, transformer block) one warm-up step runs first; then one step
is measured above the memory alive before it. The CPU column is the storage tracker
(exact bytes, and rounded to the CUDA allocator's 512-byte blocks); the analytic column
is worked out by hand where the step is simple enough (the MLP); the CUDA column is the
caching allocator's peak, printed only when CUDA is available.

    python bench/gpumem_zoo.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gpumem.backends.cpu import StorageTracker

Step = Callable[[], None]


@dataclass
class Case:
    name: str
    build: Callable[[torch.device], tuple[Step, int | None]]


def _training_step(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable[..., torch.Tensor]
) -> Step:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def mlp(device: torch.device) -> tuple[Step, int | None]:
    batch, widths = 64, (512, 1024, 1024, 10)
    model = nn.Sequential(
        nn.Linear(widths[0], widths[1]), nn.ReLU(),
        nn.Linear(widths[1], widths[2]), nn.ReLU(),
        nn.Linear(widths[2], widths[3]),
    ).to(device)
    x = torch.randn(batch, widths[0], device=device)
    y = torch.randint(0, widths[3], (batch,), device=device)
    # At the first layer's backward every gradient exists, plus the 64 x 1024 gradient
    # flowing into it. (The loss and its seed gradient, two fp32 scalars, come on top.)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    analytic = params + batch * widths[1] * 4
    return _training_step(model, x, y, nn.functional.cross_entropy), analytic


def cnn(device: torch.device) -> tuple[Step, int | None]:
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10),
    ).to(device)
    x = torch.randn(32, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    return _training_step(model, x, y, nn.functional.cross_entropy), None


def transformer_block(device: torch.device) -> tuple[Step, int | None]:
    model = nn.TransformerEncoderLayer(
        d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True
    ).to(device)
    x = torch.randn(16, 64, 256, device=device)
    y = torch.randn(16, 64, 256, device=device)
    return _training_step(model, x, y, nn.functional.mse_loss), None


CASES = (Case("MLP", mlp), Case("CNN", cnn), Case("transformer block", transformer_block))


def cpu_peak(case: Case, round_bytes: int) -> tuple[int, int | None]:
    torch.manual_seed(0)
    step, analytic = case.build(torch.device("cpu"))
    step()
    tracker = StorageTracker(round_bytes=round_bytes)
    with tracker:
        tracker.open_window()
        step()
        peak = tracker.close_window().peak_bytes
    tracker.forget()
    return peak, analytic


def cuda_peak(case: Case) -> int | None:
    if not torch.cuda.is_available():
        return None
    from pytest_gpumem.backends.cuda import CudaBackend

    backend = CudaBackend(record_history=False)
    torch.manual_seed(0)
    step, _ = case.build(torch.device(backend.device))
    step()
    tracker = backend.tracker()
    tracker.start()
    tracker.body_start()
    step()
    peak = tracker.body_end().peak_bytes
    tracker.close()
    return peak


def main() -> None:
    torch.set_num_threads(1)
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "not available"
    print(f"torch {torch.__version__}; CUDA: {cuda}")
    header = ("model", "CPU exact B", "CPU 512-rounded B", "analytic B", "CPU - analytic",
              "CUDA B")
    print(f"{header[0]:<18} {header[1]:>12} {header[2]:>18} {header[3]:>11} {header[4]:>15}"
          f" {header[5]:>11}")
    for case in CASES:
        exact, analytic = cpu_peak(case, 1)
        rounded, _ = cpu_peak(case, 512)
        gpu = cuda_peak(case)
        diff = "-" if analytic is None else f"{exact - analytic:+d}"
        print(f"{case.name:<18} {exact:>12,} {rounded:>18,} "
              f"{'-' if analytic is None else f'{analytic:,}':>11} {diff:>15} "
              f"{'-' if gpu is None else f'{gpu:,}':>11}")


if __name__ == "__main__":
    main()

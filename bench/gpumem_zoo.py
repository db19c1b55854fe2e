"""Peak tensor memory of small training steps: CPU backend, analytic, CUDA allocator, CUDA
backend.

For each model one warm-up step runs first; then one step is measured above the memory
alive before it. Columns:

- CPU exact / CPU 512: the CPU backend's storage tracker (exact bytes, and rounded up to
  the CUDA allocator's 512-byte blocks), the estimate CPU-only CI gets;
- analytic: worked out by hand where the step is simple enough (the MLP);
- CUDA alloc: the reference, taken without the plugin: ``reset_peak_memory_stats``, the
  step, ``max_memory_allocated`` minus ``memory_allocated`` before it (steady state: the
  warm-up step already created the cuBLAS workspaces);
- CUDA backend: the plugin's CUDA tracker around the same step, as a marked test sees it;
- backend - alloc: must be 0;
- CPU 512 / CUDA: how far the CPU estimate is from the real peak.

The bf16 autocast case runs autocast on both devices; the CPU's autocast casts a different
set of ops than CUDA's, which the table shows.

    python bench/gpumem_zoo.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gpumem.backends.cpu import StorageTracker

Step = Callable[[], None]


@dataclass
class Case:
    name: str
    build: Callable[[torch.device], tuple[Step, int | None]]


def _training_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[..., torch.Tensor],
    context: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> Step:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        with context():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        # Cleared at the end, so each step starts without gradients on both devices. (Cleared
        # at the start instead, the previous step's gradients are alive when a measurement
        # begins: CUDA nets their free against the new ones, the CPU tracker cannot.)
        opt.zero_grad(set_to_none=True)

    return step


def _mlp_model(widths: tuple[int, ...]) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(widths[0], widths[1]), nn.ReLU(),
        nn.Linear(widths[1], widths[2]), nn.ReLU(),
        nn.Linear(widths[2], widths[3]),
    )


def mlp(device: torch.device) -> tuple[Step, int | None]:
    batch, widths = 64, (512, 1024, 1024, 10)
    model = _mlp_model(widths).to(device)
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


def _encoder_layer() -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(
        d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True
    )


def transformer_block(device: torch.device) -> tuple[Step, int | None]:
    model = _encoder_layer().to(device)
    x = torch.randn(16, 64, 256, device=device)
    y = torch.randn(16, 64, 256, device=device)
    return _training_step(model, x, y, nn.functional.mse_loss), None


def mlp_bf16_autocast(device: torch.device) -> tuple[Step, int | None]:
    batch, widths = 256, (512, 2048, 2048, 10)
    model = _mlp_model(widths).to(device)
    x = torch.randn(batch, widths[0], device=device)
    y = torch.randint(0, widths[3], (batch,), device=device)

    def bf16() -> AbstractContextManager[object]:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    return _training_step(model, x, y, nn.functional.cross_entropy, bf16), None


class _Checkpointed(nn.Module):
    """Four encoder layers whose activations are recomputed in backward, not stored."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_encoder_layer() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x


def checkpointed_blocks(device: torch.device) -> tuple[Step, int | None]:
    model = _Checkpointed().to(device)
    x = torch.randn(16, 64, 256, device=device)
    y = torch.randn(16, 64, 256, device=device)
    return _training_step(model, x, y, nn.functional.mse_loss), None


CASES = (
    Case("MLP", mlp),
    Case("CNN", cnn),
    Case("transformer block", transformer_block),
    Case("MLP bf16 autocast", mlp_bf16_autocast),
    Case("4 checkpointed blocks", checkpointed_blocks),
)


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


def cuda_allocator_peak(case: Case, device: torch.device) -> int:
    """The reference: torch's own counters around one steady-state step, no plugin."""
    torch.manual_seed(0)
    step, _ = case.build(device)
    step()
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device)) - before


def cuda_backend_peak(case: Case) -> int:
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
    tracker.finish()
    tracker.close()
    return peak


def _cell(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def main() -> None:
    torch.set_num_threads(1)
    cuda = torch.cuda.is_available()
    name = torch.cuda.get_device_name() if cuda else "not available"
    print(f"torch {torch.__version__}; CUDA: {name}")
    header = ("model", "CPU exact B", "CPU 512 B", "analytic B", "CUDA alloc B",
              "CUDA backend B", "backend-alloc", "CPU512/CUDA")
    widths = (22, 12, 12, 11, 13, 15, 13, 11)
    print(" ".join(f"{h:<{w}}" if i == 0 else f"{h:>{w}}"
                   for i, (h, w) in enumerate(zip(header, widths, strict=True))))
    for case in CASES:
        exact, analytic = cpu_peak(case, 1)
        rounded, _ = cpu_peak(case, 512)
        alloc = backend = None
        if cuda:
            alloc = cuda_allocator_peak(case, torch.device("cuda", torch.cuda.current_device()))
            backend = cuda_backend_peak(case)
        row = (
            case.name, _cell(exact), _cell(rounded), _cell(analytic), _cell(alloc),
            _cell(backend),
            "-" if alloc is None or backend is None else f"{backend - alloc:+,d}",
            "-" if not alloc else f"{rounded / alloc:.3f}",
        )
        print(" ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}"
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))))


if __name__ == "__main__":
    main()

"""Model and data code building tensors from starred shapes, then moving them to the GPU.

A starred size does not hide the host allocation: `torch.zeros(*shape).to(device)` still
fills a CPU tensor and copies it over. The near misses already pass `device=`, build from
`**kwargs` that may carry a device, only cast the dtype, or stage through pinned memory.
"""

import torch
import torch.nn as nn


class MemoryBank(nn.Module):
    def __init__(self, size, dim):
        super().__init__()
        self.size = size
        self.dim = dim
        self.register_buffer("queue", torch.zeros(size, dim))

    def reset(self, *shape, device):
        self.queue = torch.zeros(*shape).to(device)  # expect: MEM010

    def noisy_keys(self, keys):
        noise = torch.randn(*keys.shape).cuda()  # expect: MEM010
        return keys + 0.01 * noise


class PatchMasker(nn.Module):
    def __init__(self, ratio):
        super().__init__()
        self.ratio = ratio

    def forward(self, x):
        batch, *spatial = x.shape[:-1]
        keep = torch.ones(batch, *spatial, dtype=torch.bool).to(x.device)  # expect: MEM010
        drop = torch.rand(*keep.shape, device=x.device) < self.ratio
        return x * (keep & ~drop).unsqueeze(-1)


def init_hidden(num_layers, batch, hidden, device):
    shape = (num_layers, batch, hidden)
    h0 = torch.zeros(*shape).to(device, non_blocking=True)  # expect: MEM010
    c0 = torch.zeros(*shape, device=device)
    return h0, c0


def make_positions(*dims, device):
    grid = torch.arange(*dims).float().to(device)  # expect: MEM010
    return grid / grid.max()


# ---------------------------------------------------------------------------- near misses


def allocate(shape, device, **factory_kwargs):
    # `factory_kwargs` may already hold `device=` or `pin_memory=`: not read.
    buf = torch.empty(*shape, **factory_kwargs).to(device)
    staged = torch.empty(*shape, pin_memory=True).to(device, non_blocking=True)
    half = torch.zeros(*shape).to(torch.float16)
    like = torch.zeros_like(buf).cuda()
    return buf, staged, half, like


def host_scratch(*shape):
    return torch.zeros(*shape).to("cpu")

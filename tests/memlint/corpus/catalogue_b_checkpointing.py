"""A transformer stack with activation checkpointing, its evaluation and its saving code."""

import os

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        h, _ = self.attn(x, x, x)
        return x + self.mlp(x + h)


class Stack(nn.Module):
    def __init__(self, width, depth, grad_ckpt=True):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.grad_ckpt = grad_ckpt

    def forward(self, x):
        for block in self.blocks:
            if self.grad_ckpt and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x

    def forward_legacy(self, x):
        # Old code path kept for a benchmark: relies on the implicit reentrant default.
        for block in self.blocks:
            x = cp.checkpoint(block, x)  # expect: MEM011
        return x

    def forward_sequential(self, x, segments=2):
        return checkpoint_sequential(self.blocks, segments, x, use_reentrant=False)


@torch.no_grad()
def embed_corpus(stack, batches):
    out = []
    for x in batches:
        # Copied from the training path: checkpointing here only costs time.
        out.append(checkpoint(stack, x, use_reentrant=False))  # expect: MEM011
    return out


def score(stack, x):
    with torch.inference_mode():
        return torch.utils.checkpoint.checkpoint(stack, x)  # expect: MEM011, MEM011


def score_cheaply(stack, x):
    with torch.no_grad():
        return stack(x)


def save_checkpoint(stack, optimizer, step, run_dir):
    path = os.path.join(run_dir, f"step-{step}.pt")
    torch.save({"model": stack.state_dict(), "opt": optimizer.state_dict(), "step": step}, path)
    return path


class Trainer:
    def checkpoint(self, step):
        """The trainer's own checkpoint(): writes state to disk, nothing to do with autograd."""
        with torch.no_grad():
            self.ema.copy_(self.stack.weight)
        return save_checkpoint(self.stack, self.optimizer, step, self.run_dir)

    def maybe_save(self, step):
        with torch.no_grad():
            if step % self.save_every == 0:
                self.checkpoint(step)

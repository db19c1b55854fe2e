"""A diffusion-style U-Net that keeps working on old torch releases: `use_reentrant` is only
passed where the installed torch accepts it, in the several ways real projects spell that."""

import inspect

import torch
import torch.nn as nn
import torch.utils.checkpoint
from packaging import version
from torch.utils.checkpoint import checkpoint

TORCH_GE_1_11 = version.parse(torch.__version__.split("+")[0]) >= version.parse("1.11")
_CKPT_ACCEPTS_KWARG = "use_reentrant" in inspect.signature(checkpoint).parameters


def is_torch_version(op, wanted):
    current = version.parse(torch.__version__.split("+")[0])
    return current >= version.parse(wanted) if op == ">=" else current < version.parse(wanted)


class ResBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(32, channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x, temb):
        return x + self.conv(torch.nn.functional.silu(self.norm(x))) + temb[:, :, None, None]


class DownBlock(nn.Module):
    def __init__(self, channels, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList(ResBlock(channels) for _ in range(layers))
        self.gradient_checkpointing = False

    def forward(self, hidden, temb):
        for resnet in self.resnets:
            if self.training and self.gradient_checkpointing:
                ckpt_kwargs = {"use_reentrant": False} if is_torch_version(">=", "1.11.0") else {}
                hidden = torch.utils.checkpoint.checkpoint(resnet, hidden, temb, **ckpt_kwargs)
            else:
                hidden = resnet(hidden, temb)
        return hidden


class MidBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.first = ResBlock(channels)
        self.second = ResBlock(channels)
        self.gradient_checkpointing = False

    def _run(self, block, hidden, temb):
        if not (self.training and self.gradient_checkpointing):
            return block(hidden, temb)
        elif TORCH_GE_1_11:
            return checkpoint(block, hidden, temb, use_reentrant=False)
        else:
            return checkpoint(block, hidden, temb)

    def forward(self, hidden, temb):
        hidden = self._run(self.first, hidden, temb)
        return self._run(self.second, hidden, temb)


class UpBlock(nn.Module):
    def __init__(self, channels, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList(ResBlock(channels) for _ in range(layers))

    def _checkpointed(self, block, hidden, temb):
        if _CKPT_ACCEPTS_KWARG:
            return checkpoint(block, hidden, temb, use_reentrant=False)
        return checkpoint(block, hidden, temb)

    def _checkpointed_by_trial(self, block, hidden, temb):
        try:
            return checkpoint(block, hidden, temb, use_reentrant=False)
        except TypeError:
            # torch < 1.11: the keyword does not exist yet.
            return checkpoint(block, hidden, temb)

    def forward(self, hidden, temb, trial=False):
        run = self._checkpointed_by_trial if trial else self._checkpointed
        for block in self.resnets:
            hidden = run(block, hidden, temb) if self.training else block(hidden, temb)
        return hidden


if TORCH_GE_1_11:
    def checkpoint_block(block, hidden, temb):
        return checkpoint(block, hidden, temb, use_reentrant=False)
else:
    def checkpoint_block(block, hidden, temb):
        return checkpoint(block, hidden, temb)


class LegacyEncoder(nn.Module):
    """Checkpoints under a flag about training, not about torch: the default is implicit."""

    def __init__(self, channels, layers=4):
        super().__init__()
        self.blocks = nn.ModuleList(ResBlock(channels) for _ in range(layers))
        self.use_checkpoint = True

    def forward(self, hidden, temb):
        hidden = checkpoint(self.blocks[0], hidden, temb, use_reentrant=False)
        for block in self.blocks[1:]:
            if self.use_checkpoint and self.training:
                hidden = checkpoint(block, hidden, temb)  # expect: MEM011
            else:
                hidden = block(hidden, temb)
        return hidden

"""Mixed-precision setup that still supports PyTorch releases without ``torch.amp``.

The old ``torch.cuda.amp`` names appear only as fallbacks: an import in an ``except
ImportError`` block, a constructor in an ``except`` block after the new API failed, and a
branch of a version check. New releases never run them. The one unconditional use of the old
autocast is reported.
"""

import torch

try:
    from torch.amp import GradScaler
except ImportError:
    from torch.cuda.amp import GradScaler

from compat import torch_at_least


def make_scaler(enabled):
    return GradScaler("cuda", enabled=enabled)


def make_scaler_guarded():
    try:
        return torch.amp.GradScaler(device="cuda")
    except (AttributeError, TypeError):
        return torch.cuda.amp.GradScaler()


def make_scaler_versioned(**kwargs):
    if torch_at_least("2.3"):
        return torch.amp.GradScaler("cuda", **kwargs)
    else:
        return torch.cuda.amp.GradScaler(**kwargs)


def autocast_context():
    if hasattr(torch, "amp") and hasattr(torch.amp, "autocast"):
        return torch.amp.autocast("cuda", dtype=torch.float16)
    return torch.cuda.amp.autocast(dtype=torch.float16)


def forward_half(model, x):
    with torch.cuda.amp.autocast():  # expect: MEM015
        return model(x)

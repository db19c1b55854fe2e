"""Version-dependent grad switches, as projects that support old torch releases write them."""

import contextlib

import torch

TORCH_1_9 = hasattr(torch, "inference_mode")


def smart_inference_mode():
    """inference_mode on new torch, no_grad on old: both switch autograd off."""

    def decorate(fn):
        return (torch.inference_mode if TORCH_1_9 else torch.no_grad)()(fn)

    return decorate


def eval_context():
    if TORCH_1_9:
        return torch.inference_mode()
    return torch.no_grad()


def run_without_grad(fn, *args):
    """Runs a callback with autograd off (used by the validator)."""
    with torch.no_grad():
        return fn(*args)


@contextlib.contextmanager
def timed(name):
    yield name

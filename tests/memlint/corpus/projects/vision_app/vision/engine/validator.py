"""Evaluation entry points: most switch grad off through helpers defined elsewhere."""

from contextlib import ExitStack

import torch

from vision import smart_inference_mode
from vision.utils.torch_utils import eval_context, run_without_grad, timed


@smart_inference_mode()
def validate(model, loader):
    model.eval()
    scores = []
    for images, labels in loader:
        scores.append(model(images).argmax(-1) == labels)
    return torch.cat(scores).float().mean()


def evaluate_map(model, loader):
    model.eval()
    with eval_context():
        return [model(images) for images, _ in loader]


def evaluate_with_stack(model, loader):
    with ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        stack.enter_context(timed("eval"))
        model.eval()
        return sum(model(x).sum().item() for x, _ in loader)


def _score_batches(model, loader):
    model.eval()
    return [model(x).max().item() for x, _ in loader]


def score(model, loader):
    return run_without_grad(_score_batches, model, loader)


def evaluate_slow(model, loader):
    model.eval()
    total = 0.0
    for images, labels in loader:
        total += (model(images).argmax(-1) == labels).sum().item()  # expect: MEM002
    return total
